"""Firmware in the loop: the MuJoCo quadrotor flown by PyTorch, ONNX Runtime, the host-compiled C and
the C on the emulated STM32F405 (over its serial port) follows one trajectory from one start."""

from __future__ import annotations

from robo_rl.export.in_the_loop import compare_targets


def test_every_target_flies_the_pytorch_trajectory(exported_bundle, trained_run):
    report = compare_targets(exported_bundle, seed=2, steps=150, checkpoint=trained_run / "best_policy.pt")
    assert set(report) == {"pytorch", "onnxruntime", "c_host", "c_stm32f405_qemu"}
    reference = report["pytorch"]
    assert reference["steps"] > 20  # a real flight, not one that ended at once
    for name, row in report.items():
        assert row["steps"] == reference["steps"], name
        assert row["max_deviation_from_pytorch_m"] < 1e-5, (name, row)
        assert abs(row["return"] - reference["return"]) < 1e-3, (name, row)
