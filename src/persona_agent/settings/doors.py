"""Settings of the hub's other doors: the MCP server at ``/mcp``, the OpenAI-compatible
chat completions at ``/v1`` and the gRPC binding.

A section of :class:`persona_agent.settings.Settings`, which is composed of them and read
once at the edge; each field is ``PERSONA_AGENT_<NAME>`` there.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings

__all__ = ["DoorSettings"]


class DoorSettings(BaseSettings):
    """The MCP server, the OpenAI-compatible door and the gRPC binding."""

    # MCP server
    mcp_server: bool = True
    """Serve the personas as MCP tools at ``/mcp`` (streamable HTTP; docs/mcp.md);
    ``persona-agent mcp`` serves them on stdio whatever this says."""
    mcp_tools: Literal["auto", "persona", "ask"] = "auto"
    """The MCP tools: ``persona``, a tool per persona (and panel) described by its card;
    ``ask``, one ``ask_persona`` tool with the persona as an argument and ``list_personas``;
    ``auto``, a tool per persona while a caller may call at most
    ``mcp_persona_tools_max`` personas, else ``ask`` (docs/mcp.md has the measurement)."""
    mcp_persona_tools_max: int = Field(default=10, ge=0, le=10_000)
    """``mcp_tools=auto``: the most personas listed as tools of their own."""
    mcp_sessions_per_caller: int = Field(default=16, ge=1, le=10_000)
    """``/mcp`` sessions (handshake-era clients) one caller keeps open at most: one more
    closes the caller's least recently used session with no call in flight (429 when each
    has one). A desktop client keeps one; 16 leaves room for several clients a key."""
    mcp_sessions_max: int = Field(default=1000, ge=1, le=10_000)
    """``/mcp`` sessions open at most in all (503 above): a session costs ~60 KiB, so
    1000 is ~60 MiB (the SDK's own limit, 10,000, was 620 MB and a slow hub)."""
    mcp_session_idle_timeout: float = Field(default=1800.0, gt=0, le=7 * 86_400)
    """Seconds an ``/mcp`` session lives with no tool or list call (pings and an open
    stream are no use of it): then closed, and its client opens a new one."""
    mcp_session_max_age: float = Field(default=86_400.0, gt=0, le=30 * 86_400)
    """Seconds an ``/mcp`` session lives at most, however used (closed once no call of it
    is in flight)."""
    mcp_http_sessions: Literal["auto", "stateful", "stateless"] = "auto"
    """``/mcp`` for handshake-era clients: ``stateful``, a session the replica that opened
    it holds (list changes told on its GET stream); ``stateless``, no session a replica
    holds, so any replica answers any request (docs/mcp.md#replicas); ``auto``, stateless
    on PostgreSQL (replicas), else stateful."""
    # OpenAI-compatible door
    openai_server: bool = True
    """Serve each persona and panel as a model at ``/v1/models`` and
    ``/v1/chat/completions`` (docs/openai.md)."""
    openai_max_messages: int = Field(default=1000, ge=1, le=100_000)
    """Messages one chat completion request may send at most (400 above); its bytes are
    bounded by ``max_message_bytes``."""
    # gRPC
    grpc_port: int | None = Field(default=None, ge=0, le=65535)
    """The port of the hub's A2A gRPC server (docs/a2a.md#grpc); unset: no gRPC server.
    0: a free port (the cards say which)."""
    grpc_host: str | None = None
    """The address the gRPC server listens on (default: ``host``)."""
    grpc_public_address: str | None = None
    """``host:port`` of the gRPC server as clients reach it, on every card (default: the
    public base URL's host and the gRPC port)."""
    grpc_max_connections: int = Field(default=1000, ge=1)
    """Connections the gRPC server holds at once; one more is closed as it is accepted. Held
    to half the process's descriptor limit (the rest stays for the HTTP port)."""
    grpc_handshake_timeout: float = Field(default=10.0, gt=0)
    """Seconds a new gRPC connection may take to send the HTTP/2 preface and settings."""
    grpc_idle_timeout: float = Field(default=60.0, gt=0)
    """Seconds a gRPC connection may stay with no call open before it is closed (pings do
    not count)."""
    grpc_max_connection_age: float = Field(default=3600.0, ge=0)
    """Seconds after which a gRPC connection is asked to close (GOAWAY; clients reconnect);
    0: never."""
    grpc_max_connection_age_grace: float = Field(default=300.0, ge=0)
    """Seconds the calls of a connection past its age may take before it is cut."""
    grpc_keepalive_interval: float = Field(default=60.0, gt=0)
    """Seconds between the server's pings on a gRPC connection whose calls are silent (a
    peer that does not answer in 20 s is dropped)."""
    grpc_max_streams: int = Field(default=100, ge=1)
    """Calls one gRPC connection may have open at once."""

    @field_validator("grpc_public_address")
    @classmethod
    def _grpc_address(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        host, _, port = value.rpartition(":")
        if "://" in value or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"grpc_public_address must be host:port with no scheme (say "
                f"a2a.example.com:50051), not {value!r}"
            )
        return value
