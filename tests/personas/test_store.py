"""FilePersonaStore against a real directory."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from persona_agent.errors import PersonaNotFoundError
from persona_agent.personas.formats.png import CleanImage
from persona_agent.personas.loader import PersonaSource, load_persona_file
from persona_agent.personas.model import Persona
from persona_agent.personas.stores.file_store import FilePersonaStore
from persona_agent.personas.stores.store import PersonaChange
from tests.personas import persona_data, write_yaml


def make(persona_id: str, name: str = "Tess Tester") -> Persona:
    return Persona.from_data(persona_id, persona_data(name=name))


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    directory = tmp_path / "personas"
    directory.mkdir()
    write_yaml(directory / "alpha.yaml", persona_data(name="Alpha"))
    write_yaml(directory / "beta.yaml", persona_data(name="Beta"))
    return directory


@pytest.fixture
def store(directory: Path) -> FilePersonaStore:
    store = FilePersonaStore(directory)
    assert store.load() == []
    return store


def reloaded(directory: Path) -> FilePersonaStore:
    fresh = FilePersonaStore(directory)
    assert fresh.load() == []
    return fresh


def file_names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


async def test_load_list_and_get(store: FilePersonaStore) -> None:
    assert [p.id for p in await store.list()] == ["alpha", "beta"]
    alpha = await store.get("alpha")
    assert alpha.name == "Alpha"
    assert alpha == load_persona_file(store.directory / "alpha.yaml")


async def test_load_reports_bad_files_and_keeps_good_ones(directory: Path) -> None:
    (directory / "broken.yaml").write_text("name: Broken\n", encoding="utf-8")
    store = FilePersonaStore(directory)
    errors = store.load()
    assert [Path(e.path).name for e in errors] == ["broken.yaml"]
    assert store.errors == errors
    assert [p.id for p in await store.list()] == ["alpha", "beta"]


async def test_put_creates_a_file_that_a_fresh_store_sees(
    store: FilePersonaStore, directory: Path
) -> None:
    gamma = make("gamma", "Gamma")
    await store.put(gamma)
    assert (directory / "gamma.yaml").is_file()
    assert await store.get("gamma") == gamma
    assert [p.id for p in await store.list()] == ["alpha", "beta", "gamma"]
    assert await reloaded(directory).get("gamma") == gamma


async def test_put_replaces_and_removes_other_files_of_the_same_id(
    store: FilePersonaStore, directory: Path
) -> None:
    (directory / "alpha.json").write_text("{}", encoding="utf-8")
    (directory / "alpha.yml").write_text("{}", encoding="utf-8")
    renamed = make("alpha", "Alpha Renamed")
    await store.put(renamed)
    assert file_names(directory) == ["alpha.yaml", "beta.yaml"]
    fresh = reloaded(directory)
    assert await fresh.get("alpha") == renamed
    assert (await fresh.get("alpha")).version != (await store.list())[1].version


async def test_put_leaves_no_temporary_files(store: FilePersonaStore, directory: Path) -> None:
    for index in range(5):
        await store.put(make("alpha", f"Alpha {index}"))
        await store.put(make(f"new-{index}"))
    assert all(not name.startswith(".") for name in file_names(directory))
    assert all(name.endswith(".yaml") for name in file_names(directory))


async def test_a_failed_write_changes_nothing(
    store: FilePersonaStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = (directory / "alpha.yaml").read_bytes()
    changes: list[PersonaChange] = []
    store.subscribe(changes.append)

    def failing_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left"):
        await store.put(make("alpha", "Never Written"))
    assert (directory / "alpha.yaml").read_bytes() == before
    assert file_names(directory) == ["alpha.yaml", "beta.yaml"]
    assert (await store.get("alpha")).name == "Alpha"
    assert changes == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
async def test_put_keeps_the_mode_of_a_replaced_file(
    store: FilePersonaStore, directory: Path
) -> None:
    os.chmod(directory / "alpha.yaml", 0o640)
    await store.put(make("alpha", "Alpha Renamed"))
    await store.put(make("gamma"))
    assert stat.S_IMODE((directory / "alpha.yaml").stat().st_mode) == 0o640
    assert stat.S_IMODE((directory / "gamma.yaml").stat().st_mode) == 0o644


async def test_put_creates_the_directory(tmp_path: Path) -> None:
    store = FilePersonaStore(tmp_path / "new" / "personas")
    await store.put(make("gamma"))
    assert (tmp_path / "new" / "personas" / "gamma.yaml").is_file()


async def test_delete_removes_the_file(store: FilePersonaStore, directory: Path) -> None:
    (directory / "alpha.json").write_text("{}", encoding="utf-8")
    await store.delete("alpha")
    assert file_names(directory) == ["beta.yaml"]
    with pytest.raises(PersonaNotFoundError):
        await store.get("alpha")
    assert [p.id for p in await reloaded(directory).list()] == ["beta"]


async def test_unknown_ids_are_not_found(store: FilePersonaStore) -> None:
    with pytest.raises(PersonaNotFoundError, match="nobody"):
        await store.get("nobody")
    with pytest.raises(PersonaNotFoundError, match="nobody"):
        await store.delete("nobody")
    with pytest.raises(PersonaNotFoundError):
        await store.get("../alpha")


async def test_put_refuses_an_unvalidated_id(store: FilePersonaStore, directory: Path) -> None:
    sneaky = Persona.model_construct(**{**dict(make("gamma")), "id": "../escaped"})
    with pytest.raises(ValueError, match="not a valid persona id"):
        await store.put(sneaky)
    assert not (directory.parent / "escaped.yaml").exists()


async def test_subscribers_hear_of_every_change_until_they_unsubscribe(
    store: FilePersonaStore,
) -> None:
    heard: list[PersonaChange] = []
    also: list[PersonaChange] = []
    unsubscribe = store.subscribe(heard.append)
    store.subscribe(also.append)
    gamma = make("gamma")
    await store.put(gamma)
    await store.delete("alpha")
    assert heard == [
        PersonaChange("upsert", "gamma", gamma),
        PersonaChange("delete", "alpha", None),
    ]
    unsubscribe()
    unsubscribe()  # twice is harmless
    await store.delete("gamma")
    assert len(heard) == 2
    assert also[-1] == PersonaChange("delete", "gamma", None)


async def test_a_failing_subscriber_does_not_stop_the_change_or_the_others(
    store: FilePersonaStore, caplog: pytest.LogCaptureFixture
) -> None:
    heard: list[PersonaChange] = []

    def broken(change: PersonaChange) -> None:
        raise RuntimeError("subscriber bug")

    store.subscribe(broken)
    store.subscribe(heard.append)
    await store.put(make("gamma"))
    assert [change.persona_id for change in heard] == ["gamma"]
    assert (store.directory / "gamma.yaml").is_file()
    assert "subscriber failed" in caplog.text


async def test_concurrent_puts_to_one_id_are_serialized(
    store: FilePersonaStore, directory: Path
) -> None:
    order: list[str] = []
    store.subscribe(lambda change: order.append(change.persona.name if change.persona else ""))
    names = [f"Version {index}" for index in range(10)]
    async with asyncio.timeout(60):
        await asyncio.gather(*(store.put(make("alpha", name)) for name in names))
    assert order == names
    assert (await store.get("alpha")).name == "Version 9"
    assert (await reloaded(directory).get("alpha")).name == "Version 9"


async def test_put_and_delete_clear_errors_of_the_files_they_replace(directory: Path) -> None:
    (directory / "broken.yml").write_text("name: Broken\n", encoding="utf-8")
    (directory / "gone.yaml").write_text("name: Gone\n", encoding="utf-8")
    store = FilePersonaStore(directory)
    assert len(store.load()) == 2
    await store.put(make("broken"))
    assert [Path(e.path).name for e in store.errors] == ["gone.yaml"]
    assert file_names(directory) == ["alpha.yaml", "beta.yaml", "broken.yaml", "gone.yaml"]


async def test_delete_removes_a_duplicate_file_and_its_error(directory: Path) -> None:
    write_yaml(directory / "alpha.yml", persona_data(name="Alpha duplicate"))
    store = FilePersonaStore(directory)
    assert [Path(e.path).name for e in store.load()] == ["alpha.yml"]
    await store.delete("alpha")
    assert store.errors == []
    assert file_names(directory) == ["beta.yaml"]


async def test_a_cancelled_put_still_completes_consistently(
    store: FilePersonaStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = threading.Event()
    release = threading.Event()
    original = store._write

    def slow_write(persona_id: str, source: PersonaSource, image: CleanImage | None) -> None:
        started.set()
        release.wait(60)
        original(persona_id, source, image)

    monkeypatch.setattr(store, "_write", slow_write)
    heard = asyncio.Event()
    store.subscribe(lambda change: heard.set())
    async with asyncio.timeout(60):
        task = asyncio.create_task(store.put(make("alpha", "Alpha Renamed")))
        assert await asyncio.to_thread(started.wait, 60)
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        await heard.wait()
    assert (await store.get("alpha")).name == "Alpha Renamed"
    assert (await reloaded(directory).get("alpha")).name == "Alpha Renamed"
