"""robo-rl: sample-efficient off-policy RL (SAC with demo and intervention buffers) and deployment."""

import sys


def _quiet_interrupt(previous):  # type: ignore[no-untyped-def]
    """An excepthook that reports Ctrl-C as one line (as `robo_rl.cli.command` does inside a command) and leaves
    every other exception to `previous`."""

    def hook(kind, value, traceback):  # type: ignore[no-untyped-def]
        if issubclass(kind, KeyboardInterrupt):
            print("interrupted", file=sys.stderr)  # the interpreter still exits as killed by SIGINT
        else:
            previous(kind, value, traceback)

    return hook


# `python -m robo_rl.<command>` (argv[0] is "-m" while the package loads): a Ctrl-C during the seconds of importing
# torch and Hydra, before the command's own handler is in place, printed a traceback of those imports
if getattr(sys, "argv", [])[:1] == ["-m"]:
    sys.excepthook = _quiet_interrupt(sys.excepthook)
