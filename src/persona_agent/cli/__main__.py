"""``python -m persona_agent.cli``: the command line."""

from persona_agent.cli.commands import app

app()
