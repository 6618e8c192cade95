"""FilePersonaStore: conditional writes and taking in changes made on disk."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from persona_agent.errors import (
    PersonaExistsError,
    PersonaNotFoundError,
    PreconditionFailedError,
    ReadOnlyPersonaError,
)
from persona_agent.personas.loader import PersonaSource
from persona_agent.personas.model import Persona
from persona_agent.personas.stores.file_store import FilePersonaStore
from persona_agent.personas.stores.store import PersonaChange, version_matches
from tests.personas import persona_data, write_yaml

DATA = {
    "name": "Tess",
    "description": "A test persona.",
    "personal_background": "Made for tests.",
    "language_style": {"tone": "plain"},
    "knowledge_domains": {"Testing": ["assertions"]},
}


def persona(persona_id: str = "tess", **changes: object) -> Persona:
    return Persona.from_data(persona_id, {**DATA, **changes})


@pytest.fixture
def store(tmp_path: Path) -> FilePersonaStore:
    store = FilePersonaStore(tmp_path)
    assert store.load() == []
    return store


def test_version_matches() -> None:
    assert version_matches('"abc"', "abc")
    assert version_matches('W/"abc"', "abc")
    assert version_matches('"x", "abc"', "abc")
    assert version_matches("*", "abc")
    assert not version_matches('"abd"', "abc")


async def test_create_refuses_an_existing_id(store: FilePersonaStore) -> None:
    await store.create(persona())
    with pytest.raises(PersonaExistsError):
        await store.create(persona(name="Other"))
    assert (await store.get("tess")).name == "Tess"


async def test_replace_and_delete_honour_if_match(store: FilePersonaStore) -> None:
    with pytest.raises(PersonaNotFoundError):
        await store.replace(persona())
    first = persona()
    await store.create(first)
    second = persona(name="Tess II")
    await store.replace(second, if_match=f'"{first.version}"')
    with pytest.raises(PreconditionFailedError):
        await store.replace(persona(name="Tess III"), if_match=f'"{first.version}"')
    with pytest.raises(PreconditionFailedError):
        await store.delete("tess", if_match=f'"{first.version}"')
    assert (await store.get("tess")).name == "Tess II"
    await store.delete("tess", if_match=f'"{second.version}"')
    with pytest.raises(PersonaNotFoundError):
        await store.get("tess")


async def test_concurrent_creates_of_one_id_let_exactly_one_win(store: FilePersonaStore) -> None:
    results = await asyncio.gather(
        *(store.create(persona(name=f"Tess {i}")) for i in range(10)), return_exceptions=True
    )
    assert sum(isinstance(r, Persona) for r in results) == 1
    assert all(isinstance(r, PersonaExistsError) for r in results if not isinstance(r, Persona))


async def test_sync_file_takes_in_changes_made_on_disk(
    store: FilePersonaStore, tmp_path: Path
) -> None:
    changes: list[PersonaChange] = []
    store.subscribe(changes.append)
    path = tmp_path / "tess.yaml"

    path.write_text(yaml.safe_dump(DATA), encoding="utf-8")
    await store.sync_file(path)
    assert (await store.get("tess")).name == "Tess"
    await store.sync_file(path)  # unchanged: no event
    assert [c.kind for c in changes] == ["upsert"]

    path.write_text("name: [broken\n", encoding="utf-8")
    await store.sync_file(path)
    assert (await store.get("tess")).name == "Tess"  # left as it was
    assert [e.path for e in store.errors] == [str(path)]

    path.write_text(yaml.safe_dump({**DATA, "name": "Tess II"}), encoding="utf-8")
    await store.sync_file(path)
    assert (await store.get("tess")).name == "Tess II"
    assert store.errors == []

    path.unlink()
    await store.sync_file(path)
    with pytest.raises(PersonaNotFoundError):
        await store.get("tess")
    assert [c.kind for c in changes] == ["upsert", "upsert", "delete"]

    hidden = tmp_path / ".tess.yaml.123.tmp"
    hidden.write_text(yaml.safe_dump(DATA), encoding="utf-8")
    await store.sync_file(hidden)
    assert await store.list() == []


async def test_examples_are_listed_read_only_and_come_back_when_their_copy_goes(
    tmp_path: Path,
) -> None:
    examples, user = tmp_path / "examples", tmp_path / "user"
    examples.mkdir()
    write_yaml(examples / "alpha.yaml", persona_data(name="Alpha"))
    example_text = (examples / "alpha.yaml").read_bytes()
    store = FilePersonaStore(user, examples=examples)
    assert store.load() == []
    assert user.is_dir()  # made at load
    assert [p.id for p in await store.list()] == ["alpha"]
    assert (await store.source("alpha")).data == example_text
    heard: list[PersonaChange] = []
    store.subscribe(heard.append)

    with pytest.raises(ReadOnlyPersonaError):
        await store.delete("alpha")
    edited = b"# mine\n" + example_text.replace(b"Alpha", b"Alpha Mine")
    await store.replace(
        Persona.from_data("alpha", persona_data(name="Alpha Mine")),
        source=PersonaSource(edited, "yaml"),
    )
    assert (user / "alpha.yaml").read_bytes() == edited
    assert (examples / "alpha.yaml").read_bytes() == example_text
    assert (await store.source("alpha")).data == edited
    # The copy removed on disk (the watcher's call): the example is served again.
    (user / "alpha.yaml").unlink()
    await store.sync_file(user / "alpha.yaml")
    assert (await store.get("alpha")).name == "Alpha"
    assert [(c.kind, c.persona_id) for c in heard] == [("upsert", "alpha"), ("upsert", "alpha")]
    with pytest.raises(ReadOnlyPersonaError):
        await store.delete("alpha")
