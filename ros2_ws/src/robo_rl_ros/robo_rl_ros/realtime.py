"""Real-time scheduling for a control node: every thread of the process under SCHED_FIFO.

On a loaded computer a control node at normal priority waits behind other processes for a core; with a
fixed real-time priority (as ros2_control's controller manager runs its loop) it preempts them, which
bounds the tail of its tick latency. Needs CAP_SYS_NICE or an rtprio limit (`ulimit -r`,
/etc/security/limits.conf); without them the node keeps normal scheduling and says why.
"""

from __future__ import annotations

import os

from rclpy.node import Node

from robo_rl_ros.spin import StartupError

MAX_PRIORITY = 99


def validate_priority(priority: int) -> None:
    """Raise ValueError unless `priority` is 0 (normal scheduling) or a SCHED_FIFO priority 1..99."""
    if not 0 <= priority <= MAX_PRIORITY:
        raise ValueError(f"realtime_priority must be 0 (off) or 1..{MAX_PRIORITY} (SCHED_FIFO), got {priority}")


def apply_realtime_priority(priority: int) -> str | None:
    """Put every current thread of this process under SCHED_FIFO at `priority` (threads created later
    by them inherit it); 0 changes nothing. Returns None on success, else why it could not."""
    validate_priority(priority)
    if priority == 0:
        return None
    if not hasattr(os, "sched_setscheduler") or not os.path.isdir("/proc/self/task"):
        return "SCHED_FIFO needs Linux"
    param = os.sched_param(priority)
    try:
        for thread_id in os.listdir("/proc/self/task"):  # the DDS threads as well as the executor's
            try:
                os.sched_setscheduler(int(thread_id), os.SCHED_FIFO, param)
            except ProcessLookupError:  # the thread ended meanwhile
                continue
    except PermissionError:
        return (f"no permission for SCHED_FIFO priority {priority} (needs CAP_SYS_NICE or an rtprio limit, "
                "e.g. `ulimit -r 99`)")
    return None


def configure_realtime(node: Node, priority: int) -> None:
    """Apply the node's `realtime_priority` parameter once its threads exist (StartupError when out of
    range; a warning, and normal scheduling, when the system does not allow it)."""
    try:
        reason = apply_realtime_priority(priority)
    except ValueError as error:
        raise StartupError(f"{node.get_name()}: {error}") from error
    if reason is not None:
        node.get_logger().warn(f"realtime_priority {priority} not applied: {reason}; running at normal priority")
    elif priority:
        node.get_logger().info(f"threads run under SCHED_FIFO priority {priority}")
