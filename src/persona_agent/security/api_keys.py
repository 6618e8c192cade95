"""API keys: each a principal with a name, optional scopes and personas, stored hashed.

``PERSONA_AGENT_API_KEYS`` takes either a comma-separated list of keys (each its own
principal, ``key:`` and the first 12 hex digits of its SHA-256, with every scope), or a
JSON list of entries; ``PERSONA_AGENT_API_KEYS_FILE`` names a YAML or JSON file of such
entries. An entry::

    {"name": "alice", "key": "...", "scopes": ["a2a"], "personas": ["socrates"]}
    {"name": "ci", "sha256": "<64 hex digits: the key's SHA-256>"}

Only the SHA-256 of each key is kept in memory; a presented key is hashed and compared
with every entry in constant time, so the time taken says nothing about which matched.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from persona_agent.errors import ConfigError
from persona_agent.security.principal import KNOWN_SCOPES, SCOPES, Principal

__all__ = ["ApiKeys", "hash_key", "keys_in_clear"]

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


def hash_key(key: str) -> str:
    """The SHA-256 of a key, as 64 hex digits (what an entry's ``sha256`` holds)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class _Entry:
    digest: bytes
    principal: Principal


class ApiKeys:
    """The configured keys; :meth:`match` finds a presented key's principal."""

    def __init__(self, entries: Sequence[_Entry] = ()) -> None:
        self._entries = list(entries)

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def from_settings(cls, value: str, file: Path | None = None) -> ApiKeys:
        """The keys of ``PERSONA_AGENT_API_KEYS`` and ``PERSONA_AGENT_API_KEYS_FILE``.

        Raises:
            ConfigError: an entry is malformed, a name is given twice, or the file cannot
                be read; the message never repeats a key.
        """
        entries: list[_Entry] = []
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as error:
                raise ConfigError(
                    f"PERSONA_AGENT_API_KEYS is not a valid JSON list (line {error.lineno}, "
                    f"column {error.colno}: {error.msg})"
                ) from None
            entries += _entries(parsed, "PERSONA_AGENT_API_KEYS")
        elif text:
            for key in (part.strip() for part in text.split(",")):
                if key:
                    digest = hash_key(key)
                    entries.append(_Entry(bytes.fromhex(digest), Principal(f"key:{digest[:12]}")))
        if file is not None:
            try:
                loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError) as error:
                raise ConfigError(f"PERSONA_AGENT_API_KEYS_FILE {file}: {error}") from None
            if isinstance(loaded, Mapping):
                loaded = loaded.get("keys")
            entries += _entries(loaded, f"PERSONA_AGENT_API_KEYS_FILE {file}")
        names = [entry.principal.name for entry in entries]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ConfigError(f"API key names given twice: {', '.join(twice)}")
        return cls(entries)

    def match(self, presented: str) -> Principal | None:
        """The principal of ``presented``, or ``None``; compared with every key."""
        digest = hashlib.sha256(presented.encode("utf-8")).digest()
        found: Principal | None = None
        for entry in self._entries:
            if hmac.compare_digest(digest, entry.digest) and found is None:
                found = entry.principal
        return found


def keys_in_clear(value: str, file: Path | None = None) -> list[str]:
    """The keys ``PERSONA_AGENT_API_KEYS`` and its file give in clear, whichever form they
    take (for the log to redact); what cannot be read gives none (start-up says why)."""
    text = value.strip()
    entries: Any = []
    if text.startswith("["):
        try:
            entries = json.loads(text)
        except json.JSONDecodeError:
            entries = []
    elif text:
        entries = [{"key": key.strip()} for key in text.split(",") if key.strip()]
    if file is not None:
        try:
            loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            loaded = None
        if isinstance(loaded, Mapping):
            loaded = loaded.get("keys")
        if isinstance(loaded, list) and isinstance(entries, list):
            entries = [*entries, *loaded]
    if not isinstance(entries, list):
        return []
    return [
        item["key"]
        for item in entries
        if isinstance(item, Mapping) and isinstance(item.get("key"), str)
    ]


def _entries(value: Any, where: str) -> list[_Entry]:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list of keys")
    return [_entry(item, f"{where}[{index}]") for index, item in enumerate(value)]


def _entry(item: Any, where: str) -> _Entry:
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: expected a mapping with name and key (or sha256)")
    unknown = set(item) - {"name", "key", "sha256", "scopes", "personas"}
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"{where}.name: required, letters, digits, '.', '_', '@' or '-' (at most 64)"
        )
    key, sha = item.get("key"), item.get("sha256")
    if (key is None) == (sha is None):
        raise ConfigError(f"{where}: give exactly one of key and sha256")
    if key is not None and (not isinstance(key, str) or len(key) < 16):
        raise ConfigError(f"{where}.key: must be text of at least 16 characters")
    if sha is not None and (not isinstance(sha, str) or not _HEX64.fullmatch(sha.lower())):
        raise ConfigError(f"{where}.sha256: must be 64 hex digits (the key's SHA-256)")
    digest = hash_key(key) if isinstance(key, str) else str(sha).lower()
    scopes = item.get("scopes", list(SCOPES))
    if not isinstance(scopes, list) or not all(scope in KNOWN_SCOPES for scope in scopes):
        raise ConfigError(f"{where}.scopes: a list of {', '.join(KNOWN_SCOPES)}")
    personas = item.get("personas")
    if personas is not None and (
        not isinstance(personas, list) or not all(isinstance(p, str) for p in personas)
    ):
        raise ConfigError(f"{where}.personas: a list of persona ids")
    principal = Principal(
        f"key:{name}",
        scopes=frozenset(scopes),
        personas=frozenset(personas) if personas is not None else None,
    )
    return _Entry(bytes.fromhex(digest), principal)
