"""Tests of persona_agent.personas, and small helpers they share."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "personas"

MINIMAL: dict[str, Any] = {
    "name": "Tess Tester",
    "description": "A persona made for tests.",
    "personal_background": "Tess was written to be loaded, checked and thrown away.",
    "language_style": {"tone": "plain"},
    "knowledge_domains": {"Software testing": ["unit tests", "fixtures"]},
}


def persona_data(**overrides: Any) -> dict[str, Any]:
    """A valid persona's data (a fresh deep copy), with top-level fields replaced."""
    data = copy.deepcopy(MINIMAL)
    data.update(overrides)
    return data


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path
