"""An external actor's link to a `runner=ray` learner (a robot's actor node, or any process outside the
learner's own actors): it sends batches of tagged transitions to the learner's inbox (robo_rl.distributed.
inbox) and takes the newest weights, and says at every moment whether the learner is reachable. It needs
Ray and nothing of the training package: it runs on the robot computer.

The caller never waits on the network: `send` queues (bounded: the oldest batch goes when the queue is
full, and is counted), `weights` and `connected` read what a background thread last learned. That thread
talks to Ray with a deadline on every call. When a call fails or misses its deadline (the learner died,
its machine is gone, the cluster is unreachable), the link is marked lost at once, says why in the log, and
tries again every `retry_s` until a learner's inbox answers again (a resumed learner creates a new one).
"""

from __future__ import annotations

import collections
import logging
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

    def start(self) -> "LearnerLink":
        """Start the background thread (it connects on its own)."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the background thread (queued batches are not sent)."""
        self._stop.set()
        self._thread.join(timeout=self.timeout_s + self.retry_s + 1.0)

    @property
    def connected(self) -> bool:
        """Whether the learner answered within the last `timeout_s` and no call has failed since."""
        return self._inbox is not None and time.monotonic() - self._last_answer < self.timeout_s

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
            ray.get(inbox.stats.remote(), timeout=self.timeout_s)
        except Exception as error:  # noqa: BLE001 (every way of not reaching it means: try again later)
            self._lose(f"no learner inbox {self.inbox_name!r} at {self.address} ({first_line(error)})")
            return False
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
        if self._inbox is not None or why.split(" (")[0] != self.why_lost.split(" (")[0]:
            log.warning("%s; retrying every %g s", why, self.retry_s)  # once per change, not once per retry
        self._inbox, self.why_lost = None, why
        self._last_answer = -float("inf")

