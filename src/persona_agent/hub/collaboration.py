"""Collaboration: what a model may call besides its own words (outside agents, MCP tools),
built from the settings, and the start-up warnings of personas naming what is not there."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from persona_agent.chat.tools import MCPTools, ToolSource, ToolSources
from persona_agent.observe.metrics import HubMetrics
from persona_agent.personas.model import Persona
from persona_agent.settings import Settings

if TYPE_CHECKING:
    from persona_agent.collab.agent_tools import RemoteAgents
    from persona_agent.tools.toolbox import MCPToolbox

__all__ = [
    "Collaboration",
    "build_collaboration",
    "warn_unknown_agents",
    "warn_unknown_tool_servers",
]

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


@dataclass
class Collaboration:
    """What a model may call besides the hub's own personas (the A2A part adds those, first):
    outside agents, then MCP tools (last: the toolbox takes every name left)."""

    tools: ToolSources
    remote_agents: RemoteAgents | None
    toolbox: MCPToolbox | None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if self.toolbox is not None:
                await self.toolbox.start()
                stack.push_async_callback(self.toolbox.aclose)
            if self.remote_agents is not None:
                await self.remote_agents.start()
                stack.push_async_callback(self.remote_agents.aclose)
            yield

    def tool_servers(self) -> list[str]:
        """The configured MCP servers' names."""
        return list(self.toolbox.servers) if self.toolbox is not None else []

    def agent_names(self) -> list[str]:
        """The configured outside agents' names."""
        return self.remote_agents.names() if self.remote_agents is not None else []

    def catalog_agent(self, name: str) -> bool:
        """Whether a catalog not read yet may bring in the outside agent ``name``."""
        return self.remote_agents is not None and self.remote_agents.catalogs.may_bring(name)


def build_collaboration(settings: Settings, metrics: HubMetrics) -> Collaboration:
    """The MCP servers and outside agents the settings configure. Their modules are
    imported only when configured: the MCP SDK costs ~18 MB of memory."""
    toolbox: MCPToolbox | None = None
    if settings.mcp_config is not None:
        from persona_agent.tools.config import load_mcp_config
        from persona_agent.tools.toolbox import MCPToolbox

        mcp_config = load_mcp_config(settings.mcp_config, os.environ)
        toolbox = MCPToolbox(mcp_config, default_timeout=settings.tool_timeout, metrics=metrics)
    remote_agents: RemoteAgents | None = None
    if settings.agents_file is not None:
        from persona_agent.a2a.discovery.catalog_reader import CatalogLimits
        from persona_agent.collab.agent_tools import RemoteAgents
        from persona_agent.collab.agents_file import load_agents_config

        agents_config = load_agents_config(settings.agents_file, os.environ)
        limits = CatalogLimits(
            max_bytes=settings.catalog_max_bytes,
            max_depth=settings.catalog_max_depth,
            max_entries=settings.catalog_max_entries,
            seconds=settings.catalog_read_seconds,
        )
        remote_agents = RemoteAgents(
            agents_config,
            metrics=metrics,
            catalog_limits=limits,
            allowed_hosts=settings.agent_url_allowed_host_list,
        )
    sources: list[ToolSource] = []
    if remote_agents is not None:
        sources.append(remote_agents)
    if toolbox is not None:
        sources.append(MCPTools(toolbox))
    return Collaboration(ToolSources(sources), remote_agents, toolbox)
