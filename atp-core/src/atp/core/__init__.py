"""ATP core: the protocol, the plugin kernel, suites, the runner and results."""

__version__ = "0.1.0"
