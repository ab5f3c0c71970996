"""robo-rl policies as ROS 2 nodes: `core/` (ROS-independent) and thin rclpy nodes around it."""
