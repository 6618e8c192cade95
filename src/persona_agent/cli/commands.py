"""The ``persona-agent`` command line.

Here: the app, ``serve``, ``mcp`` (stdio: :mod:`.mcp_stdio`) and the commands that read
the persona directory (``agent-card``, ``list-personas``, ``validate``). The others are
registered from their modules: ``chat`` (:mod:`.chat`), ``personas``
(:mod:`.rest_personas`), the commands on persona files (:mod:`.persona_commands`) and
``db`` (:mod:`.db_commands`).
"""

from __future__ import annotations

import errno
import gc
import json
import os
import socket
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from persona_agent import __version__
from persona_agent.cli.command_settings import (
    PersonasDir,
    command_settings,
    load_all,
    read_dir,
    report,
)
from persona_agent.cli.db_commands import db_app
from persona_agent.cli.persona_commands import export_persona, import_persona, new_persona
from persona_agent.cli.rest_memory import memory_app
from persona_agent.cli.rest_personas import personas_app
from persona_agent.cli.secrets import configured_secrets
from persona_agent.cli.terminal.chat import chat
from persona_agent.cli.unused_imports import unused_masked
from persona_agent.errors import ConfigError, PersonaFileError
from persona_agent.hub.persona_store import persona_limits
from persona_agent.observe.logs import configure_logging
from persona_agent.personas.loader import load_persona_file
from persona_agent.personas.model import Persona

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from persona_agent.settings import Settings

# The server's modules (a2a-sdk, FastAPI, uvicorn: about a second on two cores) are
# imported by the commands that use them, not here.

__all__ = ["app"]

app = typer.Typer(
    name="persona-agent",
    help="A multi-persona A2A hub: every persona in a directory served as its own A2A agent.",
    no_args_is_help=True,
    add_completion=False,
)

app.add_typer(personas_app)
app.add_typer(memory_app)
app.command("chat")(chat)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"persona-agent {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    _version_flag: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """persona-agent: AI personas as A2A agents."""


@app.command()
def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to listen on [default: 127.0.0.1]")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on [default: 8000]")] = None,
    personas_dir: PersonasDir = None,
    log_level: Annotated[str | None, typer.Option(help="Log level [default: INFO]")] = None,
) -> None:
    """Serve every persona as an A2A agent (JSON-RPC and HTTP+JSON, protocol 1.0 and 0.3).

    Settings come from PERSONA_AGENT_* environment variables or a .env file
    (see .env.example); options here override them.

    With no LLM configured, personas answer through the embedded local model
    (offline, no key; docs/local-model.md). Set PERSONA_AGENT_LLM_BASE_URL (and
    PERSONA_AGENT_LLM_API_KEY) to use any OpenAI-compatible server instead.

    Also served: the personas as MCP tools at /mcp (docs/mcp.md), the AI
    Catalog at /.well-known/ai-catalog.json (docs/discovery.md), and A2A
    over gRPC when PERSONA_AGENT_GRPC_PORT is set (docs/a2a.md#grpc).

    Prometheus metrics are at /metrics; OpenTelemetry traces go wherever
    OTEL_EXPORTER_OTLP_ENDPOINT says (off without it; docs/observability.md).
    """
    settings = command_settings(
        host=host, port=port, personas_dir=personas_dir, log_level=log_level
    )
    busy = _listen_problem(settings.host, settings.port)
    if busy is not None:  # said now, not after the model and the database are loaded
        typer.secho(f"Cannot start: {busy}", err=True, fg="red")
        raise typer.Exit(1)
    _start_logging(settings)
    uses_grpc = settings.grpc_port is not None or settings.agents_file is not None
    try:
        # What the configuration does not use is not loaded: grpcio, httpx's command line.
        # Only the modules' imports: what create_app imports for a feature that is on (the
        # OTLP/gRPC exporter, the gRPC door) loads the real library.
        with unused_masked(grpc=uses_grpc):
            import uvicorn

            from persona_agent.api.app import create_app
            from persona_agent.security.ingress.request_heads import bounded_head_protocol
            from persona_agent.security.ingress.slow_clients import slow_client_protocol

        application = create_app(settings)
    except (ConfigError, PersonaFileError) as error:
        typer.secho(f"Cannot start: {error}", err=True, fg="red")
        raise typer.Exit(1) from error
    uvicorn.run(
        _frozen_after_startup(application),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        log_config=None,  # the hub's own (redacting) logging: persona_agent.observe.logs
        http=slow_client_protocol(
            head_timeout=settings.request_head_timeout,
            body_timeout=settings.request_body_timeout,
            base=bounded_head_protocol(
                max_bytes=settings.max_head_bytes, max_headers=settings.max_headers
            ),
        ),
        timeout_graceful_shutdown=max(1, int(settings.shutdown_grace_seconds)),
        ws="none",  # no route takes a WebSocket: "auto" would load a WebSocket library
    )


def _frozen_after_startup(app: ASGIApp) -> ASGIApp:
    """``app``, whose start-up's objects are moved out of the garbage collector's reach once
    its lifespan has started (``gc.freeze``): the modules, settings and personas of a hub,
    some 230,000 objects, which every full collection would otherwise walk again. Under load
    those collections come every few hundred requests, and took ~9 % of a request's CPU at
    c=16 (docs/performance.md, issue 52). What they hold is freed as before when nothing
    refers to it; only a cycle among them would now be kept. For ``serve``'s process alone:
    a process that builds many hubs (the tests) would keep each one's start-up."""

    async def lifespan_frozen(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                gc.collect()
                gc.freeze()
            await send(message)

        await app(scope, receive, sending)

    return lifespan_frozen


MCP_HELP = "\n\n".join(
    [
        "Serve every persona as an MCP tool on stdio, for desktop MCP clients.",
        "A desktop client (Claude Desktop, an IDE) starts this command and speaks MCP on its "
        "standard input and output. Each persona (and panel) is a tool, or, past "
        "PERSONA_AGENT_MCP_PERSONA_TOOLS_MAX personas, one ask_persona tool beside "
        "list_personas; each card is a persona://ID/card resource.",
        "The hub runs in this process, on the same settings, persona directory and database "
        "as `serve`, and opens no port; logs go to standard error. A running hub serves the "
        "same tools over HTTP at /mcp.",
        "docs/mcp.md has a worked Claude Desktop configuration.",
    ]
)


@app.command("mcp", help=MCP_HELP)
def mcp(
    personas_dir: PersonasDir = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="PERSONA_AGENT_MCP_API_KEY",
            help="Call the personas as this API key's caller (one of PERSONA_AGENT_API_KEYS); "
            "without it, as an anonymous caller on this machine.",
        ),
    ] = None,
    log_level: Annotated[
        str | None, typer.Option(help="Log level on standard error (default: WARNING)")
    ] = None,
) -> None:
    settings = command_settings(personas_dir=personas_dir, log_level=log_level or "WARNING")
    _start_logging(settings)
    import asyncio

    from persona_agent.cli.mcp_stdio import serve_stdio
    from persona_agent.security.principal import AuthError

    try:
        asyncio.run(serve_stdio(settings, api_key))
    except (ConfigError, PersonaFileError, AuthError) as error:
        typer.secho(f"Cannot start: {error}", err=True, fg="red")
        raise typer.Exit(1) from error
    except KeyboardInterrupt:
        pass


def _start_logging(settings: Settings) -> None:
    """The hub's redacting logs at the settings' level and format (exit 2 on a bad level),
    and no traces unless an exporter is named: what ``serve`` and ``mcp`` do first."""
    try:
        configure_logging(
            settings.log_level, configured_secrets(settings, os.environ), settings.log_format
        )
    except ValueError as error:
        typer.secho(f"Invalid settings: log level: {error}", err=True, fg="red")
        raise typer.Exit(2) from error
    _tracing_off_without_exporter(os.environ)


def _listen_problem(host: str, port: int) -> str | None:
    """Why ``serve`` could not listen on ``host:port`` (the port in use, an address not of
    this machine), or None. Bound and let go at once the way uvicorn's server will bind
    (every address of ``host``, ``SO_REUSEADDR``, IPv6 alone), so the answer is the same."""
    if port == 0:
        return None
    try:
        addresses = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror:
        return None  # uvicorn says what is wrong with the host
    for family, kind, protocol, _, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    return (
                        f"port {port} is already in use on {host} (another persona-agent "
                        f"serve?): stop what listens there, or serve on another port with "
                        f"--port, e.g. --port {port + 1 if port < 65535 else 8001}"
                    )
                return f"cannot listen on {host}:{port}: {error.strerror}"
    return None


TRACING_SWITCH = "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"


def _tracing_off_without_exporter(environ: MutableMapping[str, str]) -> None:
    """Turn a2a-sdk's OpenTelemetry instrumentation off when no trace exporter is
    configured and the switch is not set: the SDK makes spans whenever the OpenTelemetry
    API is installed (it always is, through the SDK), which cost about a third of the
    hub's throughput and went nowhere. Read by the SDK once, when it is imported: so here,
    before the server is imported."""
    from persona_agent.observe.tracing import requested_exporters

    if TRACING_SWITCH in environ or requested_exporters(environ):
        return
    environ[TRACING_SWITCH] = "false"


@app.command("agent-card")
def agent_card(
    persona_id: Annotated[
        str | None, typer.Argument(help="Persona id; all personas when omitted")
    ] = None,
    personas_dir: PersonasDir = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            help="Base URL for the card's URLs "
            "[default: PERSONA_AGENT_PUBLIC_BASE_URL or the serve address]"
        ),
    ] = None,
) -> None:
    """Print agent card(s) as JSON, without starting a server."""
    from a2a.server.request_handlers.response_helpers import agent_card_to_dict

    from persona_agent.a2a.cards import build_agent_card, provider
    from persona_agent.hub.media_part import build_speech, vision_of
    from persona_agent.hub.model_backend import build_llm_backend

    settings = command_settings(personas_dir=personas_dir, public_base_url=base_url)
    personas = load_all(settings)
    by = provider(settings.provider_organization, settings.provider_url or settings.base_url)
    vision = vision_of(settings, build_llm_backend(settings))  # nothing loaded: names only
    speech = build_speech(settings)

    def card_of(persona: Persona) -> dict[str, Any]:
        speaks = persona.panel is None and speech.voice(persona.voice) is not None
        card = build_agent_card(
            persona,
            settings.base_url,
            provided_by=by,
            images=vision.sees(persona),
            speaks=speaks,
        )
        return agent_card_to_dict(card)

    if persona_id is not None:
        if persona_id not in personas:
            typer.secho(f"No persona with id '{persona_id}'", err=True, fg="red")
            raise typer.Exit(1)
        typer.echo(json.dumps(card_of(personas[persona_id]), indent=2, ensure_ascii=False))
        return
    cards = [card_of(p) for p in personas.values()]
    typer.echo(json.dumps(cards, indent=2, ensure_ascii=False))


@app.command("list-personas")
def list_personas(
    personas_dir: PersonasDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """List the personas of the persona directory."""
    settings = command_settings(personas_dir=personas_dir)
    personas = load_all(settings)
    if as_json:
        rows = [
            {"id": p.id, "name": p.name, "description": p.description} for p in personas.values()
        ]
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    for persona in personas.values():
        typer.echo(f"{persona.id:<24} {persona.name:<24} {persona.description}")


@app.command()
def validate(
    files: Annotated[
        list[Path] | None,
        typer.Argument(help="Persona files to check; the whole persona directory when omitted"),
    ] = None,
    personas_dir: PersonasDir = None,
) -> None:
    """Check persona files; report every bad file and exit non-zero if any is bad."""
    settings = command_settings(personas_dir=personas_dir)
    errors: list[PersonaFileError] = []
    checked = 0
    if files:
        for path in files:
            checked += 1
            try:
                load_persona_file(path, persona_limits(settings))
            except PersonaFileError as error:
                errors.append(error)
    else:
        personas, errors = read_dir(settings)
        checked = len(personas) + len(errors)
    report(errors)
    typer.echo(f"{checked - len(errors)} valid, {len(errors)} invalid")
    if errors:
        raise typer.Exit(1)


# In the order of ``persona-agent --help``, after the commands above.
app.command("import-persona")(import_persona)
app.command("new")(new_persona)
app.command("export-persona")(export_persona)
app.add_typer(db_app)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
