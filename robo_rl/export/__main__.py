"""`python -m robo_rl.export run=<run dir> [vehicle=<name>] [out=...] [checkpoint=last]`: write and verify a policy
bundle for the quadrotor it is deployed on (default the run's training vehicle)."""

from __future__ import annotations

import json

import torch
from omegaconf import DictConfig, OmegaConf

from robo_rl.cli import hydra_command
from robo_rl.export.bundle import export_bundle


@hydra_command(config_path="../../configs", config_name="export")
def main(cfg: DictConfig) -> None:
    """Hydra entry point: export, then print where the bundle is and how well it agrees with PyTorch."""
    torch.set_num_threads(1)
    safe_action = cfg.safe_action if isinstance(cfg.safe_action, str) else list(OmegaConf.to_container(cfg.safe_action))
    out = export_bundle(cfg.run, cfg.checkpoint, cfg.out, int(cfg.pairs), int(cfg.seed), safe_action,
                        int(cfg.onnx.opset), int(cfg.onnx.ir_version), cfg.c_prefix, cfg.vehicle)
    manifest = json.loads((out / "policy.json").read_text())
    network = manifest["network"]
    print(f"bundle {out}: {manifest['env_id']}, network "
          f"{'-'.join(str(layer['in']) for layer in network['layers'])}-{network['layers'][-1]['out']} "
          f"{network['hidden_activation']}, {network['parameters']} parameters, {len(manifest['recorded_pairs'])} "
          f"recorded pairs")
    deployment = manifest.get("deployment")
    if deployment:
        print(f"deployment: {deployment['vehicle']}, thrust_max {deployment['thrust_max_newton']:.6g} N per motor, hover "
              f"command {deployment['hover_command']:.4f}, firmware THRUST_MAX {deployment['firmware_thrust_max']} N, "
              f"THRUST_MIN {deployment['firmware_thrust_min']} N")
    print(f"verification: {json.dumps(manifest['verification'])}")


if __name__ == "__main__":
    main()
