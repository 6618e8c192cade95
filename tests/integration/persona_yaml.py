"""Small persona files for integration tests: the fields a persona needs, and writing one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def persona(name: str, domain: str = "testing", **extra: Any) -> dict[str, Any]:
    """A minimal persona named ``name`` (no tools), with ``extra`` fields over it."""
    return {
        "name": name,
        "description": f"{name}, a test persona.",
        "personal_background": f"{name} exists for tests.",
        "language_style": {"tone": "plain"},
        "knowledge_domains": {"Testing": [domain]},
        "tools": {"allow": []},
        **extra,
    }


def write(directory: Path, persona_id: str, data: dict[str, Any]) -> None:
    """Write ``data`` as ``{persona_id}.yaml`` in ``directory``."""
    (directory / f"{persona_id}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
