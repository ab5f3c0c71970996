"""robo-rl: sample-efficient off-policy RL (SAC with demo and intervention buffers) and deployment."""
