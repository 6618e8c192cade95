"""The bundled personas of ``personas/``: they load, and they are rich."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from persona_agent.personas.loader import load_persona_file
from persona_agent.personas.prompt import render_system_prompt
from persona_agent.personas.scan import load_persona_dir
from tests.personas import BUNDLED

REQUIRED = {"albert-einstein", "ada-lovelace", "socrates", "marie-curie"}
PATHS = sorted(BUNDLED.glob("*.yaml"))
PANELS = [p for p in PATHS if "panel" in yaml.safe_load(p.read_text(encoding="utf-8"))]
PERSONAS = [p for p in PATHS if p not in PANELS]
"""Panels speak through their members: a background, a style and samples are theirs."""


def test_the_required_personas_are_bundled_and_the_directory_is_clean() -> None:
    personas, errors = load_persona_dir(BUNDLED)
    assert errors == []
    assert set(personas) >= REQUIRED
    assert sorted(personas) == [path.stem for path in PATHS]


@pytest.mark.parametrize("path", PATHS, ids=lambda path: path.stem)
def test_bundled_persona_loads_and_renders(tmp_path: Path, path: Path) -> None:
    copy = tmp_path / path.name
    copy.write_bytes(path.read_bytes())
    persona = load_persona_file(copy)
    prompt = render_system_prompt(persona)
    assert persona.name in prompt
    for domain, topics in persona.knowledge_domains.items():
        assert domain in prompt
        for topic in topics:
            assert topic in prompt
    for sample in persona.interaction_samples:
        assert sample.user is not None
        assert sample.assistant is not None
        assert f"User: {sample.user.strip()}" in prompt
        assert f"{persona.name}: {sample.assistant.strip()}" in prompt


@pytest.mark.parametrize("path", PERSONAS, ids=lambda path: path.stem)
def test_bundled_persona_is_rich(path: Path) -> None:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert "version" not in raw
    assert "model" not in raw
    assert "tools" not in raw
    persona = load_persona_file(path)
    assert 1 <= len(re.findall(r"[.!?](\s|$)", persona.description)) <= 2
    assert isinstance(persona.personal_background, str)
    assert len(persona.personal_background.strip().split("\n\n")) >= 3
    style = persona.language_style
    assert style is not None
    assert len(style.characteristics) >= 4
    assert len(style.sample_phrases) >= 3
    assert 3 <= len(persona.knowledge_domains) <= 5
    for topics in persona.knowledge_domains.values():
        assert 3 <= len(topics) <= 6
    assert 3 <= len(persona.interaction_samples) <= 5
    for sample in persona.interaction_samples:
        assert sample.assistant is not None
        sentences = re.findall(r"[.!?](\s|$)", sample.assistant.strip())
        assert 2 <= len(sentences) <= 5, sample.assistant
    assert len(persona.card.examples) == 3


def test_a_panel_is_bundled_whose_members_are_the_bundled_personas() -> None:
    assert PANELS, "docs/collaboration.md runs its examples on a bundled panel"
    personas, _ = load_persona_dir(BUNDLED)
    for path in PANELS:
        panel = personas[path.stem].panel
        assert panel is not None
        assert panel.mode == "broadcast"
        for member in panel.members:
            assert member in personas, member
            assert personas[member].panel is None
        assert len(personas[path.stem].card.examples) == 3
