"""Errors raised by robo-rl simulators."""


class ConfigError(ValueError):
    """A simulator configuration is invalid: unknown name, out-of-range value or wrong shape."""
