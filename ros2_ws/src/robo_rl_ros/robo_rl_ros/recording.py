"""MCAP files of ROS 2 messages, as rosbag2 writes them: profile "ros2", one "ros2msg" schema per type
(the .msg text with its dependencies appended, the format Foxglove and `ros2 bag play` read), and the
messages' CDR bytes as received (message encoding "cdr")."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import BinaryIO

from ament_index_python.packages import get_package_share_directory
from mcap.writer import CompressionType, Writer

PRIMITIVES = {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
              "uint32", "int64", "uint64", "string", "wstring"}
SEPARATOR = "=" * 80


def message_definition(datatype: str) -> str:
    """The ros2msg schema text of `datatype` ("pkg/msg/Name"): its .msg file, then each nested type's
    file under an "MSG: pkg/Name" header, as rosbag2 stores it."""
    package, _, name = _split(datatype)
    text = _msg_text(package, name)
    seen: list[str] = []
    _collect(package, text, seen)
    parts = [text.rstrip("\n")]
    for nested in seen:
        nested_package, nested_name = nested.split("/")
        parts.append(f"{SEPARATOR}\nMSG: {nested}\n{_msg_text(nested_package, nested_name).rstrip(chr(10))}")
    return "\n".join(parts) + "\n"


def _split(datatype: str) -> tuple[str, str, str]:
    parts = datatype.split("/")
    if len(parts) != 3 or parts[1] != "msg":
        raise ValueError(f"message types are named pkg/msg/Name, got {datatype!r}")
    return parts[0], parts[1], parts[2]


def _msg_text(package: str, name: str) -> str:
    return (_share_directory(package) / "msg" / f"{name}.msg").read_text()


def _share_directory(package: str) -> Path:
    """A package's share folder from the ament index, or, for ROS installed from PyPI wheels (no
    AMENT_PREFIX_PATH), under the Python environment's prefix."""
    try:
        return Path(get_package_share_directory(package))
    except (LookupError, OSError):
        fallback = Path(sys.prefix) / "share" / package
        if fallback.is_dir():
            return fallback
        raise ValueError(f"no message definitions for package {package!r} (not in the ament index)") from None


def _collect(package: str, text: str, seen: list[str]) -> None:
    """Append the nested message types of a .msg text (depth first, each once) to `seen`."""
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or re.match(r"^\S+\s+\w+\s*=", line):  # blank, comment or constant
            continue
        base = re.sub(r"(<=\d+)?(\[[^\]]*\])?$", "", line.split()[0])
        if base in PRIMITIVES:
            continue
        full = base if "/" in base else f"{package}/{base}"
        if full not in seen:
            seen.append(full)
            nested_package, nested_name = full.split("/")
            _collect(nested_package, _msg_text(nested_package, nested_name), seen)


class McapRecorder:
    """Writes serialized (CDR) ROS 2 messages into an MCAP file; `close` finishes it."""

    def __init__(self, output: str | Path | BinaryIO):
        self._file = open(output, "xb") if isinstance(output, (str, Path)) else output  # never over a file
        self._writer = Writer(self._file, compression=CompressionType.NONE)
        self._writer.start(profile="ros2", library="robo_rl_ros")
        self._schemas: dict[str, int] = {}
        self._channels: dict[str, int] = {}
        self.count = 0

    def add_topic(self, topic: str, datatype: str) -> None:
        """Declare a topic and its type ("pkg/msg/Name") before writing its messages."""
        if datatype not in self._schemas:
            self._schemas[datatype] = self._writer.register_schema(
                name=datatype, encoding="ros2msg", data=message_definition(datatype).encode())
        self._channels[topic] = self._writer.register_channel(
            topic=topic, message_encoding="cdr", schema_id=self._schemas[datatype])

    def write(self, topic: str, cdr: bytes, log_time_ns: int, publish_time_ns: int | None = None) -> None:
        """Append one serialized message received at `log_time_ns`."""
        self._writer.add_message(channel_id=self._channels[topic], log_time=log_time_ns, data=cdr,
                                 publish_time=log_time_ns if publish_time_ns is None else publish_time_ns,
                                 sequence=self.count)
        self.count += 1

    def close(self) -> None:
        """Write the MCAP summary and close the file."""
        self._writer.finish()
        self._file.close()
