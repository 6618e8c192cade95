"""The settings walk (tests/architecture_walk.py) counts what it says: on small packages
written here, the files it enters, its visits and its climbs back up, which calls it
follows and which it does not; and it walks the hub's own tree from ``create_app``."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.architecture_walk import REPO, figures, report, tree_at, walk


def _package(tmp_path: Path, **modules: str) -> Path:
    """``src`` holding ``persona_agent`` with ``modules`` (name -> source; ``a__b`` is
    ``a/b.py``)."""
    root = tmp_path / "src" / "persona_agent"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    for name, source in modules.items():
        path = root / (name.replace("__", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        if not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("")
        path.write_text(textwrap.dedent(source))
    return tmp_path / "src"


def _entered(src: Path, spec: str = "src/persona_agent/root.py:create:settings") -> list[str]:
    return [e.function for e in walk(src, spec).events if e.kind == "enter"]


def test_a_tree_of_builders_enters_each_file_once_and_never_climbs_back(tmp_path: Path) -> None:
    src = _package(
        tmp_path,
        root="""
            from persona_agent.builders import build_engine
            from persona_agent.media import build_media

            def create(settings):
                engine = build_engine(settings)
                media = build_media(settings.voice)
                return engine, media
        """,
        builders="""
            from persona_agent.leaf import Engine

            def build_engine(settings):
                return Engine(settings.size)
        """,
        leaf="""
            from dataclasses import dataclass

            @dataclass
            class Engine:
                size: int
        """,
        media="""
            from persona_agent.speech.voices import Voices

            def build_media(voice):
                return Voices(voice)
        """,
        speech__voices="""
            class Voices:
                def __init__(self, name):
                    self.name = name
        """,
    )
    result = walk(src, "src/persona_agent/root.py:create:settings")
    found = figures(result.events)
    assert found.files == [
        "root.py",
        "builders.py",
        "leaf.py",
        "media.py",
        "speech/voices.py",
    ]
    assert found.climbs == []
    assert [(e.kind, e.depth) for e in result.events[:4]] == [
        ("enter", 0),
        ("enter", 1),
        ("enter", 2),
        ("return", 2),
    ]
    assert result.events[-1].kind == "return"
    assert result.events[-1].depth == 0
    assert len(result.events) == 10
    assert not result.cut


def test_a_helper_reached_from_three_places_is_two_climbs_back_up(tmp_path: Path) -> None:
    """The ping-pong of issue 47: ``limits(settings)`` made by each builder, and by the
    root again, instead of once."""
    src = _package(
        tmp_path,
        root="""
            from persona_agent.builders import build_store
            from persona_agent.other import build_api
            from persona_agent.helpers import limits

            def create(settings):
                build_store(settings)
                build_api(settings)
                limits(settings)
        """,
        builders="""
            from persona_agent.helpers import limits

            def build_store(settings):
                return limits(settings)
        """,
        other="""
            from persona_agent import helpers

            def build_api(settings):
                return helpers.limits(settings)
        """,
        helpers="""
            def limits(settings):
                return settings.max_bytes
        """,
    )
    found = figures(walk(src, "src/persona_agent/root.py:create:settings").events)
    assert found.files == ["root.py", "builders.py", "helpers.py", "other.py"]
    assert found.visits["helpers.py"] == 3
    assert [(c.event.file, c.caller, c.same_caller) for c in found.climbs] == [
        ("helpers.py", "persona_agent.other.build_api", False),
        ("helpers.py", "persona_agent.root.create", False),
    ]


def test_a_builder_entering_one_file_twice_climbs_back_once_from_the_same_call(
    tmp_path: Path,
) -> None:
    src = _package(
        tmp_path,
        root="""
            from persona_agent.limits import Limits, Store

            def create(settings):
                return Store(Limits(settings.size), settings.path)
        """,
        limits="""
            class Limits:
                def __init__(self, size):
                    self.size = size

            class Store:
                def __init__(self, limits, path):
                    self.path = path
        """,
    )
    found = figures(walk(src, "src/persona_agent/root.py:create:settings").events)
    assert found.visits["limits.py"] == 2
    assert [(c.event.function, c.same_caller) for c in found.climbs] == [
        ("persona_agent.limits.Store.__init__", True)
    ]


def test_the_value_and_what_is_made_of_it_are_followed_not_the_parts_built_of_it(
    tmp_path: Path,
) -> None:
    """``build(settings)`` is followed, ``used(part)`` is not; ``directory`` and
    ``settings.a or 5`` carry the value (to the parameter that receives them only), as does
    ``str(...)`` of it; the raised error, the logger (outside) and a method of an object of
    unknown class are not followed, the last counted as unresolved."""
    src = _package(
        tmp_path,
        root="""
            import logging

            from persona_agent.parts import build, errors_of, kept, made, named, used

            def create(settings, other):
                part = build(settings)
                used(part)
                directory = settings.data_dir / "models"
                named(1, directory)
                made(other, x=settings.a or 5)
                kept(str(settings.b))
                if settings.c:
                    raise errors_of(settings.c)
                logging.getLogger().info(settings.d)
                other.handle(settings.e)
        """,
        parts="""
            def build(settings): ...
            def used(part): ...
            def named(first, directory): ...
            def made(other, *, x): ...
            def kept(text): ...
            def errors_of(value):
                return ValueError(value)
        """,
    )
    result = walk(src, "src/persona_agent/root.py:create:settings")
    entered = [e.function for e in result.events if e.kind == "enter"]
    assert entered == [
        "persona_agent.root.create",
        "persona_agent.parts.build",
        "persona_agent.parts.named",
        "persona_agent.parts.made",
        "persona_agent.parts.kept",
    ]
    assert dict(result.unresolved) == {"other.handle": 1}
    assert "other.handle" in report(result)


def test_an_error_raised_with_the_value_is_not_followed(tmp_path: Path) -> None:
    src = _package(
        tmp_path,
        root="""
            from persona_agent.errors import ConfigError

            def create(settings):
                if not settings.ok:
                    raise ConfigError(f"bad {settings.name}")
        """,
        errors="""
            class ConfigError(Exception):
                def __init__(self, message):
                    super().__init__(message)
        """,
    )
    assert _entered(src) == ["persona_agent.root.create"]


def test_methods_classmethods_late_imports_and_annotated_receivers_are_resolved(
    tmp_path: Path,
) -> None:
    src = _package(
        tmp_path,
        root="""
            from persona_agent.keys import Keys
            from persona_agent.store import Store

            def create(settings, store: Store):
                from persona_agent.late import late

                keys = Keys.from_settings(settings.keys)
                store.open(settings.path)
                library = Store()
                library.find(settings.voice)
                late(settings)
                return keys
        """,
        keys="""
            from persona_agent.base import Base

            class Keys(Base):
                @classmethod
                def from_settings(cls, text):
                    return cls(text.split(","))
        """,
        base="""
            class Base:
                def __init__(self, entries):
                    self.entries = entries
        """,
        store="""
            class Store:
                def open(self, path):
                    self._check(path)

                def _check(self, path): ...

                def find(self, name): ...
        """,
        late="""
            def late(settings): ...
        """,
    )
    assert _entered(src) == [
        "persona_agent.root.create",
        "persona_agent.keys.Keys.from_settings",
        "persona_agent.base.Base.__init__",
        "persona_agent.store.Store.open",
        "persona_agent.store.Store._check",
        "persona_agent.store.Store.find",
        "persona_agent.late.late",
    ]


def test_recursion_is_not_entered_again_and_the_walk_is_cut_at_its_count(tmp_path: Path) -> None:
    src = _package(
        tmp_path,
        root="""
            def create(settings):
                again(settings)
                other(settings.a)
                other(settings.b)

            def again(settings):
                again(settings.child)

            def other(value): ...
        """,
    )
    assert _entered(src) == [
        "persona_agent.root.create",
        "persona_agent.root.again",
        "persona_agent.root.other",
        "persona_agent.root.other",
    ]
    cut = walk(src, "src/persona_agent/root.py:create:settings", max_events=5)
    assert len(cut.events) == 5
    assert cut.cut
    assert "events: 5 (cut)" in report(cut)


def test_the_hub_is_walked_from_create_app_through_its_composition_root() -> None:
    """On this tree: the walk finds the composition root and its builders."""
    result = walk(REPO / "src", "src/persona_agent/api/app.py:create_app:settings")
    found = figures(result.events)
    assert not result.cut
    assert found.files[:3] == ["api/app.py", "hub/composition.py", "hub/telemetry.py"]
    assert {"hub/storage.py", "hub/a2a_parts.py", "hub/personas_live.py"} <= set(found.files)
    assert all(not text.startswith("persona_agent") for text in result.unresolved)


def test_a_commit_is_walked_from_its_own_tree() -> None:
    """``--at REV``: the tree of the commit, not the working tree's."""
    with tree_at("HEAD") as src:
        assert src != REPO / "src"
        assert (src / "persona_agent" / "hub" / "composition.py").is_file()
        head = figures(walk(src, "src/persona_agent/hub/composition.py:build_hub:settings").events)
    assert head.files[0] == "hub/composition.py"
