"""An external actor's link to a `runner=ray` learner (a robot's actor node, or any process outside the
learner's own actors): it sends batches of tagged transitions to the learner's inbox (robo_rl.distributed.
inbox) and takes the newest weights, and says at every moment whether the learner is reachable. It needs
Ray and nothing of the training package: it runs on the robot computer.

The caller never waits on the network: `send` queues (bounded: the oldest batch goes when the queue is
full, and is counted), `weights` and `connected` read what a background thread last learned. That thread
talks to Ray with a deadline on every call. When a call fails or misses its deadline (the learner died,
its machine is gone, the cluster is unreachable), the link is marked lost at once, says why in the log, and
tries again every `retry_s` until a learner's inbox answers again (a resumed learner creates a new one).

Ray learns of a killed learner in 0.1-0.2 s, 5-10 ticks of a 50 Hz robot. So the link also keeps a TCP
connection to the learner's liveness beacon (core.liveness), with a thread blocked reading it: the beacon ends
it within milliseconds of the learner beginning to exit, the link is lost then, and the robot holds at its next
tick. Where the connection cannot be made (a firewall), the link says so and relies on Ray's deadlines alone.
"""

from __future__ import annotations

import collections
import logging
import socket
import threading
import time
from typing import Any

NAMESPACE = "robo_rl"  # the Ray namespace of every robo-rl inbox

log = logging.getLogger(__name__)


def first_line(error: BaseException) -> str:
    """An error's message in one line, for logs."""
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


class LearnerLink:
    """The link; `start()` it, `close()` it.

    Args:
        address: the Ray cluster (host:port of its head, or "auto").
        inbox: the learner's inbox name (its `runner.inbox`).
        timeout_s: the deadline of every call to the learner; also how long after the last answer the link
            still counts as connected.
        retry_s: the pause between attempts to reach a lost learner.
        poll_s: the pause between polls for new weights and sends while connected.
        max_queued: batches kept while the learner cannot take them; beyond it the oldest are dropped.
    """

    def __init__(self, address: str, inbox: str, timeout_s: float = 1.0, retry_s: float = 1.0, poll_s: float = 0.02,
                 max_queued: int = 256):
        self.address, self.inbox_name = address, inbox
        self.timeout_s, self.retry_s, self.poll_s = timeout_s, retry_s, poll_s
        self.queue: collections.deque[dict[str, Any]] = collections.deque(maxlen=max_queued)
        self.dropped = self.sent = 0
        self.version = -1
        self._weights: dict[str, Any] | None = None
        self._inbox: Any = None
        self._last_answer = -float("inf")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="learner-link", daemon=True)
        self.why_lost = "not connected yet"
        self._gone = threading.Event()  # set by the liveness watcher: the learner's process ended
        self._liveness: socket.socket | None = None
        self._ended: set[str] = set()  # tokens of the beacons seen ending: their learners are gone

    def start(self) -> "LearnerLink":
        """Start the background thread (it connects on its own)."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the background thread (queued batches are not sent)."""
        self._stop.set()
        self._thread.join(timeout=self.timeout_s + self.retry_s + 1.0)
        self._end_watch()

    @property
    def connected(self) -> bool:
        """Whether the learner answered within the last `timeout_s`, no call has failed since, and its process
        has not ended."""
        return (self._inbox is not None and not self._gone.is_set()
                and time.monotonic() - self._last_answer < self.timeout_s)

    def send(self, batch: dict[str, Any]) -> None:
        """Queue a batch for the learner (the format of robo_rl.distributed.actors.ExperienceActor.collect)."""
        with self._lock:
            if len(self.queue) == self.queue.maxlen:
                self.dropped += 1
            self.queue.append(batch)

    def weights(self) -> tuple[int, dict[str, Any]] | None:
        """(version, actor arrays) of the newest weights received, or None before the first; the arrays
        load into robo_rl_ros.core.exploration.GaussianActor."""
        with self._lock:
            return None if self._weights is None else (self.version, self._weights)

    # ------------------------------------------------------------------ the background thread
    def _run(self) -> None:
        import ray

        while not self._stop.is_set():
            if self._gone.is_set() and self._inbox is not None:  # the watcher logged it already
                self._inbox, self._last_answer = None, -float("inf")
                self._end_watch()
            if self._inbox is None and not self._connect():
                self._stop.wait(self.retry_s)
                continue
            try:
                self._exchange()
            except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError, ValueError) as error:
                self._lose(f"the learner stopped answering ({first_line(error)})")
                continue
            except Exception as error:  # noqa: BLE001 (the thread must not die: the robot would wait forever)
                self._lose(f"talking to the learner failed ({type(error).__name__}: {first_line(error)})")
                self._stop.wait(self.retry_s)
                continue
            self._stop.wait(self.poll_s)

    def _connect(self) -> bool:
        import ray

        try:
            if not ray.is_initialized():
                ray.init(address=self.address, namespace=NAMESPACE, logging_level=logging.WARNING)
            inbox = ray.get_actor(self.inbox_name, namespace=NAMESPACE)
            stats = ray.get(inbox.stats.remote(), timeout=self.timeout_s)
        except Exception as error:  # noqa: BLE001 (every way of not reaching it means: try again later)
            self._lose(f"no learner inbox {self.inbox_name!r} at {self.address} ({first_line(error)})")
            return False
        return self._accept_inbox(inbox, stats.get("liveness") if isinstance(stats, dict) else None)

    def _accept_inbox(self, inbox: Any, liveness: Any) -> bool:
        """Take the inbox that answered, with its learner's liveness address; False for an inbox whose learner
        was seen to end (Ray has not removed it yet: 0.1-0.2 s after a SIGKILL it still answers)."""
        if isinstance(liveness, (list, tuple)) and len(liveness) == 3 and str(liveness[2]) in self._ended:
            self._lose("the learner stopped answering (its process ended; its inbox is not yet gone)")
            return False
        self._gone.clear()
        self._watch(liveness)
        self._inbox, self._last_answer = inbox, time.monotonic()
        self.version = -1  # a new inbox is a new learner (a resumed one counts its weights from 0 again)
        log.warning("connected to the learner's inbox %r at %s", self.inbox_name, self.address)
        return True

    def _exchange(self) -> None:
        """Take newer weights, then send what is queued until the inbox refuses (full) or the queue is empty."""
        import ray

        # keyword arguments: without the training package here, Ray cannot load the inbox's class to learn
        # its methods' signatures, and its stand-in takes keywords only
        weights = ray.get(self._inbox.latest.remote(version=self.version), timeout=self.timeout_s)
        if weights is not None:
            version, (ref,) = weights
            state = ray.get(ref, timeout=self.timeout_s)
            with self._lock:
                self._weights, self.version = state, version
        self._last_answer = time.monotonic()
        while self.queue:
            batch = self.queue[0]
            if not ray.get(self._inbox.put.remote(batch=batch), timeout=self.timeout_s):
                break  # full: the learner is behind; keep the batch
            with self._lock:
                if self.queue and self.queue[0] is batch:
                    self.queue.popleft()
                self.sent += 1
            self._last_answer = time.monotonic()

    def _lose(self, why: str) -> None:
        if (self._inbox is not None and not self._gone.is_set()) or why.split(" (")[0] != self.why_lost.split(" (")[0]:
            log.warning("%s; retrying every %g s", why, self.retry_s)  # once per change, not once per retry
        self._inbox, self.why_lost = None, why
        self._last_answer = -float("inf")
        self._end_watch()

    # ------------------------------------------------------------------ the liveness connection
    def _watch(self, address: Any) -> None:
        """Connect to the learner's LivenessBeacon at `address` ([host, port, token]) and read it in a thread of
        its own until the learner's process ends."""
        if not (isinstance(address, (list, tuple)) and len(address) == 3):
            log.warning("the learner offers no liveness connection: its end is noticed by Ray's deadlines only")
            return
        try:
            connection = socket.create_connection((str(address[0]), int(address[1])), timeout=self.timeout_s)
        except (OSError, ValueError, TypeError, OverflowError) as error:  # unreachable, or not a host and port
            log.warning("no liveness connection to the learner at %s:%s (%s): its end is noticed by Ray's deadlines "
                        "only (0.1-0.2 s when its process is killed)", address[0], address[1], first_line(error))
            return
        connection.settimeout(None)
        self._liveness = connection
        threading.Thread(target=self._read_liveness, args=(connection, str(address[2])), name="learner-liveness",
                         daemon=True).start()

    def _read_liveness(self, connection: socket.socket, token: str) -> None:
        try:
            connection.recv(1)  # the learner never writes: this returns when its process ends
        except OSError:
            pass
        if self._liveness is not connection or self._stop.is_set():
            return  # closed by this link (lost for another reason, or closing)
        self._ended.add(token)
        why = "the learner stopped answering (its process ended: the liveness connection closed)"
        log.warning("%s; retrying every %g s", why, self.retry_s)
        self.why_lost = why
        self._gone.set()

    def _end_watch(self) -> None:
        connection, self._liveness = self._liveness, None
        if connection is not None:
            try:
                connection.shutdown(socket.SHUT_RDWR)  # wakes the reading thread
            except OSError:
                pass
            connection.close()

