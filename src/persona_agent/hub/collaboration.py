"""Collaboration: what a model may call besides its own words (outside agents, MCP tools),
built from the settings, and the start-up warnings of personas naming what is not there."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable

from persona_agent.personas.model import Persona

__all__ = ["warn_unknown_agents", "warn_unknown_tool_servers"]

logger = logging.getLogger(__name__)


TOOL_SEPARATOR = "__"
"""Between a server's name and its tool's in an allow-list entry (``mcp/tools.py``'s
``SEPARATOR``, not imported: the MCP SDK it imports is not loaded without servers)."""


def warn_unknown_tool_servers(personas: Iterable[Persona], servers: Collection[str]) -> None:
    """Start-up: warn of each persona whose ``tools.allow`` names an MCP server that is not
    among ``servers`` (the configured ones): a typo, or a server left out of the MCP
    config. The persona is served, without those tools."""
    configured = (
        f"configured: {', '.join(sorted(servers))}"
        if servers
        else "PERSONA_AGENT_MCP_CONFIG configures none"
    )
    for persona in personas:
        named = {entry.partition(TOOL_SEPARATOR)[0] for entry in persona.tools.allow or ()}
        for server in sorted(named.difference(servers)):
            logger.warning(
                "Persona %s: tools.allow names the MCP server '%s', which is not configured "
                "(%s); the persona is served without its tools (docs/tools.md)",
                persona.id,
                server,
                configured,
            )


def warn_unknown_agents(
    personas: Iterable[Persona],
    agents: Collection[str],
    later: Callable[[str], bool] = lambda _name: False,
) -> None:
    """Start-up: warn of each persona whose ``agents`` names an outside agent that is not in
    the agents file (``agents``: the names there; ``later``: whether a catalog being read
    in the background may bring the name in, which its own log then tells). The persona is
    served, without that agent's tool."""
    configured = (
        f"configured: {', '.join(sorted(agents))}"
        if agents
        else "PERSONA_AGENT_AGENTS_FILE configures none"
    )
    for persona in personas:
        for name in sorted(set(persona.agents).difference(agents)):
            if later(name):
                continue
            logger.warning(
                "Persona %s: agents names the outside agent '%s', which is not configured "
                "(%s); the persona is served without it (docs/collaboration.md)",
                persona.id,
                name,
                configured,
            )
