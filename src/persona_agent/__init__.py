"""persona-agent: a multi-persona A2A hub."""

__version__ = "0.1.0"
