"""The robot's link to a Ray learner, Ray aside: what it does when talking to the learner fails in a way
nobody planned for (tests/robo_rl/test_ray_runner.py and tests/ros2/runtime/test_robot_actor.py run it
against real learners)."""

from __future__ import annotations

import socket
import time

from robo_rl_ros.core.learner_link import LearnerLink


def test_an_unexpected_error_is_a_lost_learner_retried_not_a_dead_link(monkeypatch):
    """Seen on a robot computer without the training package: Ray raised TypeError on the first call, and the
    link's thread died, leaving the robot waiting forever for a learner it could have reached."""
    link = LearnerLink("127.0.0.1:1", "inbox", timeout_s=0.2, retry_s=0.05, poll_s=0.01)
    calls = []

    def connect() -> bool:
        link._inbox, link._last_answer = object(), time.monotonic()
        return True

    def exchange() -> None:
        calls.append(time.monotonic())
        raise TypeError("too many positional arguments")

    monkeypatch.setattr(link, "_connect", connect)
    monkeypatch.setattr(link, "_exchange", exchange)
    link.start()
    try:
        deadline = time.monotonic() + 60.0  # the thread imports Ray first: seconds on a loaded machine
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert link._thread.is_alive() and len(calls) >= 3  # it keeps trying, every retry_s
        assert not link.connected and "TypeError: too many positional arguments" in link.why_lost
    finally:
        link.close()


def test_a_killed_learner_process_is_a_lost_link_at_once_even_while_ray_still_answers(monkeypatch):
    """Ray reports a SIGKILLed learner 0.1-0.2 s late; the learner's liveness beacon closes the link's connection
    as the learner begins to exit, and the link, reading it, turns `connected` false then. Here Ray is a stand-in
    that keeps answering (as it does in those 0.1-0.2 s): only the liveness connection can tell. The learner holds
    1 GB, which its kernel frees before its own files: its own sockets would close ~0.1 s late."""
    import signal
    import subprocess
    import sys

    beacon = subprocess.Popen([sys.executable, "-c", (
        "import time\nimport numpy\nfrom robo_rl_ros.core.liveness import LivenessBeacon\n"
        "memory = numpy.ones(2**27)\nbeacon = LivenessBeacon('127.0.0.1')\n"
        "print(beacon.address[1], beacon.address[2], flush=True)\ntime.sleep(600)")],
        stdout=subprocess.PIPE, text=True)
    link = LearnerLink("127.0.0.1:1", "inbox", timeout_s=30.0, retry_s=30.0, poll_s=0.001)
    try:
        address = ["127.0.0.1", *beacon.stdout.readline().split()]

        def connect() -> bool:  # "Ray" finds the dead learner's inbox and it answers, as for 0.1-0.2 s it does
            return link._accept_inbox(object(), address)

        def exchange() -> None:
            link._last_answer = time.monotonic()  # "Ray" answers on time, dead learner or not

        monkeypatch.setattr(link, "_connect", connect)
        monkeypatch.setattr(link, "_exchange", exchange)
        link.start()
        deadline = time.monotonic() + 60.0
        while not link.connected and time.monotonic() < deadline:
            time.sleep(0.01)
        assert link.connected and link._liveness is not None
        beacon.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        while link.connected and time.monotonic() < killed + 10.0:
            time.sleep(0.0005)
        lost_after = time.monotonic() - killed
        assert not link.connected and "its process ended" in link.why_lost
        time.sleep(0.2)  # and it stays lost: the dead learner's inbox, still answering, is not taken again
        assert not link.connected and "its inbox is not yet gone" in link.why_lost
        print(f"\nlink lost {lost_after * 1e3:.1f} ms after the learner's SIGKILL")
    finally:
        link.close()
        beacon.kill()
        beacon.wait()


def test_the_beacon_tells_a_process_beginning_to_exit_and_ends_with_it():
    import os
    import subprocess
    import sys

    from robo_rl_ros.core.liveness import exiting

    assert not exiting(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert exiting(child.pid)  # reaped: gone
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    beacon = subprocess.Popen([sys.executable, "-m", "robo_rl_ros.core.liveness", "127.0.0.1", str(sleeper.pid)],
                              stdout=subprocess.PIPE, text=True)
    try:
        port, token = beacon.stdout.readline().split()
        connection = socket.create_connection(("127.0.0.1", int(port)), timeout=10.0)
        assert not exiting(sleeper.pid) and beacon.poll() is None
        sleeper.kill()  # not yet reaped: a zombie, which counts as exiting
        assert connection.recv(1) == b""  # the beacon closed the connection
        assert beacon.wait(10.0) == 0 and len(token) == 32
    finally:
        sleeper.kill()
        sleeper.wait()
        beacon.kill()
        beacon.wait()


def test_without_a_liveness_connection_the_link_still_works_on_rays_deadlines(caplog):
    link = LearnerLink("127.0.0.1:1", "inbox", timeout_s=0.5)
    with caplog.at_level("WARNING"):
        link._watch(None)
        link._watch(["127.0.0.1", 1, "token"])  # nothing listens there
        for address in (["127.0.0.1", "port", "t"], [None, 10**30, "t"], [1, -5, ["t"]]):  # not a host and port
            link._watch(address)
        # an unhashable token: taken without a liveness connection (Ray's deadlines), not a dead link thread
        assert link._accept_inbox(object(), ["127.0.0.1", 1, ["t"]]) and link._liveness is None
    assert link._liveness is None and not link._gone.is_set()
    assert "offers no liveness connection" in caplog.text and "no liveness connection to the learner at 127.0.0.1:1" in caplog.text
