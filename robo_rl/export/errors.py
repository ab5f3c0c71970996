"""The errors of the export package, one module that every part of it imports (and none of them)."""

from __future__ import annotations


class ExportError(RuntimeError):
    """The bundle could not be made, or a target disagrees with PyTorch."""


class CompileError(RuntimeError):
    """The C compiler is missing or rejected the generated code."""


class PolicyCheckError(ValueError):
    """The compiled policy failed its self-test: changed weights, an unusable safe action, or recorded
    pairs it no longer reproduces."""


class CortexM4Error(RuntimeError):
    """The toolchain is missing, the build failed, or the emulated run did not complete."""
