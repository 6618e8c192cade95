"""The hub's AI Catalog (``/.well-known/ai-catalog.json``): every agent it serves, one entry each.

The document follows the AI Catalog specification (Agentic AI Foundation's ``ai-catalog``,
``specVersion`` 1.0; docs/discovery.md names the text it follows): a ``host`` (the hub,
identified by its base URL) and one entry per persona and panel, plus the hub's own
directory agent, each an A2A agent card carried inline (``data``: exactly what the
card's URL serves, signatures included) and identified by its card URL. An entry names
its type both as ``mediaType`` (the specification's text) and as ``type`` (the name its
ADR 0014 gives it), so a reader of either draft finds it.

With card signing on, the catalog is the specification's Trusted Catalog: every entry and
the host carry a signed Trust Manifest (:mod:`persona_agent.security.catalog_signing`).

The document is built again only when a persona comes, goes or changes, and its ``ETag``
with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from persona_agent.a2a.cards import CARD_PATH, persona_url
from persona_agent.a2a.discovery.directory import HubDirectory
from persona_agent.a2a.services import HubServices
from persona_agent.personas.model import Persona
from persona_agent.security.catalog_signing import (
    CARD_RELATION,
    ENTRIES_RELATION,
    digest,
    entries_digest,
    signed_manifest,
)

__all__ = [
    "A2A_CARD_TYPE",
    "AI_CATALOG_PATH",
    "CATALOG_MEDIA_TYPE",
    "SPEC_VERSION",
    "BuiltCatalog",
    "HubCatalog",
]

AI_CATALOG_PATH = "/.well-known/ai-catalog.json"
"""Where the hub serves its catalog (the specification's well-known URI)."""
CATALOG_MEDIA_TYPE = "application/ai-catalog+json"
A2A_CARD_TYPE = "application/a2a-agent-card+json"
"""An entry that is an A2A agent card."""
SPEC_VERSION = "1.0"


class _Served(Protocol):
    """A served persona, as the registry's ``PersonaApp`` is."""

    @property
    def persona(self) -> Persona: ...

    @property
    def card_dict(self) -> dict[str, Any]: ...

    @property
    def card_etag(self) -> str: ...


@dataclass(frozen=True, slots=True)
class BuiltCatalog:
    key: tuple[object, ...]
    body: bytes
    """The document, as served."""
    etag: str


class HubCatalog:
    """The catalog of the personas ``apps`` gives (the registry's, asked on every request)
    and of the directory agent."""

    def __init__(
        self,
        apps: Callable[[], Sequence[_Served]],
        directory: HubDirectory,
        services: HubServices,
    ) -> None:
        self._apps = apps
        self._directory = directory
        self._services = services
        self._built: BuiltCatalog | None = None
        self._entries: dict[tuple[int, str], dict[str, Any]] = {}

    def current(self) -> BuiltCatalog:
        """The document and its ``ETag``, built again when a persona has come, gone or
        changed (each replacement is a new app)."""
        apps = self._apps()
        # The card's ETag, not the persona's version: a card also changes with the hub
        # (the gRPC server's address, known once it listens).
        key: tuple[object, ...] = tuple((app.persona.id, app.card_etag, id(app)) for app in apps)
        key += (self._directory.card_etag,)
        built = self._built
        if built is not None and built.key == key:
            return built
        body = json.dumps(self.document(apps), ensure_ascii=False, separators=(",", ":"))
        etag = f'W/"{hashlib.sha256(body.encode()).hexdigest()[:32]}"'
        self._built = BuiltCatalog(key, body.encode(), etag)
        return self._built

    def document(self, apps: Sequence[_Served]) -> dict[str, Any]:
        """The catalog as JSON: host, then the directory's entry and one per app."""
        base_url = self._directory.base_url
        directory = self._entry(self._directory.card_dict, f"{base_url}{CARD_PATH}", ["directory"])
        entries = [directory]
        kept: dict[tuple[int, str], dict[str, Any]] = {}
        for app in apps:
            # An unchanged persona's entry (its digest and signature) is the one built before.
            key = (id(app), app.card_etag)
            entry = self._entries.get(key)
            if entry is None:
                card_url = persona_url(base_url, app.persona.id).rstrip("/") + CARD_PATH
                tags = ["panel"] if app.persona.panel is not None else ["persona"]
                entry = self._entry(app.card_dict, card_url, tags)
            kept[key] = entry
            entries.append(entry)
        self._entries = kept
        provider = self._services.provider
        host: dict[str, Any] = {
            "displayName": provider.organization if provider is not None else "persona-agent",
            "identifier": base_url,
        }
        signer = self._services.signer
        if signer is not None:
            link = {"relation": ENTRIES_RELATION, "sourceId": base_url, "sourceDigest": ""}
            link["sourceDigest"] = entries_digest(entries)
            host["trustManifest"] = signed_manifest(base_url, [link], signer.sign_detached)
        return {"specVersion": SPEC_VERSION, "host": host, "entries": entries}

    def _entry(self, card: dict[str, Any], card_url: str, tags: list[str]) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "identifier": card_url,
            "displayName": card.get("name") or card_url,
            "mediaType": A2A_CARD_TYPE,
            "type": A2A_CARD_TYPE,
            "description": card.get("description", ""),
            "tags": tags,
        }
        if card.get("version"):
            entry["version"] = card["version"]
        entry["data"] = card
        signer = self._services.signer
        if signer is not None:
            link = {"relation": CARD_RELATION, "sourceId": card_url, "sourceDigest": digest(card)}
            entry["trustManifest"] = signed_manifest(card_url, [link], signer.sign_detached)
        return entry
