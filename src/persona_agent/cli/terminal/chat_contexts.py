"""The terminal chat's memory of the last conversation with each agent, in the data
directory, for the next ``chat`` to continue it."""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["CONTEXTS_FILE", "ContextMemory"]

CONTEXTS_FILE = "chat-contexts.json"
"""In the data directory: the last conversation with each persona of each hub."""


class ContextMemory:
    """The last conversation (A2A context id) with each agent, in a small JSON file, for
    the next ``chat`` to continue it: ``{target: {persona id: context id}}``.

    A file that cannot be read is taken as empty and one that cannot be written is left
    alone: remembering is a convenience, never a reason for the chat to fail.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, dict)}

    def get(self, key: tuple[str, str]) -> str | None:
        value = self._read().get(key[0], {}).get(key[1])
        return value if isinstance(value, str) and value else None

    def put(self, key: tuple[str, str], context_id: str | None) -> None:
        """Remember ``context_id`` for ``key``; ``None`` forgets it."""
        data = self._read()
        contexts = data.setdefault(key[0], {})
        if context_id is None:
            contexts.pop(key[1], None)
        else:
            contexts[key[1]] = context_id
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            temporary.replace(self.path)  # another chat never reads half a file
        except OSError:
            temporary.unlink(missing_ok=True)
