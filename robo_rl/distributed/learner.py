"""The learner of a `runner=ray` run: robo_rl.train's Trainer fed by Ray actors instead of its own env.

Data flows one way. Each experience actor has up to `runner.chunks_in_flight` collect requests queued
(the bound on data the learner has not taken: when the learner falls behind, the actors wait); each batch
it returns goes into the replay buffers with its source tags, and the learner then runs the updates the
local runner would have run for that many env steps (`updates_per_iteration` per `num_envs` env steps
after `learning_starts`), so the update-to-data ratio does not depend on how fast the actors are. Every
`runner.weight_sync_updates` updates the actor's weights go into Ray's object store once, and every later
request carries the reference. Evaluations run in their own actor on a snapshot of the policy, while
training goes on; checkpoints are the local runner's, written by this process.

Faults. Every wait has a deadline. An actor (or the evaluator) whose own code raises, in a task or in its
constructor, stops the run with that error (a restart would raise it again; Ray never restarts an actor
whose constructor raised). An actor whose process dies (Ray restarts it: `max_restarts=-1`), or
that sends nothing for `runner.chunk_timeout_s` (killed and restarted), is logged and asked again: it
starts new episodes with a new seed and the newest weights, and the run goes on; after
`runner.max_actor_restarts` failures the run stops with an error naming the last one. The actors hold no
state worth saving: a learner that is killed is continued with `resume=<run>`, which starts new actors.
"""

from __future__ import annotations

import collections
import json
import logging
import time
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from robo_rl.buffers import Source
from robo_rl.checkpoint import detached_copy
from robo_rl.collector import CollectedStep
from robo_rl.distributed.actors import CollectRequest, EnvSettings, ExperienceActor, PolicyEvaluator, Weights
from robo_rl.distributed.cluster import ClusterError, ray_cluster
from robo_rl.distributed.inbox import Inbox, actor_arrays
from robo_rl.envs import env_config_at, make_vector_env
from robo_rl.interventions import make_intervener
from robo_rl.train import Trainer
from robo_rl_ros.core.learner_link import NAMESPACE, first_line
from robo_rl_ros.core.liveness import LivenessBeacon

log = logging.getLogger(__name__)
INBOX_WAIT_S = 1.0  # how long one request to the inbox waits for a batch before the learner looks again


class ActorFailure(RuntimeError):
    """The run's actors failed more often than runner.max_actor_restarts allows."""


class RayTrainer(Trainer):
    """A Trainer whose experience comes from `runner.num_actors` Ray actors (see the module docstring)."""

    def _make_envs(self) -> None:
        """One env, built once: the learner steps none, it reads the spec, action space, nominal action and
        privileged size from it. The actors build theirs at each curriculum level."""
        if getattr(self, "env", None) is None:
            self.env = make_vector_env(env_config_at(self.cfg.env, self.difficulty), 1, self.device,
                                       threads=1, privileged=self.privileged)
            if self.privileged and not hasattr(self.env, "privileged_size"):
                raise ValueError(f"privileged_critic=true, but {self.cfg.env.id} provides no privileged observation")
            make_intervener(self.cfg.intervention, self.env)  # the actors build it: refuse a bad one here, once

    def _train(self) -> None:
        with ray_cluster(self.cfg.runner):
            self._run_on_cluster()

    # ------------------------------------------------------------------ main loop
    def _run_on_cluster(self) -> None:
        cfg, runner = self.cfg, self.cfg.runner
        total = int(cfg.total_env_steps)
        next_checkpoint = self._next_multiple(cfg.checkpoint.interval_env_steps)
        next_log = self._next_multiple(cfg.logging.log_interval_env_steps)
        next_eval = self._next_multiple(cfg.eval.interval_env_steps)
        self.actor_restarts = self.refused_batches = 0
        self.refusals: set[tuple[str, str]] = set()  # (sender, problem) already logged
        self.pool = ActorPool(self._settings(), runner, int(cfg.eval.episodes), int(cfg.eval.seed))
        self._publish_weights()
        self.evaluations: collections.deque[tuple[Any, dict[str, Any], dict[str, Any]]] = collections.deque()
        bar = self._progress_bar(total)
        start = time.perf_counter() - self.wall_seconds
        try:
            # the untrained policy, where the learning curve starts; on a resume, the checkpoint's policy when its
            # evaluation was still running as the learner died
            if not self.history or self.history[-1]["env_steps"] < self.env_steps:
                self._submit_evaluation()
            for index in range(self.pool.size):
                self._fill_queue(index)
            while self.env_steps < total:
                index, chunk = self.pool.next_chunk()
                if chunk is None:  # the actor failed and was restarted: ask its new incarnation
                    self._count_restart()
                    self._fill_queue(index)
                    continue
                if index >= 0 and self.env_steps + chunk["env_steps"] < total:  # keep the queue full while needed
                    self.pool.submit(index, self._request(index))
                if index < 0 and not self._acceptable(chunk):
                    continue
                self._store_chunk(chunk)
                bar.update(chunk["env_steps"])
                due = self._updates_due()
                while self.updates < due:
                    self._update()
                    if self.updates % int(runner.weight_sync_updates) == 0:
                        self._publish_weights()
                self._take_evaluations(start, bar)
                if self.env_steps >= next_log:
                    next_log = self._next_multiple(cfg.logging.log_interval_env_steps)
                    self._log_training(time.perf_counter() - start)
                    self._log_actors()
                if self.env_steps >= next_eval or self.env_steps >= total:
                    next_eval = self._next_multiple(cfg.eval.interval_env_steps)
                    self._submit_evaluation()
                if self.env_steps >= next_checkpoint or self.env_steps >= total:
                    next_checkpoint = self._next_multiple(cfg.checkpoint.interval_env_steps)
                    # a checkpoint holds every evaluation asked for before it (the last one too, at the end): the
                    # one asked for at this very step is redone on resume if the learner dies before it returns
                    self._take_evaluations(start, bar, asked_before=self.env_steps + (self.env_steps >= total))
                    self.wall_seconds = time.perf_counter() - start
                    self.save()
            self._take_evaluations(start, bar, asked_before=self.env_steps + 1)
        finally:
            self.pool.close()
            bar.close()

    def _settings(self) -> EnvSettings:
        cfg = self.cfg
        plain = lambda node: OmegaConf.to_container(node, resolve=True)  # noqa: E731
        return EnvSettings(env=plain(cfg.env), agent=plain(cfg.agent), intervention=plain(cfg.intervention),
                           spec=self.spec, privileged=self.privileged, seed=int(cfg.seed),
                           num_actors=int(cfg.runner.num_actors))

    def _fill_queue(self, index: int) -> None:
        for _ in range(int(self.cfg.runner.chunks_in_flight)):
            self.pool.submit(index, self._request(index))

    def _request(self, index: int) -> CollectRequest:
        return CollectRequest(weights=self.weights, random_actions=self.random_actions,
                              difficulty=self.difficulty, generation=self.pool.generation[index])

    def _updates_due(self) -> int:
        cfg = self.cfg
        return updates_due(self.env_steps, int(cfg.num_envs), int(cfg.learning_starts), int(cfg.updates_per_iteration))

    def _acceptable(self, chunk: dict[str, Any]) -> bool:
        """Whether an external actor's batch fits the replay buffers; if not, it is dropped, said in the log
        (once per sender and problem) and counted: one bad sender does not stop the run."""
        problem = batch_problem(chunk, self.replay.online.shapes)
        if problem is None:
            return True
        self.refused_batches += 1
        sender = f"process {chunk.get('pid', '?')} on {chunk.get('node', '?')}" if isinstance(chunk, dict) else "?"
        if (sender, problem) not in self.refusals:
            self.refusals.add((sender, problem))
            log.warning("refused a batch from the external actor %s: %s", sender, problem)
        return False

    def _store_chunk(self, chunk: dict[str, Any]) -> None:
        """Put an actor's batch into the replay buffers and count it, as the local runner stores its steps."""
        self._store(as_collected(chunk))
        self.weights_lag = self.weights.version - int(chunk["weights_version"])

    def _publish_weights(self) -> None:
        """The actor's weights into Ray's object store, once for every actor that asks next."""
        import ray

        state = {key: value.detach().cpu() for key, value in self.agent.actor.state_dict().items()}
        version = getattr(self, "weights", Weights(-1, [None])).version + 1
        self.weights = Weights(version, [ray.put(state)])
        if self.pool.inbox is not None:  # external actors get arrays: they need no torch
            arrays = actor_arrays(self.agent.actor, self.agent.config.activation)
            self.pool.publish(Weights(version, [ray.put(arrays)]))

    def _count_restart(self) -> None:
        self.actor_restarts += 1
        if self.actor_restarts > int(self.cfg.runner.max_actor_restarts):
            raise ActorFailure(f"runner=ray: {self.actor_restarts} actor failures, more than runner.max_actor_restarts="
                               f"{self.cfg.runner.max_actor_restarts}; the last: {self.pool.last_failure}")

    # ------------------------------------------------------------ evaluation, logs
    def _submit_evaluation(self) -> None:
        """Evaluate the policy as it is now, in the evaluator, while training goes on."""
        import ray

        state = {key: value.detach().cpu() for key, value in self.agent.policy_actor.state_dict().items()}
        counters = {"env_steps": self.env_steps, "updates": self.updates, "intervention_steps": self.intervention_steps,
                    "difficulty": self.difficulty}
        ref = self.pool.evaluator.evaluate.remote(Weights(self.env_steps, [ray.put(state)]), self.difficulty)
        self.evaluations.append((ref, counters, detached_copy(self._policy_state())))

    def _take_evaluations(self, start: float, bar: Any, asked_before: int = 0) -> None:
        """Record the evaluations that finished, in the order they were asked for, waiting for those asked for
        before `asked_before` env steps."""
        import ray

        while self.evaluations:
            ref, counters, policy = self.evaluations[0]
            wait = counters["env_steps"] < asked_before
            ready, _ = ray.wait([ref], timeout=float(self.cfg.runner.chunk_timeout_s) if wait else 0)
            if not ready:
                if wait:
                    raise ClusterError(f"runner=ray: the evaluator returned nothing within runner.chunk_timeout_s="
                                       f"{self.cfg.runner.chunk_timeout_s} s")
                return
            self.evaluations.popleft()
            try:
                result = ray.get(ref)
            except ray.exceptions.RayTaskError as error:
                raise ActorFailure(f"the evaluator stopped the run: {task_error(error)}") from None
            except ray.exceptions.RayError as error:  # the evaluator died: Ray restarts it; this one is lost
                if creation_error(error) is not None:  # every later evaluation would be lost too
                    raise ActorFailure(f"the evaluator could not start: {creation_error(error)}") from None
                self.pool.last_failure = f"the evaluation at {counters['env_steps']} env steps was lost ({first_line(error)})"
                log.warning("%s; the next one runs on a restarted evaluator", self.pool.last_failure)
                self._count_restart()
                continue
            entry = self._record_evaluation(result, counters)
            entry["wall_seconds"] = self.wall_seconds = time.perf_counter() - start
            self._keep_if_best(entry, policy)
            bar.set_postfix(success=f"{100 * entry['success_rate']:.0f}%", ret=f"{entry['mean_return']:.0f}")
            if entry["difficulty"] == self.difficulty:  # an evaluation of an earlier level moves nothing on
                self._advance_curriculum(entry)

    def finish(self) -> dict[str, Any]:
        """The local runner's summary, plus how often actors failed and were restarted."""
        summary = super().finish()
        summary["actor_restarts"] = getattr(self, "actor_restarts", 0)
        summary["refused_batches"] = getattr(self, "refused_batches", 0)  # from external actors
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary

    def _log_actors(self) -> None:
        if not self.writer:
            return
        self.writer.add_scalar("ray/actor_restarts", self.actor_restarts, self.env_steps)
        self.writer.add_scalar("ray/weights_lag", getattr(self, "weights_lag", 0), self.env_steps)
        self.writer.add_scalar("ray/queued_batches", self.pool.queued(), self.env_steps)


def task_error(error: Any) -> str:
    """The exception a Ray actor's own code raised, in one line (not Ray's wrapping traceback)."""
    cause = getattr(error, "cause", None)
    return f"{type(cause).__name__}: {first_line(cause)}" if cause is not None else first_line(error)


def creation_error(error: Any) -> str | None:
    """The exception an actor's constructor raised, in one line, where `error` says that the actor died of one
    (Ray never restarts such an actor: every later call fails the same way); None for any other failure."""
    if not getattr(error, "actor_init_failed", False):
        return None
    # Ray keeps only the text, its traceback's last line the exception itself
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else first_line(error)


def as_collected(chunk: dict[str, Any]) -> CollectedStep:
    """An actor's batch (robo_rl.distributed.actors.batch_of) as what the local runner's collector returns."""
    # Ray hands over read-only views of its object store; copied here, as the buffers would copy them anyway
    tagged = [(Source(source), {key: torch.from_numpy(np.array(value)) for key, value in transitions.items()})
              for source, transitions in chunk["tagged"]]
    return CollectedStep(tagged, list(chunk["returns"]), list(chunk["intervention_rates"]),
                         int(chunk["intervention_steps"]), int(chunk["env_steps"]))


def batch_problem(batch: Any, shapes: dict[str, tuple[int, ...]]) -> str | None:
    """What makes `batch` unfit for replay buffers with these field shapes (robo_rl.buffers.ReplayBuffer.shapes),
    in one line, or None if it fits (see robo_rl.distributed.actors.batch_of for the format)."""
    if not isinstance(batch, dict) or not isinstance(batch.get("tagged"), list):
        return "not a batch (a dict with a 'tagged' list)"
    rows = 0
    for entry in batch["tagged"]:
        if not isinstance(entry, (tuple, list)) or len(entry) != 2 or entry[0] not in {int(s) for s in Source} \
                or not isinstance(entry[1], dict):
            return f"each tagged entry must be (source in {[int(s) for s in Source]}, {{field: array}})"
        transitions = entry[1]
        if set(transitions) != set(shapes):
            return f"fields {sorted(transitions)}, the learner stores {sorted(shapes)}"
        n = None
        for key, shape in shapes.items():
            value = _numbers(transitions[key])
            if value is None:
                return f"{key} is not an array of numbers"
            if value.ndim < 1 or value.shape[1:] != tuple(shape) or (n is not None and len(value) != n):
                return f"{key} has shape {value.shape}, the learner stores (rows, {', '.join(map(str, shape))})"
            if not np.isfinite(value).all():
                return f"{key} holds non-finite values"
            n = len(value)
        rows += n or 0
    for key in ("returns", "intervention_rates"):  # of the episodes that ended: logged as means
        values = _numbers(batch.get(key))
        if values is None or values.ndim != 1 or not np.isfinite(values).all():
            return f"{key!r} must be a list of finite numbers"
    for key, most in (("env_steps", rows), ("intervention_steps", rows), ("weights_version", None)):
        value = batch.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (-1 if most is None else 0):
            return f"{key!r} must be a whole number, got {value!r}"[:200]
        if key == "env_steps" and value != rows:
            return f"env_steps {value} but {rows} transitions"
        if most is not None and value > most:
            return f"{key} {value} but {rows} transitions"
    return None


def _numbers(value: Any) -> np.ndarray | None:
    """`value` as a float64 array, or None if it is not numbers."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return array


def updates_due(env_steps: int, num_envs: int, learning_starts: int, updates_per_iteration: int) -> int:
    """The agent updates the local runner has run after `env_steps`: `updates_per_iteration` after each
    batched step of `num_envs` envs that ends at or after `learning_starts` env steps."""
    iterations = env_steps // num_envs - max(-(-learning_starts // num_envs), 1) + 1
    return updates_per_iteration * max(iterations, 0)


class ActorPool:
    """The run's Ray actors and the collect requests queued to them, waited on with deadlines."""

    def __init__(self, settings: EnvSettings, runner: Any, eval_episodes: int, eval_seed: int):
        import ray

        self.runner = runner
        self.size = int(runner.num_actors)
        threads = int(runner.actor_threads)
        remote = ray.remote(ExperienceActor).options(num_cpus=threads, max_restarts=-1, max_task_retries=0)
        self.actors = [remote.remote(settings, index, int(runner.envs_per_actor), int(runner.steps_per_chunk), threads)
                       for index in range(self.size)]
        evaluator = ray.remote(PolicyEvaluator).options(num_cpus=int(runner.evaluator_threads), max_restarts=-1,
                                                        max_task_retries=0)
        self.evaluator = evaluator.remote(settings, eval_episodes, eval_seed, int(runner.evaluator_threads))
        self.inbox: Any = None  # batches from actors this run did not start (robo_rl.distributed.inbox)
        self.liveness: LivenessBeacon | None = None
        self.inbox_ref: Any = None
        self.from_inbox: collections.deque[dict[str, Any]] = collections.deque()
        self.senders: set[tuple[str, str]] = set()
        if runner.inbox is not None:
            # a process watching this one that the links connect to: they learn of its end within milliseconds
            self.liveness = LivenessBeacon(ray.util.get_node_ip_address())
            inbox = ray.remote(Inbox).options(name=str(runner.inbox), namespace=NAMESPACE, num_cpus=0, max_restarts=0)
            self.inbox = inbox.remote(int(runner.inbox_batches), self.liveness.address)
            self.inbox_ref = self.inbox.take.remote(INBOX_WAIT_S)
        self.generation = [0] * self.size
        self.started = [False] * self.size       # whether the current incarnation has sent a batch
        self.restarted_at = [time.monotonic()] * self.size
        # ref -> (actor, generation, request, submitted at)
        self.pending: dict[Any, tuple[int, int, CollectRequest, float]] = {}
        self.last_failure = ""

    def submit(self, index: int, request: CollectRequest) -> None:
        """Queue a collect request to actor `index`."""
        ref = self.actors[index].collect.remote(request)
        self.pending[ref] = (index, self.generation[index], request, time.monotonic())

    def queued(self) -> int:
        """Collect requests not yet taken."""
        return len(self.pending)

    def next_chunk(self) -> tuple[int, dict[str, Any] | None]:
        """The next batch any actor sent: (actor, batch), or (actor, None) where that actor failed (it is then
        restarted, its other queued requests dropped, and the caller asks it again); actor -1 for a batch from
        the inbox."""
        import ray

        while True:
            if self.from_inbox:
                return -1, self.from_inbox.popleft()
            deadline = min((self._deadline(ref) for ref in self.pending), default=time.monotonic() + INBOX_WAIT_S)
            waiting = list(self.pending) + ([self.inbox_ref] if self.inbox_ref is not None else [])
            ready, _ = ray.wait(waiting, num_returns=1, timeout=max(deadline - time.monotonic(), 0.0))
            if ready and ready[0] is self.inbox_ref:
                self._take_inbox()
                continue
            if ready:
                ref = ready[0]
                index, generation, request, _ = self.pending.pop(ref)
                try:
                    chunk = ray.get(ref)
                except ray.exceptions.RayError as error:
                    if generation != self.generation[index]:
                        continue  # a request to an incarnation already known to have failed
                    if isinstance(error, ray.exceptions.RayTaskError):  # its code raised: a restart raises again
                        raise ActorFailure(f"actor {index} stopped the run: {task_error(error)}") from None
                    if creation_error(error) is not None:
                        raise ActorFailure(f"actor {index} could not start: {creation_error(error)}") from None
                    if isinstance(error, ray.exceptions.ActorUnavailableError) and not self.started[index] \
                            and time.monotonic() < self.restarted_at[index] + float(self.runner.start_timeout_s):
                        time.sleep(0.2)  # still restarting after a failure already counted: ask again
                        self.submit(index, request)
                        continue
                    return index, self._failed(index, f"actor {index} failed ({first_line(error)}); Ray restarts it")
                if generation != self.generation[index]:
                    continue
                if not self.started[index]:
                    log.info("actor %d (generation %d) runs in process %d on %s", index, generation, chunk["pid"],
                             chunk["node"])
                    self.started[index] = True
                return index, chunk
            if not self.pending:
                continue  # only the inbox, and nothing in it yet
            late = min(self.pending, key=self._deadline)
            if self._deadline(late) > time.monotonic():
                continue
            index = self.pending[late][0]
            limit = self.runner.chunk_timeout_s if self.started[index] else self.runner.start_timeout_s
            ray.kill(self.actors[index], no_restart=False)
            return index, self._failed(index, f"actor {index} sent nothing for {limit} s; restarting it")

    def _take_inbox(self) -> None:
        """Keep the inbox's batches and ask it for the next ones (the learner's own inbox failing is fatal)."""
        import ray

        for batch in ray.get(self.inbox_ref):
            sender = (str(batch.get("node"))[:100], str(batch.get("pid"))[:20]) if isinstance(batch, dict) else ("?", "?")
            if sender not in self.senders:
                log.info("an external actor, process %s on %s, sent its first batch to the inbox", sender[1], sender[0])
                self.senders.add(sender)
            self.from_inbox.append(batch)  # checked by the learner before it is stored (batch_problem)
        self.inbox_ref = self.inbox.take.remote(INBOX_WAIT_S)

    def publish(self, weights: Weights) -> None:
        """Make `weights` what external actors take next (the pool's own actors get them with each request)."""
        if self.inbox is not None:
            self.inbox.publish.remote(weights)

    def _deadline(self, ref: Any) -> float:
        index, _, _, submitted = self.pending[ref]
        limit = self.runner.chunk_timeout_s if self.started[index] else self.runner.start_timeout_s
        return submitted + float(limit)

    def _failed(self, index: int, why: str) -> None:
        log.warning(why)
        self.last_failure = why
        self.generation[index] += 1
        self.started[index] = False
        self.restarted_at[index] = time.monotonic()
        for ref in [ref for ref, pending in self.pending.items() if pending[0] == index]:
            del self.pending[ref]  # the failed incarnation's queue; the caller refills it
        return None

    def close(self) -> None:
        import ray

        for actor in [*self.actors, self.evaluator, self.inbox]:
            if actor is not None:
                ray.kill(actor, no_restart=True)
        if self.liveness is not None:
            self.liveness.close()

