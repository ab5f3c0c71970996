"""mcap_recorder_node: records topics into an MCAP file that Foxglove and `ros2 bag play` open.

Parameters: `output` (file path), `topics` (strings "topic:pkg/msg/Type"). Subscriptions are best
effort (they match reliable and best-effort publishers) and keep the messages' CDR bytes as received;
the file is finished when the node shuts down.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

from robo_rl_ros.recording import McapRecorder
from robo_rl_ros.spin import StartupError, run_node

RECORD_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST)


class McapRecorderNode(Node):
    """Subscribes to the configured topics and writes every message to one MCAP file."""

    def __init__(self) -> None:
        super().__init__("mcap_recorder_node")
        output = self.declare_parameter("output", "").value
        topics = self.declare_parameter("topics", ["/cf231/odom:nav_msgs/msg/Odometry"]).value
        if not output:
            raise StartupError("mcap_recorder_node: parameter output (an .mcap path) is required")
        check_new_recording(output)
        entries = []
        for entry in topics:
            topic, _, datatype = entry.partition(":")
            try:
                entries.append((topic, datatype, get_message(datatype)))
            except (ValueError, AttributeError, ImportError) as error:
                raise StartupError(f"mcap_recorder_node: cannot record {entry!r}: {error}") from error
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.recorder = McapRecorder(output)
        except OSError as error:  # made meanwhile, or a folder that cannot be written
            raise StartupError(f"mcap_recorder_node: output={output}: {error.strerror}") from None
        for topic, datatype, message_type in entries:
            self.recorder.add_topic(topic, datatype)
            self.create_subscription(message_type, topic, self._writer(topic), RECORD_QOS, raw=True)
        self.get_logger().info(f"recording {len(entries)} topics to {output}")

    def _writer(self, topic: str):
        def write(cdr: bytes) -> None:
            self.recorder.write(topic, cdr, self.get_clock().now().nanoseconds)
        return write

    def destroy_node(self) -> None:
        """Finish the MCAP file, then destroy the node."""
        self.recorder.close()
        self.get_logger().info(f"wrote {self.recorder.count} messages")
        super().destroy_node()


def check_new_recording(output: str) -> None:
    """StartupError unless `output` is a new file ending .mcap in a folder that is (or can be) made: an existing
    file, a run's summary.json say, was silently replaced by the recording, and a folder was a traceback."""
    path = Path(output)
    if path.suffix != ".mcap":
        raise StartupError(f"mcap_recorder_node: output={output} must be a file ending .mcap")
    if path.exists():
        raise StartupError(f"mcap_recorder_node: output={output} exists already; give a new file (a recording is "
                           "never written over another file)")
    for parent in path.parents:  # the deepest that exists decides
        if parent.exists():
            if not parent.is_dir():
                raise StartupError(f"mcap_recorder_node: output={output} lies under {parent}, a file")
            break


def get_message(datatype: str) -> type:
    """The message class of "pkg/msg/Name"."""
    package, kind, name = datatype.split("/") if datatype.count("/") == 2 else ("", "", "")
    if kind != "msg":
        raise ValueError(f"message types are named pkg/msg/Name, got {datatype!r}")
    return getattr(importlib.import_module(f"{package}.msg"), name)


def main(args: list[str] | None = None) -> int:
    """Entry point of the `mcap_recorder_node` executable."""
    return run_node(McapRecorderNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
