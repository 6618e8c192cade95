"""``persona-agent mcp``: the hub in this process, its personas served as MCP tools on stdio
(standard input and output), for desktop MCP clients that start their servers as commands.

The hub runs here, built as ``serve`` builds it (:func:`~persona_agent.hub.composition.build_hub`),
on the same settings, persona directory and database, without its HTTP app (no port is
opened); a tool call is the same A2A task a call to ``/mcp`` makes. Logs go to
standard error: standard output carries the protocol alone.
"""

from __future__ import annotations

import logging

from mcp.server.stdio import stdio_server

from persona_agent.api.app import build_mcp_door
from persona_agent.hub.composition import build_hub
from persona_agent.settings import Settings

__all__ = ["serve_stdio"]

logger = logging.getLogger(__name__)


async def serve_stdio(settings: Settings, api_key: str | None) -> None:
    """Serve the hub's personas over stdio until the client closes standard input.

    Raises:
        AuthError: ``api_key`` is not one of the hub's.
    """
    hub = build_hub(settings)
    door = build_mcp_door(settings, hub)
    async with hub.running(door):
        personas = await door.server()
        caller = await personas.act_as(api_key)
        logger.info("MCP on stdio: %d persona(s), calling as %s", len(hub.registry), caller)
        server = personas.server
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
