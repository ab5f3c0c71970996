"""What every arm task is: `ArmTask`, its goal, named reward terms with scales, success and scripted expert."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

import numpy as np

from sim.observation import ObservationLayout

if TYPE_CHECKING:
    from sim.arm.env import ArmTaskConfig


class ArmTask(ABC):
    """An arm task in one class: where each episode's goal lies, the named reward terms (the dense reward is
    their sum times `reward_scales`; with `config.dense` false the reward is the success term alone), success,
    and the scripted expert that demonstrations and interventions come from. Termination is the env's: an
    episode ends only where MuJoCo's simulation diverged, and truncates at `episode_seconds`."""

    name: ClassVar[str]
    reward_scales: ClassVar[Mapping[str, float]]

    @abstractmethod
    def goals(self, rng: np.random.Generator, cube: np.ndarray, config: ArmTaskConfig) -> np.ndarray:
        """Goal points (n, 3) of n new episodes whose cubes start at `cube` (n, 3)."""

    @abstractmethod
    def terms(self, obs: np.ndarray, layout: ObservationLayout, cube_start: np.ndarray,
              config: ArmTaskConfig) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The named reward terms (n,) each, unscaled, and success (n,) bool, of observations (n, obs)."""

    @abstractmethod
    def expert(self, obs: np.ndarray, layout: ObservationLayout, action_scale: float,
               cube_half_size: float | np.ndarray) -> np.ndarray:
        """The scripted expert's actions (n, 4) in [-1, 1] for observations (n, obs), before noise."""

    def reward(self, terms: Mapping[str, np.ndarray], success: np.ndarray, dense: bool) -> np.ndarray:
        """The reward (n,): the scaled terms' sum, or with `dense` false the sparse success."""
        if not dense:
            return success * 1.0
        total: Any = 0.0
        for name, scale in self.reward_scales.items():
            total = total + scale * terms[name]
        return np.asarray(total, dtype=np.float64)
