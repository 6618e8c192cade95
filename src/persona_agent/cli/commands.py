"""The ``persona-agent`` command line."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from persona_agent import __version__
from persona_agent.cli.chat import chat
from persona_agent.cli.rest_personas import personas_app
from persona_agent.cli.secrets import configured_secrets
from persona_agent.errors import ConfigError, PersonaFileError
from persona_agent.observe.logs import configure_logging
from persona_agent.parts import persona_limits
from persona_agent.personas.formats.tavern import CardSpec
from persona_agent.personas.loader import PERSONA_SUFFIXES, load_persona_file, read_persona
from persona_agent.personas.model import PERSONA_ID_PATTERN, Persona, is_valid_persona_id
from persona_agent.personas.scan import load_persona_dir
from persona_agent.security.limits import image_too_large, too_large
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
app.command("chat")(chat)

PersonasDir = Annotated[
    Path | None,
    typer.Option(
        "--personas-dir",
        "-d",
        help="Directory of persona YAML files [default: PERSONA_AGENT_PERSONAS_DIR or ./personas]",
        show_default=False,
    ),
]


def _settings(**overrides: Any) -> Settings:
    """The settings, with the commands' options (``overrides``) over the environment;
    a bad one exits 2, naming each problem's option or environment variable."""
    values = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**values)
    except ValidationError as error:
        # Without a traceback, and without the values given: one may be a secret.
        problems = [
            f"  {_setting_name(e['loc'], values)}: {e['msg'].removeprefix('Value error, ')}"
            for e in error.errors(include_url=False, include_input=False)
        ]
        typer.secho("Invalid settings:\n" + "\n".join(problems), err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from error


_OPTION_NAMES = {"public_base_url": "--base-url"}
"""The options not named after the setting they set."""


def _setting_name(loc: tuple[int | str, ...], options: Mapping[str, Any]) -> str:
    """What a user set a setting with: the command's option, or the environment variable
    (also a ``.env`` line's name), never pydantic's field name."""
    field = str(loc[0]) if loc else ""
    if field in options:
        return _OPTION_NAMES.get(field, "--" + field.replace("_", "-"))
    if field.isupper():  # a setting read under another name (OPENAI_API_KEY): that name
        return field
    return "PERSONA_AGENT_" + "_".join(map(str, loc)).upper()


def _read_dir(settings: Settings) -> tuple[dict[str, Persona], list[PersonaFileError]]:
    directory = settings.personas_dir
    if not directory.is_dir():
        typer.secho(f"Persona directory {directory} does not exist", err=True, fg="red")
        raise typer.Exit(2)
    return load_persona_dir(directory, persona_limits(settings))


def _report(errors: list[PersonaFileError]) -> None:
    for error in errors:
        typer.secho(f"error: {error}", err=True, fg="red")


def _load_all(settings: Settings) -> dict[str, Persona]:
    """Every persona of the directory; exits with the errors if any file is bad."""
    personas, errors = _read_dir(settings)
    _report(errors)
    if errors:
        raise typer.Exit(1)
    return personas


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

    Prometheus metrics are at /metrics; OpenTelemetry traces go wherever
    OTEL_EXPORTER_OTLP_ENDPOINT says (off without it; docs/observability.md).
    """
    settings = _settings(host=host, port=port, personas_dir=personas_dir, log_level=log_level)
    busy = _listen_problem(settings.host, settings.port)
    if busy is not None:  # said now, not after the model and the database are loaded
        typer.secho(f"Cannot start: {busy}", err=True, fg="red")
        raise typer.Exit(1)
    try:
        configure_logging(
            settings.log_level, configured_secrets(settings, os.environ), settings.log_format
        )
    except ValueError as error:
        typer.secho(f"Invalid settings: log level: {error}", err=True, fg="red")
        raise typer.Exit(2) from error
    _tracing_off_without_exporter(os.environ)
    try:
        import uvicorn

        from persona_agent.api.app import create_app
        from persona_agent.security.request_heads import bounded_head_protocol
        from persona_agent.security.slow_clients import slow_client_protocol

        application = create_app(settings)
    except (ConfigError, PersonaFileError) as error:
        typer.secho(f"Cannot start: {error}", err=True, fg="red")
        raise typer.Exit(1) from error
    uvicorn.run(
        application,
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
    )


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

    settings = _settings(personas_dir=personas_dir, public_base_url=base_url)
    personas = _load_all(settings)
    by = provider(settings.provider_organization, settings.provider_url or settings.base_url)

    def card_of(persona: Persona) -> dict[str, Any]:
        return agent_card_to_dict(build_agent_card(persona, settings.base_url, provided_by=by))

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
    settings = _settings(personas_dir=personas_dir)
    personas = _load_all(settings)
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
    settings = _settings(personas_dir=personas_dir)
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
        personas, errors = _read_dir(settings)
        checked = len(personas) + len(errors)
    _report(errors)
    typer.echo(f"{checked - len(errors)} valid, {len(errors)} invalid")
    if errors:
        raise typer.Exit(1)


@app.command("import-persona")
def import_persona(
    file: Annotated[
        Path,
        typer.Argument(
            help="Persona file (.yaml, .yml, .json) or character card (V2/V3, .json or .png)"
        ),
    ],
    personas_dir: PersonasDir = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing persona")] = False,
    persona_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            help="The persona's id [default: a persona file's name without its extension; "
            "a card's name as a slug]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Validate a persona file or character card, then copy it into the persona directory
    (with the avatar image a persona file names)."""
    settings = _settings(personas_dir=personas_dir)
    limits = persona_limits(settings)
    fmt = PERSONA_SUFFIXES.get(file.suffix.lower())
    if fmt is None:
        _fail(f"{file}: unknown file type '{file.suffix}' (expected {', '.join(PERSONA_SUFFIXES)})")
    limit = limits.max_image_bytes if fmt == "png" else limits.max_bytes
    try:
        if file.stat().st_size > limit:  # refused unread
            over = image_too_large if fmt == "png" else too_large
            _fail(f"{file}: {over(file.stat().st_size, limits)}")
        raw = file.read_bytes()
        loaded = read_persona(persona_id, raw, source=str(file), fmt=fmt, limits=limits)
    except OSError as error:
        _fail(f"{file}: cannot read the file: {error.strerror}")
    except PersonaFileError as error:
        _fail(str(error))
    persona = loaded.persona
    avatar = file.parent / persona.avatar if fmt != "png" and persona.avatar else None
    if avatar is not None and not avatar.is_file():
        _fail(f"{file}: avatar: no file '{persona.avatar}' beside the persona file")
    target_dir = settings.personas_dir
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"{persona.id}{file.suffix.lower()}"
    if target.resolve() == file.resolve():
        typer.echo(f"{file} is already in the persona directory")
        return
    existing = [
        p for p in (target_dir / f"{persona.id}{ext}" for ext in PERSONA_SUFFIXES) if p.exists()
    ]
    if existing and not force:
        _fail(f"Persona '{persona.id}' already exists ({existing[0]}); use --force to overwrite")
    if avatar is not None and (target_dir / avatar.name).resolve() != avatar.resolve():
        _copy_into(avatar, target_dir / avatar.name)
    _copy_into(file, target)
    for other in existing:
        if other != target:
            other.unlink()
    typer.echo(f"Imported '{persona.id}' ({persona.name}) into {target}")


@app.command("new")
def new_persona(
    name: Annotated[str, typer.Argument(help="The persona's name, e.g. 'Grace Hopper'")],
    personas_dir: PersonasDir = None,
    persona_id: Annotated[
        str | None,
        typer.Option("--id", help="The persona's id (default: the name as a slug)"),
    ] = None,
) -> None:
    """Write a new persona file into the persona directory: every section with a short
    placeholder to replace, valid as it is (checked by the hub's own loader before it is
    written). An existing persona is never overwritten."""
    from persona_agent.personas.template import persona_template, template_id

    settings = _settings(personas_dir=personas_dir)
    name = " ".join(name.split())
    persona_id = persona_id or template_id(name)
    if not name or not is_valid_persona_id(persona_id):
        _fail(f"'{name}' makes no persona id ({PERSONA_ID_PATTERN}): give one with --id")
    directory = settings.personas_dir
    existing = [p for p in (directory / f"{persona_id}{s}" for s in PERSONA_SUFFIXES) if p.exists()]
    if existing:
        _fail(f"Persona '{persona_id}' already exists ({existing[0]}): not overwritten")
    target = directory / f"{persona_id}.yaml"
    text = persona_template(name, persona_id, str(target))
    try:
        limits = persona_limits(settings)
        read_persona(persona_id, text.encode(), source=str(target), fmt="yaml", limits=limits)
    except PersonaFileError as error:
        _fail(str(error))
    directory.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.new")  # hidden: a watching hub skips it
    temporary.write_text(text, encoding="utf-8")
    try:
        os.link(temporary, target)  # whole, and never over a file that appeared meanwhile
    except FileExistsError:
        _fail(f"{target} already exists: not overwritten")
    finally:
        temporary.unlink()
    typer.echo(
        f"Wrote {target}: replace its placeholders, then check it with "
        f"`persona-agent validate {target}` (a running hub serves it as it is saved)"
    )


@app.command("export-persona")
def export_persona(
    persona_id: Annotated[str, typer.Argument(help="Persona id")],
    personas_dir: PersonasDir = None,
    spec: Annotated[CardSpec, typer.Option("--format", help="Character card V2 or V3")] = "v3",
    png: Annotated[
        Path | None,
        typer.Option("--png", help="Write a PNG card (the avatar with the card inside) here"),
    ] = None,
    json_file: Annotated[
        Path | None,
        typer.Option("--json", help="Write the card as JSON here [default: print it]"),
    ] = None,
) -> None:
    """Export a persona as a Tavern character card (V2 or V3; JSON or PNG)."""
    import asyncio

    from persona_agent.personas.formats.tavern import card_png, persona_to_card
    from persona_agent.personas.store import FilePersonaStore

    settings = _settings(personas_dir=personas_dir)
    personas = _load_all(settings)
    if persona_id not in personas:
        _fail(f"No persona with id '{persona_id}'")
    persona = personas[persona_id]
    if png is not None:
        store = FilePersonaStore(settings.personas_dir, limits=persona_limits(settings))
        store.load()
        image = asyncio.run(store.avatar(persona_id))
        png.write_bytes(card_png(persona, spec, image))
        typer.echo(f"Wrote {png} ({spec} card of '{persona_id}')")
    if json_file is not None or png is None:
        text = json.dumps(persona_to_card(persona, spec), indent=2, ensure_ascii=False)
        if json_file is None:
            typer.echo(text)
        else:
            json_file.write_text(text + "\n", encoding="utf-8")
            typer.echo(f"Wrote {json_file} ({spec} card of '{persona_id}')")


def _fail(message: str) -> NoReturn:
    typer.secho(f"error: {message}", err=True, fg="red")
    raise typer.Exit(1)


def _copy_into(source: Path, target: Path) -> None:
    """Copy a file into the persona directory so that no watcher sees half of it."""
    temporary = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(source, temporary)
    temporary.replace(target)


db_app = typer.Typer(
    name="db",
    help="The database's schema: migrate it to the newest revision, or show its revision.",
    no_args_is_help=True,
)
app.add_typer(db_app)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Migrate the database (PERSONA_AGENT_DATABASE_URL, default the SQLite file in the data
    directory) to the newest schema; print its revision before and after.

    On PostgreSQL, hubs starting on the same database meanwhile wait for it to finish.
    """
    settings = _settings()
    before, after, _ = _db_revisions(settings, upgrade=True)
    typer.echo(f"database: {_shown_database(settings)}")
    typer.echo(f"revision before: {before or 'none'}")
    typer.echo(f"revision after: {after or 'none'}")


@db_app.command("current")
def db_current() -> None:
    """Print the database's schema revision and the newest one (head); exit 1 unless the
    database is at the head revision."""
    settings = _settings()
    current, _, head = _db_revisions(settings, upgrade=False)
    typer.echo(f"database: {_shown_database(settings)}")
    typer.echo(f"current: {current or 'none'}")
    typer.echo(f"head: {head}")
    if current != head:
        typer.secho(
            "The database is not at the head revision: run `persona-agent db upgrade`",
            err=True,
            fg="yellow",
        )
        raise typer.Exit(1)


def _db_revisions(settings: Settings, *, upgrade: bool) -> tuple[str | None, str | None, str]:
    """The database's revision before and after migrating it (when ``upgrade``), and the
    newest revision."""
    import asyncio

    from sqlalchemy.exc import SQLAlchemyError

    from persona_agent.db import create_engine
    from persona_agent.migrations import db_revision, upgrade_db

    async def revisions() -> tuple[str | None, str | None, str]:
        engine = create_engine(settings.resolved_database_url)
        try:
            before, head = await db_revision(engine)
            if not upgrade:
                return before, before, head
            await upgrade_db(engine)
            after, head = await db_revision(engine)
            return before, after, head
        finally:
            await engine.dispose()

    try:
        return asyncio.run(revisions())
    except ConfigError as error:
        _fail(str(error))
    except (OSError, SQLAlchemyError) as error:
        _fail(f"the database did not answer: {error}")


def _shown_database(settings: Settings) -> str:
    """The database URL without its password."""
    from sqlalchemy.engine import make_url

    return make_url(settings.resolved_database_url).render_as_string(hide_password=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
