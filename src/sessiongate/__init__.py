"""sessiongate: durable, well-defined conversation sessions for AI assistants."""

__version__ = "0.1.0"
