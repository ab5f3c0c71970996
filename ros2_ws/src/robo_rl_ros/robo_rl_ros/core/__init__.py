"""The ROS-independent core of the robo-rl nodes: numpy and onnxruntime only (no rclpy, torch or MuJoCo)."""
