"""The MCP door: the personas as MCP tools at ``/mcp`` and on stdio, each call a turn on the
one task path (docs/mcp.md). Nothing here is imported until ``/mcp`` is first used
(:mod:`.mcp_door`): the ``mcp`` SDK's server side is not small."""
