"""The ``persona-agent`` command line: its commands, the terminal chat and its A2A client."""

from persona_agent.cli.commands import app

__all__ = ["app"]
