"""The robot's link to a Ray learner, Ray aside: what it does when talking to the learner fails in a way
nobody planned for (tests/robo_rl/test_ray_runner.py and tests/ros2/runtime/test_robot_actor.py run it
against real learners)."""

from __future__ import annotations

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
