"""Tools from MCP servers, the hub as an MCP client: servers from configuration, namespaced
tools, per-persona allow-lists."""

from persona_agent.tools.config import MCPConfig, ServerConfig, load_mcp_config, parse_mcp_config
from persona_agent.tools.tool_specs import ToolInfo, render_result
from persona_agent.tools.toolbox import MCPToolbox

__all__ = [
    "MCPConfig",
    "MCPToolbox",
    "ServerConfig",
    "ToolInfo",
    "load_mcp_config",
    "parse_mcp_config",
    "render_result",
]
