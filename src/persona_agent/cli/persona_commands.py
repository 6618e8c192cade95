"""The commands on persona files: ``import-persona``, ``new`` and ``export-persona``.

Each writes into the persona directory (or out of it) the way a watching hub never sees
half a file: copied or written beside it under a hidden name, then moved into place.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from persona_agent.cli.command_settings import PersonasDir, command_settings, fail, load_all
from persona_agent.errors import ConfigError, PersonaFileError
from persona_agent.hub.persona_store import persona_limits
from persona_agent.personas.formats.tavern import CardSpec
from persona_agent.personas.loader import (
    AVATAR_SUFFIX,
    IMPORT_SUFFIXES,
    PERSONA_SUFFIXES,
    read_persona,
)
from persona_agent.personas.model import PERSONA_ID_RULE, is_valid_persona_id
from persona_agent.security.limits import image_too_large, too_large

if TYPE_CHECKING:
    from persona_agent.personas.formats.charx import CharxAsset
    from persona_agent.settings import Settings

__all__ = ["export_persona", "import_persona", "new_persona"]


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
    """Validate a persona file or character card, then copy it into the user persona
    directory (with the avatar image a persona file names)."""
    settings = command_settings(personas_dir=personas_dir)
    limits = persona_limits(settings)
    fmt = IMPORT_SUFFIXES.get(file.suffix.lower())
    if fmt is None:
        fail(f"{file}: unknown file type '{file.suffix}' (expected {', '.join(IMPORT_SUFFIXES)})")
    packed = fmt in ("png", "charx")  # a card with its picture
    limit = limits.max_image_bytes if packed else limits.max_bytes
    try:
        if file.stat().st_size > limit:  # refused unread
            over = image_too_large if packed else too_large
            fail(f"{file}: {over(file.stat().st_size, limits)}")
        raw = file.read_bytes()
        loaded = read_persona(persona_id, raw, source=str(file), fmt=fmt, limits=limits)
    except OSError as error:
        fail(f"{file}: cannot read the file: {error.strerror}")
    except PersonaFileError as error:
        fail(str(error))
    persona = loaded.persona
    avatar = file.parent / persona.avatar if not packed and persona.avatar else None
    if avatar is not None and not avatar.is_file():
        fail(f"{file}: avatar: no file '{persona.avatar}' beside the persona file")
    target_dir = settings.writable_personas_dir
    target_dir.mkdir(parents=True, exist_ok=True)
    # Stored as an upload is: the file's text as it is ({id}.yaml or {id}.json; a PNG
    # card's JSON), a PNG card's picture beside it as {id}.avatar.png.
    source = loaded.source
    assert source is not None  # read_persona gives every file's
    target = target_dir / f"{persona.id}{source.suffix}"
    if target.resolve() == file.resolve():
        typer.echo(f"{file} is already in the persona directory")
        return
    existing = [
        p for p in (target_dir / f"{persona.id}{ext}" for ext in PERSONA_SUFFIXES) if p.exists()
    ]
    if existing and not force:
        fail(f"Persona '{persona.id}' already exists ({existing[0]}); use --force to overwrite")
    if avatar is not None and (target_dir / avatar.name).resolve() != avatar.resolve():
        _copy_into(avatar, target_dir / avatar.name)
    if loaded.image is not None:
        _write_into(loaded.image.data, target_dir / f"{persona.id}{AVATAR_SUFFIX}")
    _write_into(source.data, target)
    for other in existing:
        if other != target:
            other.unlink()
    typer.echo(f"Imported '{persona.id}' ({persona.name}) into {target}")
    _keep_assets(settings, persona.id, loaded.assets)


def _keep_assets(settings: Settings, persona_id: str, assets: Sequence[CharxAsset]) -> None:
    """A CHARX's assets, kept in the hub's database as an upload's are (an import of
    another file clears those the persona had); said, not fatal, when that fails."""
    from sqlalchemy.exc import SQLAlchemyError

    from persona_agent.cli.charx_assets import keep_assets
    from persona_agent.db import DatabaseError

    try:
        keep_assets(settings, persona_id, assets)
    except (ConfigError, OSError, SQLAlchemyError, DatabaseError) as error:
        typer.secho(f"The CHARX's assets were not kept: {error}", err=True, fg="yellow")
        return
    if assets:
        typer.echo(f"Kept its {len(assets)} asset(s) in the hub's database")


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

    settings = command_settings(personas_dir=personas_dir)
    name = " ".join(name.split())
    if persona_id is not None and not is_valid_persona_id(persona_id):
        suggested = template_id(persona_id)
        example = f": --id {suggested}" if is_valid_persona_id(suggested) else ""
        fail(f"--id '{persona_id}' is not a persona id ({PERSONA_ID_RULE}){example}")
    persona_id = persona_id or template_id(name)
    if not name or not is_valid_persona_id(persona_id):
        fail(f"'{name}' makes no persona id ({PERSONA_ID_RULE}): give one with --id")
    directory = settings.writable_personas_dir
    existing = [p for p in (directory / f"{persona_id}{s}" for s in PERSONA_SUFFIXES) if p.exists()]
    if existing:
        fail(f"Persona '{persona_id}' already exists ({existing[0]}): not overwritten")
    target = directory / f"{persona_id}.yaml"
    text = persona_template(name, persona_id, str(target))
    try:
        limits = persona_limits(settings)
        read_persona(persona_id, text.encode(), source=str(target), fmt="yaml", limits=limits)
    except PersonaFileError as error:
        fail(str(error))
    directory.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.new")  # hidden: a watching hub skips it
    temporary.write_text(text, encoding="utf-8")
    try:
        os.link(temporary, target)  # whole, and never over a file that appeared meanwhile
    except FileExistsError:
        fail(f"{target} already exists: not overwritten")
    finally:
        temporary.unlink()
    typer.echo(
        f"Wrote {target}: replace its placeholders, then check it with "
        f"`persona-agent validate {target}` (a running hub serves it as it is saved)"
    )


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
    charx: Annotated[
        Path | None,
        typer.Option(
            "--charx",
            help="Write a CHARX here (a zip: the V3 card as card.json, the avatar and the "
            "assets of the CHARX it was imported from under assets/)",
        ),
    ] = None,
) -> None:
    """Export a persona as a Tavern character card (V2 or V3; JSON, PNG or CHARX)."""
    import asyncio

    from persona_agent.cli.charx_assets import kept_assets
    from persona_agent.personas.formats.charx import card_charx
    from persona_agent.personas.formats.tavern import card_png, persona_to_card
    from persona_agent.personas.stores.file_store import FilePersonaStore

    if charx is not None and spec != "v3":
        fail("a CHARX holds a V3 card: --charx goes with --format v3 (the default)", 2)
    settings = command_settings(personas_dir=personas_dir)
    personas = load_all(settings)
    if persona_id not in personas:
        fail(f"No persona with id '{persona_id}'")
    persona = personas[persona_id]
    if png is not None or charx is not None:
        store = FilePersonaStore(
            settings.writable_personas_dir,
            examples=settings.example_personas_dir,
            limits=persona_limits(settings),
        )
        store.load()
        image = asyncio.run(store.avatar(persona_id))
        if png is not None:
            png.write_bytes(card_png(persona, spec, image))
            typer.echo(f"Wrote {png} ({spec} card of '{persona_id}')")
        if charx is not None:
            assets = kept_assets(settings, persona_id)
            charx.write_bytes(card_charx(persona, image, assets))
            kept = f" and {len(assets)} asset(s)" if assets else ""
            typer.echo(f"Wrote {charx} (CHARX of '{persona_id}', its V3 card, avatar{kept})")
    if json_file is not None or (png is None and charx is None):
        text = json.dumps(persona_to_card(persona, spec), indent=2, ensure_ascii=False)
        if json_file is None:
            typer.echo(text)
        else:
            json_file.write_text(text + "\n", encoding="utf-8")
            typer.echo(f"Wrote {json_file} ({spec} card of '{persona_id}')")


def _write_into(data: bytes, target: Path) -> None:
    """Write a file into the persona directory so that no watcher sees half of it."""
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.write_bytes(data)
    temporary.replace(target)


def _copy_into(source: Path, target: Path) -> None:
    """Copy a file into the persona directory so that no watcher sees half of it."""
    temporary = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(source, temporary)
    temporary.replace(target)
