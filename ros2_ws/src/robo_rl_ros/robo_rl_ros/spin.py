"""Running a node until Ctrl-C or an external shutdown, exiting 0 either way."""

from __future__ import annotations

import difflib
import sys
import time
from typing import Callable

import rclpy
from rclpy.exceptions import (InvalidParameterTypeException, InvalidParameterValueException,
                              InvalidServiceNameException, InvalidTopicNameException)
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node


def run_node(make_node: Callable[[], Node], args: list[str] | None = None) -> int:
    """Create the node with rclpy initialized, spin it, and shut down cleanly; returns the exit code
    (1, with one error line, if the node cannot start)."""
    rclpy.init(args=args)
    node = None
    try:
        node = _created(make_node)
        refuse_unknown_parameters(node)
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except StartupError as error:
        print(f"[ERROR] {error}", file=sys.stderr)
        return 1
    except (InvalidParameterTypeException, InvalidParameterValueException) as error:
        # a parameter of the wrong type on the command line (-p episode_seconds:=3 for a double): rclpy's
        # message names it and the type it expects
        print(f"[ERROR] {str(error).strip().splitlines()[0]}", file=sys.stderr)
        return 1
    except RuntimeError:
        # rclpy can fail to take a message from an entity that the shutdown is tearing down (seen on SIGINT,
        # sometimes before the context reports the shutdown): an artifact of stopping, not an error of the node
        if not _shutting_down(within=1.0):
            raise
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0


def _created(make_node: Callable[[], Node]) -> Node:
    """`make_node()`, with a topic or service name rclpy refuses, or a topic that another type already uses (the
    state topic given as the command topic), as a StartupError: they were tracebacks."""
    from rclpy._rclpy_pybind11 import RCLError

    try:
        return make_node()
    except (InvalidTopicNameException, InvalidServiceNameException) as error:
        raise StartupError(str(error).strip().splitlines()[0]) from None
    except RCLError as error:
        raise StartupError(f"cannot create the node's topics and services: {str(error).strip().splitlines()[0]} "
                           "(a topic given twice, for messages of two types?)") from None


def unknown_parameters(node: Node) -> list[str]:
    """The parameters given to `node` (command line, a params file, a launch file) that it does not declare."""
    # rclpy keeps what it was given in _parameter_overrides and, without allow_undeclared_parameters, ignores a
    # name the node never declares; qos_overrides.* are declared later, by the publishers that allow them
    given = getattr(node, "_parameter_overrides", {})
    return sorted(name for name in given if not node.has_parameter(name) and not name.startswith("qos_overrides."))


def refuse_unknown_parameters(node: Node) -> None:
    """StartupError naming a parameter the node was given but does not take: ROS would ignore it, and a misspelled
    limit (max_tilt_degs:=20) would fly with its default."""
    unknown = unknown_parameters(node)
    if not unknown:
        return
    declared = sorted(node.list_parameters([], 0).names)
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, declared, n=1)
        hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
    raise StartupError(f"{node.get_name()}: unknown parameter{'s' * (len(unknown) > 1)} {', '.join(hints)}; "
                       f"it takes {', '.join(declared)}")


def _shutting_down(within: float) -> bool:
    """Whether rclpy's context is shut down, or is within `within` seconds."""
    deadline = time.monotonic() + within
    while rclpy.ok():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class StartupError(Exception):
    """The node's parameters or bundle do not allow it to run (reported as one line, exit code 1)."""
