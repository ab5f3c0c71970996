"""The model-based expert (sim/quadrotor/expert.py): its prediction is where the vehicle is when its command acts,
and with it the expert flies the Crazyflie family at every latency; without the prediction it does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from robo_rl.evaluation import evaluate_policy
from sim.quadrotor.env import QuadrotorVectorEnv
from sim.quadrotor.expert import ExpertGains, ModelExpert
from sim.quadrotor.model import VEHICLES
from sim.quadrotor.rotations import tilted_towards

ROOT = Path(__file__).resolve().parents[2]
MODERATE = {"position_range": 0.2, "max_tilt_deg": 30.0, "velocity_range": 0.5, "angular_velocity_range": 0.5,
            "hover_fraction": 0.0}


def family(**randomization: Any) -> dict[str, Any]:
    """make train's vehicle family (configs/experiment/hover_family.yaml with rotor constants from 0, as the
    student's) with `randomization` changed."""
    overrides = OmegaConf.to_container(OmegaConf.load(ROOT / "configs/experiment/hover_family.yaml").env.overrides)
    overrides["randomization"].update({"motor_tau_scale": [0.0, 1.0], **randomization})
    return overrides


def fly(expert: Any, env: QuadrotorVectorEnv, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One episode per env flown by `expert`: successes and each env's latency [control steps]."""
    result = evaluate_policy(lambda _obs: expert(), env, seed, torch.device("cpu"))
    return np.asarray(result["successes"], dtype=bool), np.asarray(result["params"]["latency_steps"]).reshape(-1)


class WithoutPrediction(ModelExpert):
    """The same expert acting on the current state, as if its commands acted at once."""

    def predicted_state(self):
        return tuple(self.batch.physics.buffer.unbind(0)), self.batch.rotor_speed.clone()


@pytest.mark.parametrize("compile", [False, "native"])
def test_the_predicted_state_is_where_each_vehicle_is_when_the_command_sent_now_acts(compile):
    env = QuadrotorVectorEnv("hover", num_envs=48, backend="torch", device="cpu", compile=compile,
                             config={**family(), "initial_state": MODERATE})
    _, info = env.reset(seed=3)
    latency = np.asarray(info["params"]["latency_steps"]).reshape(-1).astype(int)
    assert set(latency) == {0, 1, 2, 3}
    rng = np.random.default_rng(0)
    hover = float(env.nominal_action[0])
    for _ in range(5):  # queue commands of its own in every env
        env.step(np.clip(hover + 0.2 * rng.standard_normal((48, 4)), 0.0, 1.0).astype(np.float32))
    expert = ModelExpert(env.batch)
    predicted, speed = expert.predicted_state()
    predicted = torch.stack(predicted).numpy().copy()
    speed = speed.numpy().copy()
    states = [env.batch.physics.buffer.numpy().copy()]
    speeds = [env.batch.rotor_speed.numpy().copy()]
    for _ in range(3):  # whatever is sent now acts only after each env's latency
        _, _, terminated, truncated, _ = env.step(np.clip(rng.random((48, 4)), 0.0, 1.0).astype(np.float32))
        assert not (np.asarray(terminated) | np.asarray(truncated)).any()
        states.append(env.batch.physics.buffer.numpy().copy())
        speeds.append(env.batch.rotor_speed.numpy().copy())
    envs = np.arange(48)
    actual = np.stack(states)[latency, :, envs]  # (48, 13): each env's state after its own latency
    np.testing.assert_allclose(predicted.T, actual, atol=2e-5)
    np.testing.assert_allclose(speed.T, np.stack(speeds)[latency, :, envs], atol=2e-5)
    # at latency 0 the prediction is the state itself; the prediction moved every other env
    assert np.abs(predicted.T - states[0][:, envs].T)[latency > 0].max() > 1e-3


def test_the_native_kernel_predicts_what_the_torch_steps_predict_and_leaves_the_batch_as_it_was(monkeypatch):
    env = QuadrotorVectorEnv("hover", num_envs=40, backend="torch", device="cpu", compile="native",
                             config={**family(), "initial_state": MODERATE})
    env.reset(seed=4)
    rng = np.random.default_rng(1)
    for _ in range(4):
        env.step(np.clip(0.5 + 0.3 * rng.standard_normal((40, 4)), 0.0, 1.0).astype(np.float32))
    batch = env.batch
    kept = [value.clone() for value in (batch.physics.buffer, batch.rotor_speed, batch.pending, batch.latency)]
    expert = ModelExpert(batch)
    native_state, native_speed = expert.predicted_state()
    for before, after in zip(kept, (batch.physics.buffer, batch.rotor_speed, batch.pending, batch.latency)):
        assert torch.equal(before, after)
    monkeypatch.setattr(batch, "native", None)  # the torch steps on the same batch
    torch_state, torch_speed = expert.predicted_state()
    torch.testing.assert_close(torch.stack(native_state), torch.stack(torch_state), rtol=2e-5, atol=2e-6)
    torch.testing.assert_close(native_speed, torch_speed, rtol=2e-5, atol=1e-6)
    assert (torch.stack(native_state) - batch.physics.buffer).abs().amax(0)[batch.latency > 0].min() > 0


def test_the_expert_flies_the_family_at_every_latency_and_its_prediction_is_what_flies_30_ms():
    env = QuadrotorVectorEnv("hover", num_envs=96, backend="torch", device="cpu", compile="native",
                             config={**family(), "initial_state": MODERATE})
    success, latency = fly(ModelExpert(env.batch), env, seed=11)
    for steps in range(4):
        assert success[latency == steps].mean() >= 0.9, (steps, success[latency == steps].mean())
    late = QuadrotorVectorEnv("hover", num_envs=96, backend="torch", device="cpu", compile="native",
                              config={**family(latency_steps=[3, 3]), "initial_state": MODERATE})
    with_prediction, _ = fly(ModelExpert(late.batch), late, seed=11)
    without, _ = fly(WithoutPrediction(late.batch), late, seed=11)
    assert with_prediction.mean() >= 0.9 and without.mean() <= with_prediction.mean() - 0.3, \
        (with_prediction.mean(), without.mean())


def steep_start_success(vehicle: str, gains: ExpertGains, episodes: int = 400) -> float:
    """The expert's success from learning-to-fly's starts on a named vehicle with its firmware's thrust limits, as
    the robustness suite flies it, no latency or wind."""
    published = VEHICLES[vehicle]
    env = QuadrotorVectorEnv("hover", num_envs=episodes, backend="torch", device="cpu", compile="native",
                             config={"vehicle": vehicle, "randomization": {"enabled": False},
                                     "firmware_thrust_max": published.firmware_thrust_max or 0.0,
                                     "firmware_thrust_min": published.firmware_thrust_min or 0.0})
    return float(fly(ModelExpert(env.batch, gains), env, seed=5)[0].mean())


def same_commands(vehicle: str, first: ExpertGains, second: ExpertGains) -> None:
    env = QuadrotorVectorEnv("hover", num_envs=64, backend="torch", device="cpu", config={"vehicle": vehicle})
    env.reset(seed=0)  # learning-to-fly's starts: steep, fast, falling
    torch.testing.assert_close(ModelExpert(env.batch, first)(), ModelExpert(env.batch, second)(), rtol=0, atol=0)


def test_the_attitude_loop_is_faster_only_for_rotors_faster_than_its_lag_limit():
    """From learning-to-fly's steep starts the 20 rad/s loop let a lag-free Crazyflie (gym-pybullet-drones') leave
    the box where its specialists do not; a slow-rotor one flies the same commands as before."""
    fixed = ExpertGains(fast_attitude_frequency=ExpertGains().attitude_frequency)
    assert steep_start_success("crazyflie_pybullet_drones", ExpertGains()) >= \
        steep_start_success("crazyflie_pybullet_drones", fixed) + 0.01
    same_commands("crazyflie_l2f_paper", ExpertGains(), fixed)


def test_slow_rotors_spin_up_for_the_thrust_needed_once_upright():
    """Learning-to-fly's falling, steep starts took the light Crazyflies with 150 ms rotors, their thrust capped by
    the firmware, through the floor of the box while the thrust asked for was only its share along the tilted
    thrust axis; fast rotors keep that."""
    no_lead = ExpertGains(collective_lead=0.0)
    for vehicle in ("crazyflie_l2f_paper", "crazyflie_l2f_ai_deck"):
        assert steep_start_success(vehicle, ExpertGains()) >= steep_start_success(vehicle, no_lead) + 0.02, vehicle
    for vehicle in ("crazyflie_pybullet_drones", "crazyflie_brushless"):  # no lag, 50 ms
        same_commands(vehicle, ExpertGains(), no_lead)


def test_a_vehicle_on_its_side_is_righted_whatever_its_heading():
    """A Crazyflie at the target tilted 84 degrees and sliding at 0.9 m/s towards its tilt, every tilt direction x
    every heading: the expert brakes, so the thrust axis it wants leans the other way. The attitude loop that built
    its error from a whole attitude with the heading of the body's x axis got an error of zero where that axis lay
    in the plane of the tilt (a rotation of 180 degrees) and held those 24 of the 144 on their side until they left
    the box; the tilt loop rights every one within 0.3 s."""
    directions, headings = np.meshgrid(np.arange(12) * np.pi / 6, np.arange(12) * np.pi / 6, indexing="ij")
    directions, headings = directions.ravel(), headings.ravel()
    n = len(directions)
    env = QuadrotorVectorEnv("hover", num_envs=n, backend="torch", device="cpu",
                             config={"vehicle": "crazyflie_l2f_paper", "randomization": {"enabled": False}})
    env.reset(seed=0, options={"initial_state": {
        "position": np.tile(env.config.center, (n, 1)),
        "quaternion": tilted_towards(np, directions, np.full(n, np.radians(84.0)), headings).T,
        "velocity": np.stack([0.9 * np.cos(directions), 0.9 * np.sin(directions), np.zeros(n)], 1),
        "angular_velocity": np.zeros((n, 3))}})
    expert = ModelExpert(env.batch)
    least_tilt = np.full(len(directions), 180.0)
    flying = np.ones(len(directions), dtype=bool)
    for _ in range(30):
        _, _, terminated, truncated, _ = env.step(expert().numpy())
        flying &= ~(np.asarray(terminated) | np.asarray(truncated))  # a restarted env flies another start
        qx, qy = env.batch.physics.buffer[4].numpy(), env.batch.physics.buffer[5].numpy()
        tilt = np.degrees(np.arccos(np.clip(1.0 - 2.0 * (qx ** 2 + qy ** 2), -1.0, 1.0)))
        least_tilt = np.where(flying, np.minimum(least_tilt, tilt), least_tilt)
    assert least_tilt.max() < 30.0, [(round(np.degrees(d)), round(np.degrees(h)))
                                     for d, h in zip(directions, headings)][int(least_tilt.argmax())]


def test_the_expert_refuses_a_batch_it_cannot_read():
    env = QuadrotorVectorEnv("hover", num_envs=2, backend="mujoco_batch")
    with pytest.raises(ValueError, match="torch backend"):
        ModelExpert(env.batch)
