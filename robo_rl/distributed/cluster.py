"""The Ray cluster a `runner=ray` run uses: its options checked before any work, then joined or started."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
from typing import Any, Iterator, Mapping

from robo_rl.cli import require_module
from robo_rl_ros.core.learner_link import first_line
from sim.errors import ConfigError
from sim.validation import Interval, coerce, number

RUNNER_KINDS = ("local", "ray")
CONNECT_TIMEOUT_S = 10.0
SECONDS = Interval(0.1, 7 * 24 * 3600.0)
# runner=ray option -> (annotation, allowed interval of a number or None)
RAY_OPTIONS: dict[str, tuple[Any, Interval | None]] = {
    "address": (str | None, None), "num_actors": (int, Interval(0, 4096)), "envs_per_actor": (int, Interval(1, 2**20)),
    "actor_threads": (int, Interval(1, 1024)), "evaluator_threads": (int, Interval(1, 1024)),
    "steps_per_chunk": (int, Interval(1, 10**6)), "chunks_in_flight": (int, Interval(1, 64)),
    "weight_sync_updates": (int, Interval(1, 10**9)), "chunk_timeout_s": (float, SECONDS),
    "start_timeout_s": (float, SECONDS), "max_actor_restarts": (int, Interval(0, 10**6)),
    "inbox": (str | None, None), "inbox_batches": (int, Interval(1, 10**6)),
}

# what runner.inbox may be named: the Ray actor name that robo_rl_ros's robot actor node is given (its `inbox`)
INBOX_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


class ClusterError(RuntimeError):
    """The Ray cluster cannot be reached or cannot hold the run's actors."""


def check_runner(runner: Mapping[str, Any]) -> None:
    """ConfigError naming the first `runner` option that is missing, of the wrong type or out of range."""
    kind = runner.get("kind")
    if kind not in RUNNER_KINDS:
        raise ConfigError(f"runner.kind must be one of {', '.join(RUNNER_KINDS)}, got {kind!r}")
    if kind != "ray":
        return
    require_module("ray")  # before the run folder is made: make train installs robo-rl without Ray
    for name, (annotation, allowed) in RAY_OPTIONS.items():
        if name not in runner:
            raise ConfigError(f"option runner.{name} of runner=ray is missing; it must be given")
        value = coerce(runner[name], annotation, f"runner.{name}")
        if allowed is not None and value is not None and value not in allowed:
            raise ConfigError(f"runner.{name} must lie in {allowed}, got {number(value)}")
    check_inbox_name(runner["inbox"])
    if int(runner["num_actors"]) == 0 and runner["inbox"] is None:
        raise ConfigError("runner.num_actors=0 needs runner.inbox (a name): with neither, nothing would collect")
    if runner["address"] not in (None, "auto"):  # before the run folder is made: nothing is left of a typo
        check_reachable(str(runner["address"]))


def check_inbox_name(name: str | None) -> None:
    """ConfigError unless runner.inbox is null or an INBOX_NAME: Ray refuses an empty actor name only once the
    cluster is up (`runner.inbox=` was a traceback after 20 s, and a run folder), and a name with spaces or other
    characters is one a robot's launch line (`inbox:=<name>`) would not pass whole."""
    if name is not None and not INBOX_NAME.fullmatch(name):
        raise ConfigError(f"runner.inbox={name!r} is not an inbox name: give null (no inbox) or a name of letters, "
                          f"digits, '_', '-' and '.' (the robot actor's inbox:=<name>), at most 128 characters")


def required_cpus(runner: Mapping[str, Any]) -> int:
    """The CPUs the run's Ray actors reserve: every experience actor's threads and the evaluator's."""
    return int(runner["num_actors"]) * int(runner["actor_threads"]) + int(runner["evaluator_threads"])


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S, option: str = "runner.address",
                    local: str = "null") -> None:
    """ClusterError unless something accepts connections at `address` (host:port, a Ray head's GCS) within
    `timeout_s`: Ray itself retries an unreachable address for minutes. The error names `option`, whose value
    `local` asks for a cluster on this machine instead."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"{option} must be {local}, auto or host:port, got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise ClusterError(f"{option}={address}: nothing answers there within {timeout_s:g} s ({error}); start a "
                           "head with `ray start --head`, or give "
                           f"{option}={local} for one on this machine") from None


@contextlib.contextmanager
def ray_cluster(runner: Mapping[str, Any]) -> Iterator[None]:
    """Connected to the cluster at runner.address for the block (null: a cluster on this machine for this
    run, with at least the CPUs the actors reserve). ClusterError if it cannot be reached or has too few CPUs
    for the actors (they would wait for them forever). A process already connected (ray.init before) keeps
    its connection."""
    reserved = (f"{runner['num_actors']} actors x {runner['actor_threads']} actor_threads + "
                f"{runner['evaluator_threads']} evaluator_threads reserve")
    with joined_cluster(runner.get("address"), required_cpus(runner), "runner.address", reserved):
        yield


@contextlib.contextmanager
def joined_cluster(address: str | None, needed: int, option: str, reserved: str, local: str = "null") -> Iterator[None]:
    """Connected to the Ray cluster at `address` (the value of `option`: auto or host:port) for the block, or
    to a new one on this machine (None, which `option` asks for with `local`) with its cores or `needed` CPUs,
    whichever is more. ClusterError, naming `option`, if it cannot be reached or has fewer than the `needed`
    CPUs that `reserved` (what reserves them, for the error) asks for. A process already connected keeps its
    connection."""
    import ray

    connected_here = not ray.is_initialized()
    if connected_here:
        options: dict[str, Any] = {"logging_level": logging.WARNING, "include_dashboard": False}
        if address is None:  # a new cluster even where one runs already
            options["num_cpus"] = max(os.cpu_count() or 1, needed)
        try:
            ray.init(address="local" if address is None else address, **options)
        except (ConnectionError, RuntimeError, ValueError) as error:
            hint = ("; a cluster from `ray start` checks Ray's authentication token: set RAY_AUTH_MODE=token (and the "
                    "same ~/.ray/auth_token) here too" if os.environ.get("RAY_AUTH_MODE") != "token" else "")
            raise ClusterError(f"{option}={address}: no Ray cluster to join there ({first_line(error)}){hint}; "
                               f"start one with `ray start --head`, or give {option}={local} for one on this "
                               "machine") from None
    try:
        cpus = ray.cluster_resources().get("CPU", 0)
        if cpus < needed:
            raise ClusterError(f"{option}: the Ray cluster at {address or 'this machine'} has {number(cpus)} CPUs, and "
                               f"{reserved} {needed}; lower them or add nodes")
        yield
    finally:
        if connected_here:
            ray.shutdown()
