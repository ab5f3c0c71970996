"""Soft Actor-Critic with the options of the SERL family (REDQ-style critic ensemble, LayerNorm critics,
several critic updates per actor update, learnable temperature) and an optional asymmetric critic.

The update is `SAC.update`: critic steps (`_critic_step`) on consecutive minibatches, then one actor and
temperature step (`_actor_step`) on the last minibatch, each read top to bottom. Gradients come from
torch.func.grad and Adam is applied to the optimizers' own state, so each step is a pure tensor program that
torch.compile fuses into one graph (`SACConfig.compile`). Everything stays on the agent's device and nothing
in the update synchronizes with the host (metrics are returned as tensors).
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import nn
from torch.func import functional_call, grad

from robo_rl.agents.adam import AdamSlots, adam_step, allocated_adam
from robo_rl.agents.encoders import ENCODER_RANGES, EncoderConfig, ImageEncoder
from robo_rl.agents.networks import CriticEnsemble, TanhGaussianActor
from robo_rl.buffers import Batch, Source
from robo_rl.observations import Observation
from sim.validation import Interval, at_least_zero, check_ranges, coerce, positive

# Compile the whole update call as one graph up to this many critic steps per actor step (see SAC.__init__).
WHOLE_GRAPH_MAX_CRITIC_STEPS = 2


@dataclasses.dataclass
class SACConfig:
    """Hyperparameters; defaults follow SERL's JAX state-based SAC (see ../shared/notes/serl.md)."""

    actor_hidden: Sequence[int] = (256, 256)
    critic_hidden: Sequence[int] = (256, 256)
    activation: str = "tanh"
    actor_layer_norm: bool = False
    critic_layer_norm: bool = True
    num_critics: int = 10
    critic_subsample: int = 2  # REDQ: min over a random subset of this size forms the target
    critic_updates_per_actor_update: int = 8  # UTD: minibatches per `update` call
    batch_size: int = 256  # per minibatch
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    temperature_lr: float = 3e-4
    discount: float = 0.99
    tau: float = 0.005  # Polyak rate of the target critics
    init_temperature: float = 0.01
    target_entropy: float | None = None  # None: -action_dim / 2
    backup_entropy: bool = True  # subtract alpha * log pi(a'|s') in the target
    # Q-filtered behaviour cloning on demo and intervention rows (Nair et al. 2018), scaled by the batch's
    # mean |Q| as in TD3+BC so that the weight does not depend on the reward scale; 0: plain SAC
    bc_weight: float = 0.0
    bc_q_filter: bool = True  # clone only where the critics rate the demonstrated action above the policy's
    # > 0: an exponential moving average of the actor's weights, moved this far towards the actor after each
    # actor step, is the policy that evaluation and export use (`policy_actor`); exploration stays online.
    # The online actor's greedy action drifts between updates (a hover offset that crosses the success
    # radius and back within 50k steps); the average does not. 0: the online actor is the policy.
    actor_average_rate: float = 0.0
    # > 0: early in training the average is shorter, spanning about this fraction of the actor steps taken so
    # far (rate max(actor_average_rate, 1 / (1 + span * steps)), TensorFlow's ExponentialMovingAverage with
    # num_updates); a constant rate lags a fast-improving actor by a full time constant.
    actor_average_span: float = 0.0
    # Run the update as torch.compile'd graphs (about 2x faster on a CPU at the hover sizes; the first update
    # compiles, for 20-30 s). False: the same update, eagerly.
    compile: bool = False
    # In the compiled update on a non-Intel x86 CPU with AVX-512, products of 256x128x128 and up run in oneDNN, which
    # uses AVX-512 where MKL does not: 1.9x faster products at 256 units on Zen 5 (robo_rl/agents/onednn_matmul.py).
    onednn_matmul: bool = True
    # camera observations only: the image encoder that the critic trains and the actor reads (DrQ, SERL)
    encoder: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)

    def validate(self) -> None:
        """Raise ValueError naming the first inconsistent field: of the wrong type, not finite, outside
        AGENT_RANGES, or inconsistent with another."""
        if isinstance(self.encoder, Mapping):  # as a checkpoint's or Hydra's plain config gives it
            self.encoder = coerce(dict(self.encoder), EncoderConfig, "agent.encoder")
        coerce(self, SACConfig, "agent")  # every field of its type, every number finite (sim.validation)
        check_ranges(self, AGENT_RANGES, name="agent")
        for name in ("actor_hidden", "critic_hidden"):  # [] was an IndexError traceback (actor), a linear critic
            if len(getattr(self, name)) == 0:
                raise ValueError(f"agent.{name} must list at least one layer width, got []")
        if not 1 <= self.critic_subsample <= self.num_critics:
            raise ValueError(f"critic_subsample must be in [1, num_critics={self.num_critics}], got {self.critic_subsample}")
        self.encoder.validate()


# What each number of SACConfig may be (sim.validation.check_ranges): a network of zero units, a NaN
# learning rate or a discount above 1 would train nothing, or NaN, without a word.
AGENT_RANGES: dict[str, Interval] = {
    "actor_hidden": Interval(1, 65536), "critic_hidden": Interval(1, 65536), "num_critics": Interval(1, 1000),
    "batch_size": Interval(1, 2**24), "actor_lr": positive(1.0), "critic_lr": positive(1.0),
    "temperature_lr": positive(1.0), "init_temperature": positive(1e6), "target_entropy": Interval(-1e6, 1e6),
    "bc_weight": at_least_zero(1e6), "actor_average_span": at_least_zero(1e9),
    "critic_updates_per_actor_update": Interval(1, 1024), "tau": positive(1.0), "discount": at_least_zero(1.0),
    "actor_average_rate": at_least_zero(1.0), **ENCODER_RANGES,
}


def policy_network(obs_dim: int, action_low: Any, action_high: Any, config: SACConfig) -> TanhGaussianActor:
    """The actor network SAC trains for this observation size, action bounds and config: what a process
    that only acts (a Ray actor, an evaluator) builds to load the trained actor's weights into."""
    low = torch.as_tensor(action_low, dtype=torch.float32).flatten()
    high = torch.as_tensor(action_high, dtype=torch.float32).flatten()
    return TanhGaussianActor(obs_dim, low.numel(), config.actor_hidden, config.activation, low, high,
                             config.actor_layer_norm)


class SAC(nn.Module):
    """The agent: actor, critic ensemble and its target, log-temperature, and their optimizers.

    Args:
        obs_dim: actor observation size.
        action_low, action_high: bounds of the (box) action space, shape (action_dim,).
        config: hyperparameters.
        critic_obs_dim: size of the critic's observation if it differs from the actor's (an asymmetric
            critic that sees privileged simulator state); None: the critic sees the actor's observation.
        images: camera images of dict observations by name, (height, width, 3) each; obs_dim is then the size
            of their "state" vector. An `ImageEncoder` turns them into the features that actor and critics read.
        trainable: False for an agent that only acts (`from_checkpoint`): no optimizers and no compiled update,
            whose first construction imports torch._dynamo (about 1 s of every evaluation and export).
    """

    def __init__(self, obs_dim: int, action_low: Any, action_high: Any, config: SACConfig | None = None,
                 critic_obs_dim: int | None = None, device: str | torch.device = "cpu",
                 images: Mapping[str, Sequence[int]] | None = None, trainable: bool = True):
        super().__init__()
        self.config = config = config or SACConfig()
        config.validate()
        low = torch.as_tensor(action_low, dtype=torch.float32).flatten()
        high = torch.as_tensor(action_high, dtype=torch.float32).flatten()
        self.obs_dim, self.action_dim = obs_dim, low.numel()
        self.images = {name: tuple(shape) for name, shape in (images or {}).items()}
        self.encoder = ImageEncoder(self.images, obs_dim, config.encoder) if self.images else None
        features = self.encoder.out_dim if self.encoder is not None else obs_dim
        self.critic_obs_dim = critic_obs_dim or features
        self.target_entropy = config.target_entropy if config.target_entropy is not None else -self.action_dim / 2
        self.actor = policy_network(features, low, high, config)
        self.critic = CriticEnsemble(self.critic_obs_dim, self.action_dim, config.critic_hidden, config.activation,
                                     config.num_critics, config.critic_layer_norm)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_average = (copy.deepcopy(self.actor).requires_grad_(False) if config.actor_average_rate > 0
                              else None)
        self.log_temperature = nn.Parameter(torch.tensor(float(config.init_temperature)).log())
        self.to(device)
        self.trainable = trainable
        self._adam_slots: dict[str, AdamSlots] = {}
        self._compiled_steps: dict[str, Callable[..., dict[str, torch.Tensor]]] | None = None
        if not trainable:
            return
        self.actor_optimizer = allocated_adam(self.actor.parameters(), config.actor_lr)
        # the critic's loss trains the encoder (its frozen convolutions excepted)
        self.critic_optimizer = allocated_adam([*self.critic.parameters(), *self._encoder_parameters().values()],
                                      config.critic_lr)
        self.temperature_optimizer = allocated_adam([self.log_temperature], config.temperature_lr)
        for name in ("actor_optimizer", "critic_optimizer", "temperature_optimizer"):
            optimizer = getattr(self, name)
            self._adam_slots[name] = AdamSlots.of(optimizer)
            # load_state_dict replaces the state tensors: follow them
            optimizer.register_load_state_dict_post_hook(
                lambda optimizer, name=name: self._adam_slots.__setitem__(name, AdamSlots.of(optimizer)))
        # Fused graphs (forward, backward and Adam): the eager update spends most of its time launching small
        # kernels. With few critic steps per actor step (the quadrotor's and the arm's 2), the whole update call
        # is one graph: one call's overhead, the minibatch split inside the graph (hover sizes: 1.24 against
        # 1.37 ms per update call, and no longer to compile). With more (SERL's 8), one graph for a critic step
        # and one for the last critic step with the actor and temperature steps, so that compile time does not
        # grow with critic_updates_per_actor_update. Each graph compiles on first use.
        if config.compile and self.images:
            raise ValueError("agent.compile=true is for state observations: an agent on camera images runs eagerly "
                             "(agent.compile=false)")
        if config.compile:
            # imported here: it loads torch._inductor (~2 s), which an eager agent, an evaluation or a CLI's
            # one-line error never needs
            from robo_rl.agents import onednn_matmul

            # on a CPU, the C++ wrapper calls the graph's kernels without Python in between (~10% of an update)
            options: dict[str, Any] = {"cpp_wrapper": self.device.type == "cpu"}
            if config.onednn_matmul and onednn_matmul.faster_than_mkl(self.device):
                options["post_grad_custom_post_pass"] = onednn_matmul.OneDNNMatmulPass()
            steps = ((self._update_with,) if config.critic_updates_per_actor_update <= WHOLE_GRAPH_MAX_CRITIC_STEPS
                     else (self._critic_step, self._last_step))
            self._compiled_steps = {step.__name__: torch.compile(step, fullgraph=True, dynamic=False, options=options)
                                    for step in steps}

    @property
    def device(self) -> torch.device:
        """Where the parameters live."""
        return self.log_temperature.device

    @property
    def policy_actor(self) -> TanhGaussianActor:
        """The actor that evaluation and export run: the weight average if configured, else the online actor."""
        return self.actor_average if self.actor_average is not None else self.actor

    def _encoder_parameters(self) -> dict[str, torch.Tensor]:
        """The encoder's trainable parameters by name ({} without cameras)."""
        if self.encoder is None:
            return {}
        return {name: p for name, p in self.encoder.named_parameters() if p.requires_grad}

    def features(self, obs: Observation) -> torch.Tensor:
        """What actor and critics read of observations: the vector itself, or the encoder's features."""
        if self.encoder is None:
            return torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        return self.encoder(obs)

    @torch.no_grad()
    def act(self, obs: Observation, deterministic: bool = False) -> torch.Tensor:
        """Actions (B, action_dim) for observations (B, obs_dim, or dicts with images): sampled from the online
        actor (exploration), or the policy actor's mean if deterministic."""
        features = self.features(obs)
        return self.policy_actor.deterministic(features) if deterministic else self.actor.sample(features)[0]

    @torch.no_grad()
    def center_actor_on(self, action: torch.Tensor) -> None:
        """Make `action` the initial mean action of the actor (and of its average)."""
        self.actor.center_on(action)
        if self.actor_average is not None:
            self.actor_average.load_state_dict(self.actor.state_dict())

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One SAC update from a batch of `critic_updates_per_actor_update * batch_size` transitions (with
        critic_obs/next_critic_obs for an asymmetric critic). Time-limit truncations are not terminations:
        their targets bootstrap. Returns detached scalar metrics.
        """
        if not self.trainable:
            raise RuntimeError("this agent only acts (SAC.from_checkpoint): build SAC(...) and load_training_state "
                               "to train on")
        config = self.config
        steps, size = config.critic_updates_per_actor_update, batch.rows
        if size % steps:
            raise ValueError(f"batch of {size} does not split into {steps} equal minibatches")
        rows = size // steps
        # Random draws happen here, from the global generator, so the compiled and eager updates consume the
        # same stream (and a resumed run reproduces it).
        noise = {"next_action": torch.randn(steps, rows, self.action_dim, device=self.device),
                 "action": torch.randn(rows, self.action_dim, device=self.device),
                 "critic_order": torch.rand(steps, config.num_critics, device=self.device),
                 # DrQ: per minibatch, obs and next_obs, camera and image, a shift (row, column) in [0, 2 pad]
                 "shifts": (torch.randint(2 * config.encoder.shift + 1, (steps, 2, len(self.images), rows, 2),
                                          device=self.device) if self.images
                            else torch.zeros(steps, 2, 0, rows, 2, dtype=torch.long, device=self.device))}
        return self._run("_update_with", batch, noise)

    def _update_with(self, batch: Batch, noise: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The update on given random draws: critic steps on consecutive minibatches, then one actor and
        temperature step on the last minibatch."""
        steps = self.config.critic_updates_per_actor_update
        *minibatches, last = batch.chunk(steps)
        shifts = noise["shifts"] if "shifts" in noise else [None] * steps  # image shifts: only with cameras
        for mb, next_noise, order, shift in zip(minibatches, noise["next_action"], noise["critic_order"], shifts):
            self._run("_critic_step", mb, next_noise, order, shift)
        return self._run("_last_step", last, noise["next_action"][-1], noise["critic_order"][-1], noise["action"],
                         shifts[-1])

    def _run(self, step: str, *args: Any) -> dict[str, torch.Tensor]:
        """Run one step (or the whole update), compiled if it has a graph of its own (else eagerly, or inline
        in the graph being traced); a failed compilation warns and falls back to eager."""
        compiled = self._compiled_steps.get(step) if self._compiled_steps is not None else None
        if compiled is not None:
            try:
                return compiled(*args)
            # no C++ compiler for inductor, or more than torch._dynamo.config.recompile_limit variants of a step
            # (agents of different shapes or hyperparameters in one process)
            except (torch._dynamo.exc.BackendCompilerFailed, torch._dynamo.exc.FailOnRecompileLimitHit) as error:
                warnings.warn(f"torch.compile of the SAC update failed, running it eagerly: {error}", stacklevel=3)
                self._compiled_steps = None
        return getattr(self, step)(*args)

    # Gradients come from torch.func.grad and the optimizers' Adam steps are applied to their own state, so
    # each step is a pure tensor program that torch.compile turns into one graph. Under no_grad, torch.func.grad
    # still differentiates inside while nothing else records autograd history.
    @torch.no_grad()
    def _critic_step(self, mb: Batch, next_noise: torch.Tensor, order: torch.Tensor,
                     shifts: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """One critic step towards the soft Bellman target, then the Polyak update of the target critics. With
        cameras the images are shifted first (DrQ), the target reads the encoder's features of the next
        observation (DrQ-v2: no target encoder), and the encoder learns with the critics; the features of
        this minibatch come back as "features" for the actor step."""
        config = self.config
        alpha = self.log_temperature.exp()
        obs, next_obs = mb.obs, mb.next_obs
        if self.encoder is not None:
            obs = self.encoder.augment(obs, shifts[0], config.encoder.shift)
            next_obs = self.encoder.augment(next_obs, shifts[1], config.encoder.shift)
            next_obs = self.encoder(next_obs)
        next_action, next_log_prob = self.actor.sample(next_obs, next_noise)
        next_critic_input = next_obs if mb.next_critic_obs is None else mb.next_critic_obs
        target_q = self.target_critic(next_critic_input, next_action)  # (E, B)
        if config.critic_subsample < config.num_critics:  # REDQ: the min over a random subset
            target_q = target_q[order.argsort()[: config.critic_subsample]]
        next_q = target_q.min(0).values
        if config.backup_entropy:
            next_q = next_q - alpha * next_log_prob
        target = mb.reward + config.discount * (1.0 - mb.terminated) * next_q

        def critic_loss_fn(params: dict[str, dict[str, torch.Tensor]]
                           ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
            features = obs if self.encoder is None else functional_call(self.encoder, params["encoder"], (obs,))
            critic_input = features if mb.critic_obs is None else mb.critic_obs
            q = functional_call(self.critic, params["critic"], (critic_input, mb.action))
            loss = ((q - target) ** 2).mean(1).sum()  # each member's MSE, summed
            return loss, (loss, q, features)

        params = {"critic": dict(self.critic.named_parameters()), "encoder": self._encoder_parameters()}
        grads, (critic_loss, q, features) = grad(critic_loss_fn, has_aux=True)(params)
        adam_step(self._adam_slots["critic_optimizer"], [*grads["critic"].values(), *grads["encoder"].values()])
        torch._foreach_lerp_(list(self.target_critic.parameters()), list(params["critic"].values()), config.tau)
        metrics = {"critic_loss": critic_loss / config.num_critics, "q_mean": q.mean()}
        return metrics if self.encoder is None else metrics | {"features": features}

    def _last_step(self, mb: Batch, next_noise: torch.Tensor, order: torch.Tensor, noise: torch.Tensor,
                   shifts: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """The last critic step, then the actor and temperature steps on the same minibatch (with cameras, on
        the features the critic step computed, detached: the actor does not train the encoder)."""
        metrics = self._critic_step(mb, next_noise, order, shifts)
        features = metrics.pop("features", None)
        return metrics | self._actor_step(mb, noise, mb.obs if features is None else features)

    @torch.no_grad()
    def _actor_step(self, mb: Batch, noise: torch.Tensor, features: torch.Tensor) -> dict[str, torch.Tensor]:
        """One actor step (ensemble-mean Q plus entropy, gradients reaching the actor only; plus filtered
        cloning if configured), the actor average's step, and one temperature step."""
        config = self.config
        alpha = self.log_temperature.exp()
        critic_obs = features if mb.critic_obs is None else mb.critic_obs
        use_bc = config.bc_weight > 0 and mb.source is not None

        def actor_loss_fn(params: dict[str, torch.Tensor]) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
            mean, log_std = functional_call(self.actor, params, (features,))
            action, log_prob = self.actor.squash(mean, log_std, noise)
            actor_q = self.critic(critic_obs, action).mean(0)
            loss = (alpha * log_prob - actor_q).mean()
            bc_loss = torch.zeros((), device=loss.device)
            if use_bc:
                bc_loss = self._filtered_bc_loss(mb, critic_obs, actor_q, self.actor.mean_action(mean))
                loss = loss + config.bc_weight * actor_q.detach().abs().mean() * bc_loss
            return loss, (loss, log_prob, bc_loss)

        actor_params = dict(self.actor.named_parameters())
        actor_grads, (actor_loss, log_prob, bc_loss) = grad(actor_loss_fn, has_aux=True)(actor_params)
        adam_step(self._adam_slots["actor_optimizer"], actor_grads.values())
        if self.actor_average is not None:
            rate: float | torch.Tensor = config.actor_average_rate
            if config.actor_average_span > 0:
                steps = self._adam_slots["actor_optimizer"].steps[0]  # actor steps so far, this one included
                rate = (1.0 / (1.0 + config.actor_average_span * steps)).clamp(min=config.actor_average_rate)
            torch._foreach_lerp_(list(self.actor_average.parameters()), list(actor_params.values()), rate)

        # Temperature: drive the policy's entropy towards the target.
        entropy = -log_prob.mean()
        temperature_grad = grad(lambda log_t: log_t.exp() * (entropy - self.target_entropy))(self.log_temperature)
        adam_step(self._adam_slots["temperature_optimizer"], [temperature_grad])
        return {"actor_loss": actor_loss, "entropy": entropy, "temperature": alpha, "bc_loss": bc_loss}

    def _filtered_bc_loss(self, mb: Batch, critic_obs: torch.Tensor, policy_q: torch.Tensor,
                          mean_action: torch.Tensor) -> torch.Tensor:
        """Squared distance of the mean action to the demonstrated one, over the offline rows (demos and
        interventions) where the critics rate the demonstrated action above the policy's (the Q filter:
        once the policy is better, the demos stop pulling)."""
        offline = mb.source != int(Source.ONLINE)
        if self.config.bc_q_filter:
            demo_q = self.critic(critic_obs, mb.action).mean(0)
            offline = offline & (demo_q > policy_q.detach())
        keep = offline.float()
        distance = ((mean_action - mb.action) ** 2).sum(-1)
        return (keep * distance).sum() / keep.sum().clamp(min=1.0)

    @classmethod
    def from_checkpoint(cls, state: Mapping[str, Any], device: str | torch.device = "cpu") -> "SAC":
        """The networks stored in a checkpoint dict (robo_rl.checkpoint.load_checkpoint), in eval mode, to act
        with (no optimizers: resuming loads `load_training_state` into a trainable agent)."""
        spec = state["env_spec"]
        agent = cls(spec["observation_size"], spec["action_low"], spec["action_high"],
                    SACConfig(**state["agent_config"]), critic_obs_dim=state.get("critic_obs_dim"), device=device,
                    images=spec.get("observation_images"), trainable=False)
        agent.load_state_dict(state["agent"]["model"])
        return agent.eval()

    def training_state(self) -> dict[str, Any]:
        """Everything needed to resume: networks, target, temperature and optimizer states."""
        return {
            "model": self.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "temperature_optimizer": self.temperature_optimizer.state_dict(),
        }

    def load_training_state(self, state: Mapping[str, Any]) -> None:
        """Restore what `training_state` returned."""
        self.load_state_dict(state["model"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.temperature_optimizer.load_state_dict(state["temperature_optimizer"])
