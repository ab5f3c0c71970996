"""`python -m robo_rl.export run=<run dir> [vehicle=<name>] [out=...] [checkpoint=last]`: write and verify a policy
bundle for the quadrotor it is deployed on (default the run's training vehicle)."""

from __future__ import annotations

import json

import torch
from omegaconf import DictConfig, OmegaConf

from robo_rl.cli import hydra_command
from robo_rl.export.bundle import export_bundle
from robo_rl.options import c_choice


@hydra_command(config_path="../../configs", config_name="export")
def main(cfg: DictConfig) -> None:
    """Hydra entry point: export, then print where the bundle is and how well it agrees with PyTorch."""
    torch.set_num_threads(1)
    safe_action = cfg.safe_action if isinstance(cfg.safe_action, str) else list(OmegaConf.to_container(cfg.safe_action))
    out = export_bundle(cfg.run, cfg.checkpoint, cfg.out, int(cfg.pairs), int(cfg.seed), safe_action,
                        int(cfg.onnx.opset), int(cfg.onnx.ir_version), cfg.c_prefix, cfg.vehicle, c_choice(cfg.c))
    manifest = json.loads((out / "policy.json").read_text())
    network = manifest["network"]
    encoder = network.get("encoder")
    cameras = f"image encoder ({', '.join(encoder['cameras'])}) then " if encoder else ""
    print(f"bundle {out}: {manifest['env_id']}, network {cameras}"
          f"{'-'.join(str(layer['in']) for layer in network['layers'])}-{network['layers'][-1]['out']} "
          f"{network['hidden_activation']}, {network['parameters']} parameters, {len(manifest['recorded_pairs'])} "
          f"recorded pairs")
    deployment = manifest.get("deployment")
    if deployment:
        print(f"deployment: {deployment['vehicle']}, thrust_max {deployment['thrust_max_newton']:.6g} N per motor, hover "
              f"command {deployment['hover_command']:.4f}, firmware THRUST_MAX {deployment['firmware_thrust_max']} N, "
              f"THRUST_MIN {deployment['firmware_thrust_min']} N")
    for image in manifest["observation"].get("images", []):
        print(f"camera input {image['onnx_input']!r}: uint8 {image['height']}x{image['width']}x3 RGB, mounted on "
              f"{image['mount']['body']!r} as in training; C: none (a policy on camera images runs as ONNX)")
    print(f"verification: {json.dumps(manifest['verification'])}")


if __name__ == "__main__":
    main()
