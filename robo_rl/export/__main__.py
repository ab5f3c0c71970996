"""`python -m robo_rl.export run=<run dir> [out=...] [checkpoint=last]`: write and verify a policy bundle."""

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
                        int(cfg.onnx.opset), int(cfg.onnx.ir_version), cfg.c_prefix)
    manifest = json.loads((out / "policy.json").read_text())
    network = manifest["network"]
    print(f"bundle {out}: {manifest['env_id']}, network "
          f"{'-'.join(str(layer['in']) for layer in network['layers'])}-{network['layers'][-1]['out']} "
          f"{network['hidden_activation']}, {network['parameters']} parameters, {len(manifest['recorded_pairs'])} "
          f"recorded pairs")
    print(f"verification: {json.dumps(manifest['verification'])}")


if __name__ == "__main__":
    main()
