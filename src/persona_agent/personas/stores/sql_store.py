"""Personas in PostgreSQL, shared by the replicas of one hub.

The table ``pa_personas`` is the truth: one row per persona, its YAML document, its
version (the ETag) and its avatar. Each replica holds every persona in memory, so
reads never touch the database, and follows the table: a write notifies
:data:`CHANNEL` with the persona id in its transaction, every replica re-reads that
row when the notification arrives, after its listening connection reconnects, and on
a timer of its own (a missed notification delays a change, never loses it).
Compare-and-swap on the version column makes two replicas writing with one ETag
agree: exactly one wins.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.db import NOTIFY
from persona_agent.errors import PersonaExistsError, PersonaFileError
from persona_agent.personas.formats.png import CleanImage
from persona_agent.personas.loader import PersonaSource, dump_persona_yaml, parse_persona_text
from persona_agent.personas.model import Persona, is_valid_persona_id
from persona_agent.personas.stores.sql_import import import_statement, read_directory
from persona_agent.personas.stores.sql_writes import (
    Expect,
    entity_tags,
    personas_table,
    refuse,
    write_statement,
)
from persona_agent.personas.stores.store import AVATAR_SUFFIX, HeldPersonaStore, PersonaChange
from persona_agent.security.limits import DEFAULT_LIMITS, Limits


class Listener(Protocol):
    """Where notifications of other replicas' writes are heard
    (:class:`persona_agent.cluster.notify.Listener`)."""

    async def listen(self, channel: str, callback: Callable[[str], None]) -> None: ...

    def on_reconnect(self, callback: Callable[[], Awaitable[None]]) -> None: ...


__all__ = ["CHANNEL", "SqlPersonaStore"]

logger = logging.getLogger(__name__)

CHANNEL = "pa_personas"
"""Notified with a persona's id by each transaction that writes its row."""

_IMAGE_CACHE_SIZE = 64
_IMPORT_BATCH = 100
"""Rows per ``INSERT`` of an import (a statement's parameters are limited)."""


_t = personas_table.c


@dataclass(frozen=True, slots=True)
class _Stamp:
    """Which state of a row memory holds: its version, and when it was written (an
    avatar can change while the version stays)."""

    version: str
    updated_at: datetime


class SqlPersonaStore(HeldPersonaStore):
    """Personas in the table ``pa_personas`` of a PostgreSQL database, held in memory.

    :meth:`start` loads every row and follows the changes other replicas make;
    :meth:`aclose` stops following. Writes are one transaction each, then memory and
    subscribers; a change seen in the table is applied to memory and subscribers hear
    of it (a persona whose version is unchanged, as after this replica's own write,
    is not announced twice). Changes to one id are serialized within the replica, and
    a write whose caller is cancelled still completes.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        limits: Limits = DEFAULT_LIMITS,
        check_interval: float = 5.0,
    ) -> None:
        """``limits``: how large a persona document or avatar may be; ``check_interval``:
        seconds between two comparisons of the table with memory.

        Raises:
            ValueError: ``engine`` is not a PostgreSQL engine.
        """
        if engine.dialect.name != "postgresql":
            raise ValueError(
                f"SqlPersonaStore needs PostgreSQL, not {engine.dialect.name} "
                "(a single hub keeps its personas in files: FilePersonaStore)"
            )
        super().__init__()
        self.limits = limits
        self._engine = engine
        self._check_interval = check_interval
        self._stamps: dict[str, _Stamp] = {}
        """The row state memory reflects, by id (also for a row that did not validate)."""
        self._images: OrderedDict[tuple[str, datetime], CleanImage] = OrderedDict()
        self._syncs: set[asyncio.Task[None]] = set()
        self._checker: asyncio.Task[None] | None = None
        self._closed = False

    def load(self) -> builtins.list[PersonaFileError]:
        """Nothing: the personas are in the database, and :meth:`start` reads them."""
        return []

    async def start(self, listener: Listener | None) -> None:
        """Read every persona into memory (subscribers are not notified), then follow
        the table: through ``listener``'s notifications on :data:`CHANNEL` and its
        reconnections if one is given, and every ``check_interval`` seconds.

        A row that does not validate is logged and left out. Call once; the listener
        may be started before or after.
        """
        async with self._engine.connect() as conn:
            result = await conn.execute(select(_t.id, _t.version, _t.updated_at, _t.document))
            rows = [(row.id, _Stamp(row.version, row.updated_at), row.document) for row in result]
        personas, stamps = await asyncio.to_thread(self._parse_rows, rows)
        self._personas, self._stamps = personas, stamps
        if listener is not None:
            await listener.listen(CHANNEL, self._heard)
            listener.on_reconnect(self._resync)
        await self._resync()  # what changed before the listening began
        self._checker = asyncio.create_task(self._check(), name="persona-agent-persona-check")
        logger.info("Loaded %d persona(s) from the database", len(personas))

    async def aclose(self) -> None:
        """Stop following the table; wait for the writes under way."""
        self._closed = True
        tasks = [task for task in (self._checker, *self._syncs) if task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._changes:
            await asyncio.gather(*self._changes, return_exceptions=True)

    async def put(
        self,
        persona: Persona,
        *,
        image: CleanImage | None = None,
        source: PersonaSource | None = None,
    ) -> Persona:
        """Create or replace the persona's row, then notify subscribers. The row keeps
        the persona as the YAML the hub writes, whatever ``source`` it was read from.

        Raises:
            ValueError: the persona's id is not a valid persona id.
            PersonaFileError: its ``avatar`` names no image the store has.
        """
        return await self._complete(self._write(persona, image, None))

    async def create(
        self,
        persona: Persona,
        *,
        image: CleanImage | None = None,
        source: PersonaSource | None = None,
    ) -> Persona:
        return await self._complete(self._write(persona, image, Expect.ABSENT))

    async def replace(
        self,
        persona: Persona,
        *,
        if_match: str | None = None,
        image: CleanImage | None = None,
        source: PersonaSource | None = None,
    ) -> Persona:
        return await self._complete(self._write(persona, image, if_match or "*"))

    async def delete(self, persona_id: str, *, if_match: str | None = None) -> None:
        await self._complete(self._delete(persona_id, if_match or "*"))

    async def avatar(self, persona_id: str) -> CleanImage | None:
        """The avatar stored with the persona (read once per state of its row)."""
        persona = await self.get(persona_id)
        stamp = self._stamps.get(persona_id)
        if persona.avatar is None or stamp is None:
            return None
        cached = self._images.get((persona_id, stamp.updated_at))
        if cached is not None:
            self._images.move_to_end((persona_id, stamp.updated_at))
            return cached
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(select(_t.image, _t.updated_at).where(_t.id == persona_id))
            ).first()
        if row is None or row.image is None:
            return None
        data = bytes(row.image)  # cleaned before it was stored
        image = CleanImage(data, "image/png", hashlib.sha256(data).hexdigest()[:32])
        self._images[(persona_id, row.updated_at)] = image
        if len(self._images) > _IMAGE_CACHE_SIZE:
            self._images.popitem(last=False)
        return image

    async def import_directory(self, directory: Path) -> builtins.list[PersonaFileError]:
        """Import every persona file of ``directory`` (as ``load_persona_dir`` reads it)
        that was not imported before; the errors of bad files, which are not imported.

        Each row remembers the ``source_hash`` of what it was imported from: the
        SHA-256 of the file persona's version (its content, not its bytes: a comment
        changes nothing) and of its avatar file's bytes. A row is written only when
        that differs, so an unchanged file leaves a persona edited since through the
        API alone, a changed file replaces the row, and replicas importing one
        directory at once write each row once. Rows of files since removed stay. A
        persona's avatar file (a PNG card's own picture) is stored cleaned, and the
        persona's ``avatar`` becomes ``{id}.avatar.png``.

        Call it before :meth:`start` (as the hub does), which then loads the result, or
        after: then memory takes in every row the import (this replica's or another's)
        settled, and subscribers hear of each change.

        Raises:
            OSError: the directory cannot be listed.
        """
        imported, errors = await asyncio.to_thread(read_directory, directory, self.limits)
        imported.sort(key=lambda item: item.persona.id)  # one lock order for every replica
        written: builtins.list[str] = []
        if imported:
            async with self._engine.begin() as conn:
                for start in range(0, len(imported), _IMPORT_BATCH):
                    batch = imported[start : start + _IMPORT_BATCH]
                    result = await conn.execute(import_statement(batch))
                    written += [str(persona_id) for persona_id in result.scalars()]
                if written:
                    await conn.execute(
                        NOTIFY, [{"channel": CHANNEL, "payload": key} for key in written]
                    )
        logger.info(
            "Imported %d of %d persona file(s) from %s (the others are unchanged)",
            len(written),
            len(imported),
            directory,
        )
        if self._checker is not None:  # started
            await self._resync()
        return errors

    # Writes

    async def _write(
        self, persona: Persona, image: CleanImage | None, expect: str | Expect | None
    ) -> Persona:
        """``expect``: None (create or replace), ABSENT, or an If-Match value."""
        if not is_valid_persona_id(persona.id):  # a model_construct()ed persona
            raise ValueError(f"'{persona.id}' is not a valid persona id")
        persona, data = self._own_avatar(persona, image)
        document = dump_persona_yaml(persona)
        statement = write_statement(persona.id, persona.version, document, data, expect)
        async with self._lock(persona.id):
            async with self._engine.begin() as conn:
                row = (await conn.execute(statement)).first()
                if row is None:
                    if expect is Expect.ABSENT:
                        raise PersonaExistsError(f"A persona with id '{persona.id}' already exists")
                    await refuse(conn, persona.id, expect or "*")
                if persona.avatar is not None and not row.has_image:
                    problem = f"avatar: the store has no image '{persona.avatar}'"
                    raise PersonaFileError(persona.id, [problem])  # rolls the write back
                await conn.execute(NOTIFY, {"channel": CHANNEL, "payload": persona.id})
            # Under the lock still: a notification read meanwhile waits, then sees this.
            self._personas[persona.id] = persona
            self._stamps[persona.id] = _Stamp(persona.version, row.updated_at)
            self._notify(PersonaChange("upsert", persona.id, persona))
        return persona

    def _own_avatar(
        self, persona: Persona, image: CleanImage | None
    ) -> tuple[Persona, bytes | None]:
        """The persona to store and the image to store with it (``None``: keep the
        row's). A given image becomes ``{id}.avatar.png``; else ``avatar`` may only name
        that image (the transaction checks that the row has one)."""
        own = f"{persona.id}{AVATAR_SUFFIX}"
        if image is not None:
            return persona.model_copy(update={"avatar": own}), image.data
        if persona.avatar is not None and persona.avatar != own:
            problem = f"avatar: the store has no image '{persona.avatar}' (only '{own}')"
            raise PersonaFileError(persona.id, [problem])
        return persona, None

    async def _delete(self, persona_id: str, if_match: str) -> None:
        async with self._lock(persona_id):
            async with self._engine.begin() as conn:
                statement = delete(personas_table).where(_t.id == persona_id)
                tags = entity_tags(if_match)
                if tags is not None:
                    statement = statement.where(_t.version.in_(tags))
                if (await conn.execute(statement.returning(_t.id))).first() is None:
                    await refuse(conn, persona_id, if_match)
                await conn.execute(NOTIFY, {"channel": CHANNEL, "payload": persona_id})
            self._forget(persona_id)

    # Following the table

    def _heard(self, persona_id: str) -> None:
        if self._closed or not is_valid_persona_id(persona_id):
            return
        task = asyncio.create_task(self._sync_quietly(persona_id))
        self._syncs.add(task)
        task.add_done_callback(self._syncs.discard)

    async def _sync_quietly(self, persona_id: str) -> None:
        try:
            await self._sync(persona_id)
        except Exception as error:  # the next check catches up
            logger.warning("Cannot read persona '%s' from the database: %s", persona_id, error)

    async def _sync(self, persona_id: str) -> None:
        """Bring one persona up to date with its row."""
        async with self._lock(persona_id):
            async with self._engine.connect() as conn:
                row = (
                    await conn.execute(
                        select(_t.version, _t.updated_at, _t.document).where(_t.id == persona_id)
                    )
                ).first()
            if row is None:
                self._forget(persona_id)
                return
            stamp = _Stamp(row.version, row.updated_at)
            before = self._stamps.get(persona_id)
            if before == stamp:
                return
            self._stamps[persona_id] = stamp
            if before is not None and before.version == stamp.version:
                return  # the same persona (its avatar may be new: images are cached by stamp)
            try:
                persona = self._parse(persona_id, row.document)
            except PersonaFileError as error:
                logger.error(
                    "Persona '%s' in the database is invalid, left as it was: %s", persona_id, error
                )
                return
            current = self._personas.get(persona_id)
            self._personas[persona_id] = persona
            if current is None or current.version != persona.version:
                logger.info("Persona '%s' %s", persona_id, "updated" if current else "added")
                self._notify(PersonaChange("upsert", persona_id, persona))

    async def _resync(self) -> None:
        """Compare every row's state with memory; bring each that differs up to date."""
        if self._closed:
            return
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select(_t.id, _t.version, _t.updated_at))).all()
        in_table = {row.id: _Stamp(row.version, row.updated_at) for row in rows}
        stale = [key for key, stamp in in_table.items() if self._stamps.get(key) != stamp]
        stale += [key for key in self._stamps if key not in in_table]
        for persona_id in stale:
            await self._sync(persona_id)

    async def _check(self) -> None:
        while True:
            await asyncio.sleep(self._check_interval)
            try:
                await self._resync()
            except Exception as error:
                logger.warning("Cannot compare the personas with the database: %s", error)

    def _forget(self, persona_id: str) -> None:
        """Take a persona whose row is gone out of memory, telling subscribers."""
        self._stamps.pop(persona_id, None)
        for key in [key for key in self._images if key[0] == persona_id]:
            del self._images[key]
        if self._personas.pop(persona_id, None) is not None:
            logger.info("Persona '%s' removed", persona_id)
            self._notify(PersonaChange("delete", persona_id, None))

    # Reading

    def _parse(self, persona_id: str, document: str) -> Persona:
        source = f"{personas_table.name}/{persona_id}"
        return parse_persona_text(persona_id, document, source=source, limits=self.limits)

    def _parse_rows(
        self, rows: builtins.list[tuple[str, _Stamp, str]]
    ) -> tuple[dict[str, Persona], dict[str, _Stamp]]:
        personas: dict[str, Persona] = {}
        stamps: dict[str, _Stamp] = {}
        for persona_id, stamp, document in rows:
            stamps[persona_id] = stamp
            try:
                personas[persona_id] = self._parse(persona_id, document)
            except PersonaFileError as error:
                logger.error(
                    "Persona '%s' in the database is invalid, not served: %s", persona_id, error
                )
        return personas, stamps
