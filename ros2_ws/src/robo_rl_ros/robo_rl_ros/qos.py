"""The QoS profiles of robo-rl's nodes: sensors best effort depth 1 (only the latest state matters),
commands reliable (crazyswarm2 and ros2_control subscribe reliable; a best-effort publisher would not match)."""

from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

SENSOR_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST)
COMMAND_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
