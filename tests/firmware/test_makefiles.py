"""The cross-compiled harness (firmware/cortex_m4) and arm app (firmware/arm) Makefiles refuse a folder that lacks
what they read in one line naming the variable, before anything is compiled: make's "No rule to make target
'.../policy.o'" never named POLICY_DIR, and a wrong VECTORS_DIR or CONFIG_DIR was the compiler's "No such file"
after some objects were already in BUILD. No cross-compiler runs here: each build stops while make reads the
Makefile."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

FIRMWARE = Path(__file__).resolve().parents[2] / "firmware"
# the folders each Makefile reads, and the files it needs in each
FOLDERS = {"cortex_m4": {"POLICY_DIR": ("policy.c", "policy.h"), "VECTORS_DIR": ("test_vectors.h",)},
           "arm": {"POLICY_DIR": ("policy.c", "policy.h"), "CONFIG_DIR": ("arm_config.h", "arm_config.c")}}


def stub_folder(path: Path, *names: str) -> Path:
    """A folder holding empty files of these names: what the checks look for, never compiled here."""
    path.mkdir(parents=True)
    for name in names:
        (path / name).write_text("")
    return path


@pytest.mark.parametrize("app, goal, wrong", [
    ("cortex_m4", "all", "POLICY_DIR"),
    ("cortex_m4", "serial", "POLICY_DIR"),
    ("cortex_m4", "all", "VECTORS_DIR"),
    ("arm", "all", "POLICY_DIR"),
    ("arm", "all", "CONFIG_DIR"),
])
def test_a_folder_without_its_files_is_named_in_one_line_and_nothing_is_built(app, goal, wrong, tmp_path):
    folders = {name: stub_folder(tmp_path / name, *files) for name, files in FOLDERS[app].items()}
    folders[wrong] = tmp_path / "no_such_folder"
    build = tmp_path / "build"
    variables = [f"{name}={folder}" for name, folder in folders.items()]
    result = subprocess.run(["make", "-s", "-C", str(FIRMWARE / app), goal, *variables, f"BUILD={build}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{wrong}={tmp_path / 'no_such_folder'} has no " in lines[0], result.stderr
    assert not build.exists()


FAKE_CC = """#!/bin/sh
# stands in for arm-none-eabi-gcc: records each output it is asked for and writes it
while [ $# -gt 0 ]; do
  if [ "$1" = -o ]; then echo "$(basename "$2")" >> "$(dirname "$0")/built"; : > "$2"; fi
  shift
done
"""


@pytest.mark.parametrize("app", ["cortex_m4", "arm"])
def test_a_rebuild_into_the_same_build_folder_recompiles_what_changed_inputs(app, tmp_path):
    """make compared file times alone: a regenerated arm_config.h (a slower joint-speed limit, a shorter host timeout)
    rebuilt only arm_config.o, and another bundle whose files were older than the objects rebuilt nothing, so the
    image kept the old limits or read the old observation layout."""
    import os

    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "cc").write_text(FAKE_CC)
    (tools / "cc").chmod(0o755)
    built = tools / "built"
    folders = {name: stub_folder(tmp_path / name, *files) for name, files in FOLDERS[app].items()}
    header = folders["CONFIG_DIR" if app == "arm" else "VECTORS_DIR"] / FOLDERS[app]["CONFIG_DIR" if app == "arm"
                                                                                     else "VECTORS_DIR"][0]

    def build(*extra: str) -> list[str]:
        built.unlink(missing_ok=True)
        result = subprocess.run(["make", "-s", "-C", str(FIRMWARE / app), f"CC={tools / 'cc'}", "SIZE=true",
                                 *(f"{name}={folder}" for name, folder in folders.items()), f"BUILD={tmp_path / 'b'}",
                                 *extra], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return sorted(built.read_text().split()) if built.exists() else []

    everything = build()
    assert len(everything) >= 4 and all(name.endswith((".o", ".elf")) for name in everything)
    assert build() == []  # nothing changed: nothing is compiled again
    header.write_text("#define ARM_MAX_JOINT_STEP 1.e-02f\n")  # regenerated, with a time older than the objects
    os.utime(header, (1, 1))
    assert build() == everything
    other = stub_folder(tmp_path / "other_bundle", *FOLDERS[app]["POLICY_DIR"])  # another bundle, older files
    for path in other.iterdir():
        path.write_text("/* another policy */\n")
        os.utime(path, (1, 1))
    folders["POLICY_DIR"] = other
    assert build() == everything
    assert build("EXTRA_CFLAGS=-DPOLICY_KERNEL_FMA=0") == everything
    assert build("EXTRA_CFLAGS=-DPOLICY_KERNEL_FMA=0") == []
