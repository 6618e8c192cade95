"""SqlPersonaStore on a real PostgreSQL: each test has a database of its own, and
"replicas" are stores on engines and listeners of their own."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
from sqlalchemy import select, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from persona_agent.cluster.notify import Listener
from persona_agent.db import NOTIFY, create_engine
from persona_agent.errors import (
    PersonaExistsError,
    PersonaFileError,
    PersonaNotFoundError,
    PreconditionFailedError,
)
from persona_agent.migrations.tables import metadata
from persona_agent.personas.formats.png import CleanImage, clean_image
from persona_agent.personas.loader import dump_persona_yaml
from persona_agent.personas.model import Persona
from persona_agent.personas.stores.sql_store import CHANNEL, SqlPersonaStore
from persona_agent.personas.stores.sql_writes import personas_table
from persona_agent.personas.stores.store import PersonaChange
from tests.conftest import LOCAL_POSTGRES_URL, POSTGRES_REQUIRED, POSTGRES_URL
from tests.personas import persona_data, write_yaml
from tests.personas.cards import MIRA_V2, card_png, picture, png_bytes

DEADLINE = 1.0
"""Seconds within which a change on one replica reaches another through NOTIFY."""


def make(persona_id: str = "tess", **changes: Any) -> Persona:
    return Persona.from_data(persona_id, persona_data(**changes))


def image(size: tuple[int, int] = (48, 64)) -> CleanImage:
    return clean_image(png_bytes(picture(size)))


@pytest.fixture
async def database() -> AsyncIterator[URL]:
    """A new PostgreSQL database with the hub's tables, dropped after the test."""
    base = POSTGRES_URL or LOCAL_POSTGRES_URL
    name = f"pa_t_{uuid.uuid4().hex}"
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
    except (OSError, SQLAlchemyError) as error:
        await admin.dispose()
        if POSTGRES_REQUIRED or POSTGRES_URL:
            pytest.fail(f"PostgreSQL at {base} is required and did not answer: {error}")
        pytest.skip(f"no PostgreSQL at {base} ({type(error).__name__})")
    url = make_url(base).set(database=name)
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
        await engine.dispose()
        yield url
    finally:
        await engine.dispose()
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        await admin.dispose()


@dataclass
class Replica:
    """One replica's store, with every change its subscribers heard."""

    store: SqlPersonaStore
    engine: AsyncEngine
    listener: Listener | None
    changes: asyncio.Queue[PersonaChange] = field(default_factory=asyncio.Queue)

    async def next_change(self, within: float = DEADLINE) -> PersonaChange:
        async with asyncio.timeout(within):
            return await self.changes.get()

    def heard(self) -> list[PersonaChange]:
        """The changes heard and not yet taken."""
        found = []
        while not self.changes.empty():
            found.append(self.changes.get_nowait())
        return found


class OpenReplica(Protocol):
    def __call__(
        self, *, listen: bool = True, check_interval: float = 5.0, start: bool = True
    ) -> Awaitable[Replica]: ...


@pytest.fixture
async def open_replica(database: URL) -> AsyncIterator[OpenReplica]:
    """Opens replicas on the test database; closes them after the test."""
    opened: list[Replica] = []

    async def open_(
        *, listen: bool = True, check_interval: float = 5.0, start: bool = True
    ) -> Replica:
        engine = create_engine(database.render_as_string(hide_password=False))
        listener = Listener(engine.url) if listen else None
        if listener is not None:
            await listener.start()
        replica = Replica(SqlPersonaStore(engine, check_interval=check_interval), engine, listener)
        opened.append(replica)
        replica.store.subscribe(replica.changes.put_nowait)
        if start:
            await replica.store.start(listener)
        return replica

    yield open_
    for replica in opened:
        await replica.store.aclose()
        if replica.listener is not None:
            await replica.listener.aclose()
        await replica.engine.dispose()


class Notifications:
    """Every payload notified on the personas' channel, heard by a listener of its own."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._listener = Listener(engine.url)
        self._payloads: list[str] = []
        self._marks: asyncio.Queue[str] = asyncio.Queue()

    async def start(self) -> None:
        await self._listener.listen(CHANNEL, self._heard)
        await self._listener.start()

    async def aclose(self) -> None:
        await self._listener.aclose()

    def _heard(self, payload: str) -> None:
        if payload.startswith("~"):
            self._marks.put_nowait(payload)
        else:
            self._payloads.append(payload)

    async def settle(self) -> list[str]:
        """The payloads of every transaction committed before this call, since the last
        call: a mark notified now arrives after them (notifications come in commit order)."""
        mark = f"~{uuid.uuid4().hex}"
        async with self._engine.begin() as conn:
            await conn.execute(NOTIFY, {"channel": CHANNEL, "payload": mark})
        async with asyncio.timeout(DEADLINE):
            while await self._marks.get() != mark:
                pass
        found, self._payloads = self._payloads, []
        return found


@pytest.fixture
async def notifications(database: URL) -> AsyncIterator[Notifications]:
    engine = create_engine(database.render_as_string(hide_password=False))
    heard = Notifications(engine)
    await heard.start()
    yield heard
    await heard.aclose()
    await engine.dispose()


async def row_states(engine: AsyncEngine) -> dict[str, tuple[str, str]]:
    """Each row's version and ``xmin`` (which changes whenever the row is rewritten)."""
    t = personas_table.c
    async with engine.connect() as conn:
        rows = await conn.execute(select(t.id, t.version, text("xmin::text")))
        return {row[0]: (row[1], row[2]) for row in rows}


async def test_crud_and_errors(open_replica: OpenReplica) -> None:
    replica = await open_replica()
    store = replica.store
    assert store.load() == []
    assert await store.list() == []

    created = await store.create(make(name="Tess"))
    assert await store.get("tess") == created
    assert [p.id for p in await store.list()] == ["tess"]
    with pytest.raises(PersonaExistsError):
        await store.create(make(name="Other"))

    with pytest.raises(PreconditionFailedError, match=created.version):
        await store.replace(make(name="Tess 2"), if_match='"0000000000000000"')
    replaced = await store.replace(make(name="Tess 2"), if_match=f'W/"{created.version}"')
    assert (await store.get("tess")).name == "Tess 2"
    with pytest.raises(PersonaNotFoundError):
        await store.replace(make("nobody"))
    with pytest.raises(PersonaNotFoundError):
        await store.replace(make("nobody"), if_match=created.version)

    put = await store.put(make("quinn", name="Quinn"))
    assert (await store.put(put.model_copy(update={"name": "Quinn 2"}))).name == "Quinn 2"

    with pytest.raises(PreconditionFailedError):
        await store.delete("tess", if_match=created.version)
    await store.delete("tess", if_match=f'"x", "{replaced.version}"')
    with pytest.raises(PersonaNotFoundError):
        await store.get("tess")
    with pytest.raises(PersonaNotFoundError):
        await store.delete("tess")
    with pytest.raises(PersonaNotFoundError):
        await store.avatar("tess")

    invalid = Persona.model_construct(**{**dict(make()), "id": "Not An Id"})
    with pytest.raises(ValueError, match="not a valid persona id"):
        await store.put(invalid)

    assert [(c.kind, c.persona_id) for c in replica.heard()] == [
        ("upsert", "tess"),
        ("upsert", "tess"),
        ("upsert", "quinn"),
        ("upsert", "quinn"),
        ("delete", "tess"),
    ]
    fresh = await open_replica(listen=False)
    assert [p.name for p in await fresh.store.list()] == ["Quinn 2"]
    assert await fresh.store.get("quinn") == await store.get("quinn")


async def test_only_postgresql(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}")
    try:
        with pytest.raises(ValueError, match="PostgreSQL"):
            SqlPersonaStore(engine)
    finally:
        await engine.dispose()


async def test_changes_reach_another_replica_through_notify(open_replica: OpenReplica) -> None:
    a = await open_replica()
    b = await open_replica()
    loop = asyncio.get_running_loop()

    async def seen_by_b(write: Awaitable[object]) -> PersonaChange:
        started = loop.time()
        await write
        change = await b.next_change()
        assert loop.time() - started < DEADLINE
        return change

    created = await seen_by_b(a.store.create(make(name="Tess")))
    assert (created.kind, created.persona) == ("upsert", await a.store.get("tess"))
    assert await b.store.get("tess") == await a.store.get("tess")

    version = (await a.store.get("tess")).version
    replaced = await seen_by_b(a.store.replace(make(name="Tess 2"), if_match=version))
    assert replaced.persona is not None
    assert replaced.persona.name == "Tess 2"
    assert (await b.store.get("tess")).name == "Tess 2"

    deleted = await seen_by_b(a.store.delete("tess"))
    assert (deleted.kind, deleted.persona_id, deleted.persona) == ("delete", "tess", None)
    assert await b.store.list() == []

    # A hears of its own writes once. Its notifications were handled in order, before
    # this one of B's for the same persona.
    await b.store.create(make(name="From B"))
    assert (await a.next_change()).kind == "upsert"  # A's create
    assert (await a.next_change()).kind == "upsert"  # A's replace
    assert (await a.next_change()).kind == "delete"  # A's delete
    from_b = await a.next_change()
    assert from_b.persona is not None
    assert from_b.persona.name == "From B"
    assert a.heard() == []
    assert [c.persona_id for c in b.heard()] == ["tess"]  # B's own create


async def test_periodic_check_catches_up_without_a_listener(open_replica: OpenReplica) -> None:
    a = await open_replica()
    b = await open_replica(listen=False, check_interval=0.2)

    await a.store.create(make(name="Tess"))
    change = await b.next_change(within=2.0)
    assert (change.kind, change.persona_id) == ("upsert", "tess")
    assert await b.store.get("tess") == await a.store.get("tess")

    await a.store.put(make(name="Tess 2"))
    change = await b.next_change(within=2.0)
    assert change.persona is not None
    assert change.persona.name == "Tess 2"

    await a.store.delete("tess")
    change = await b.next_change(within=2.0)
    assert (change.kind, change.persona_id) == ("delete", "tess")
    assert await b.store.list() == []


async def test_concurrent_replaces_with_one_etag_let_exactly_one_win(
    open_replica: OpenReplica,
) -> None:
    a = await open_replica()
    b = await open_replica()
    version = (await a.store.create(make(name="Round 0"))).version
    for round_ in range(1, 11):
        results = await asyncio.gather(
            a.store.replace(make(name=f"Round {round_} by A"), if_match=version),
            b.store.replace(make(name=f"Round {round_} by B"), if_match=version),
            return_exceptions=True,
        )
        winners = [result for result in results if isinstance(result, Persona)]
        losers = [r for r in results if isinstance(r, PreconditionFailedError)]
        assert (len(winners), len(losers)) == (1, 1), results
        version = winners[0].version
        assert (await row_states(a.engine))["tess"][0] == version
    deleted = await asyncio.gather(
        a.store.delete("tess", if_match=version),
        b.store.delete("tess", if_match=version),
        return_exceptions=True,
    )
    assert sorted(type(result).__name__ for result in deleted) == [
        "NoneType",
        "PersonaNotFoundError",
    ]


async def test_an_invalid_row_is_skipped_and_never_fatal(open_replica: OpenReplica) -> None:
    a = await open_replica()
    await a.store.create(make(name="Tess"))
    async with a.engine.begin() as conn:
        await conn.execute(
            personas_table.insert().values(id="broken", version="x", document="name: Broken\n")
        )
    b = await open_replica()
    assert [p.id for p in await b.store.list()] == ["tess"]

    # A row that stops validating leaves the persona as it was.
    async with a.engine.begin() as conn:
        await conn.execute(
            personas_table.update()
            .where(personas_table.c.id == "tess")
            .values(version="y", document="name: [")
        )
        await conn.execute(NOTIFY, {"channel": CHANNEL, "payload": "tess"})
    await a.store.put(make(name="Tess 2"))
    change = await b.next_change()  # the invalid row was read first and changed nothing
    assert change.persona is not None
    assert change.persona.name == "Tess 2"
    assert b.heard() == []


def write_personas(directory: Path) -> Path:
    directory.mkdir()
    write_yaml(directory / "alpha.yaml", persona_data(name="Alpha"))
    write_yaml(directory / "beta.yaml", persona_data(name="Beta"))
    return directory


async def test_import_writes_a_file_once_and_keeps_edits_made_since(
    open_replica: OpenReplica, notifications: Notifications, tmp_path: Path
) -> None:
    directory = write_personas(tmp_path / "personas")
    (directory / "broken.yaml").write_text("name: Broken\n", encoding="utf-8")
    early = await open_replica(start=False)
    errors = await early.store.import_directory(directory)
    assert [error.path for error in errors] == [str(directory / "broken.yaml")]
    assert sorted(await notifications.settle()) == ["alpha", "beta"]
    await early.store.start(early.listener)  # the hub's order: import, then start
    assert [p.name for p in await early.store.list()] == ["Alpha", "Beta"]

    a = await open_replica()
    states = await row_states(a.engine)
    assert [error.path for error in await a.store.import_directory(directory)] == [
        str(directory / "broken.yaml")
    ]
    assert await notifications.settle() == []
    assert await row_states(a.engine) == states  # no row rewritten

    alpha = await a.store.get("alpha")
    edited = await a.store.replace(make("alpha", name="Alpha, edited"), if_match=alpha.version)
    await a.store.import_directory(directory)
    assert await a.store.get("alpha") == edited
    assert await notifications.settle() == ["alpha"]  # the edit, and no import

    a.heard()
    write_yaml(directory / "alpha.yaml", persona_data(name="Alpha, from the file"))
    await a.store.import_directory(directory)
    assert await notifications.settle() == ["alpha"]
    assert (await a.store.get("alpha")).name == "Alpha, from the file"
    assert [(c.kind, c.persona_id) for c in a.heard()] == [("upsert", "alpha")]
    assert [(await early.next_change()).persona for _ in range(2)] == [
        edited,
        await a.store.get("alpha"),
    ]


async def test_replicas_importing_at_once_write_each_persona_once(
    open_replica: OpenReplica, notifications: Notifications, tmp_path: Path
) -> None:
    directory = write_personas(tmp_path / "personas")
    replicas = [await open_replica() for _ in range(3)]
    results = await asyncio.gather(
        *(replica.store.import_directory(directory) for replica in replicas)
    )
    assert results == [[], [], []]
    assert sorted(await notifications.settle()) == ["alpha", "beta"]
    for replica in replicas:
        assert [p.name for p in await replica.store.list()] == ["Alpha", "Beta"]
    states = await row_states(replicas[0].engine)
    await asyncio.gather(*(replica.store.import_directory(directory) for replica in replicas))
    assert await notifications.settle() == []
    assert await row_states(replicas[0].engine) == states


async def test_import_stores_avatars_and_card_pictures(
    open_replica: OpenReplica, tmp_path: Path
) -> None:
    directory = write_personas(tmp_path / "personas")
    write_yaml(directory / "gamma.yaml", persona_data(name="Gamma", avatar="gamma.png"))
    (directory / "gamma.png").write_bytes(png_bytes(picture((20, 30))))
    (directory / "mira.png").write_bytes(card_png(MIRA_V2, picture((40, 40))))
    a = await open_replica()
    assert await a.store.import_directory(directory) == []

    gamma = await a.store.get("gamma")
    assert gamma.avatar == "gamma.avatar.png"
    assert await a.store.avatar("gamma") == image((20, 30))
    mira = await a.store.get("mira")
    assert mira.avatar == "mira.avatar.png"
    assert await a.store.avatar("mira") == image((40, 40))
    assert await a.store.avatar("alpha") is None

    # A changed avatar file is a changed source.
    (directory / "gamma.png").write_bytes(png_bytes(picture((22, 30))))
    await a.store.import_directory(directory)
    assert await a.store.avatar("gamma") == image((22, 30))


async def test_avatar_round_trip(open_replica: OpenReplica) -> None:
    a = await open_replica()
    b = await open_replica()
    first = image((48, 64))
    stored = await a.store.create(make(name="Tess"), image=first)
    assert stored.avatar == "tess.avatar.png"
    assert await a.store.avatar("tess") == first
    await b.next_change()
    assert await b.store.avatar("tess") == first

    # Kept through a write without an image, while the persona names it.
    renamed = await a.store.replace(stored.model_copy(update={"name": "Tess 2"}))
    assert renamed.avatar == "tess.avatar.png"
    assert await a.store.avatar("tess") == first
    await b.next_change()
    assert await b.store.avatar("tess") == first

    # A new picture for the same persona: same version, new image, on both replicas.
    second = image((10, 10))
    assert (await a.store.put(renamed, image=second)).version == renamed.version
    assert await a.store.avatar("tess") == second
    # Subscribers hear of no change (the persona is the same): B is polled.
    async with asyncio.timeout(DEADLINE):
        while await b.store.avatar("tess") != second:  # noqa: ASYNC110
            await asyncio.sleep(0.02)

    with pytest.raises(PersonaFileError, match=r"other\.png"):
        await a.store.put(make(name="Tess", avatar="other.png"))
    with pytest.raises(PersonaFileError, match=r"new\.avatar\.png"):
        await a.store.create(make("new", avatar="new.avatar.png"))
    with pytest.raises(PersonaNotFoundError):
        await a.store.get("new")
    assert "new" not in await row_states(a.engine)  # the transaction rolled back

    without = await a.store.put(renamed.model_copy(update={"avatar": None}))
    assert await a.store.avatar("tess") is None
    assert without.avatar is None


async def test_a_document_as_the_store_writes_it(open_replica: OpenReplica) -> None:
    a = await open_replica()
    stored = await a.store.create(make(name="Tess"))
    async with a.engine.connect() as conn:
        row = (
            await conn.execute(
                select(personas_table.c.version, personas_table.c.document).where(
                    personas_table.c.id == "tess"
                )
            )
        ).one()
    assert tuple(row) == (stored.version, dump_persona_yaml(stored))
