"""Reading an AI Catalog as a client: its A2A agents, each with a short name, signatures checked.

Used by ``persona-agent chat --agent CATALOG_URL`` and by the agents file's ``catalogs:``.
A catalog of any publisher is read, not only a hub's: ``specVersion`` 1.x (a higher major
version is refused, as the specification asks), entries typed ``application/a2a-agent-card+json``
(in ``mediaType``, or ``type`` as its ADR 0014 renames it), each carrying its card inline
(``data``) or by reference (``url``); other entries (MCP servers, nested catalogs) are
skipped. A signed catalog (its host's Trust Manifest has a ``signature``) is verified
against the JWK set at its origin's ``/.well-known/jwks.json`` (or ``jwks_url``), and
refused when it does not verify.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from persona_agent.a2a.ai_catalog import A2A_CARD_TYPE, CATALOG_MEDIA_TYPE
from persona_agent.security.card_signing import JWKS_PATH
from persona_agent.security.catalog_signing import CatalogSignatureError, verify_catalog

__all__ = [
    "Catalog",
    "CatalogAgent",
    "CatalogError",
    "catalog_agents",
    "choose_agent",
    "fetch_catalog",
    "is_catalog",
    "slug",
]

_NOT_SLUG = re.compile(r"[^a-z0-9]+")


class CatalogError(Exception):
    """A catalog that cannot be read or used; ``transient``: worth asking again later (no
    connection, 5xx, 429)."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True, slots=True)
class CatalogAgent:
    """One A2A agent of a catalog."""

    name: str
    """A slug of its display name (``[a-z0-9-]``), unique in the catalog."""
    display_name: str
    description: str
    identifier: str
    url: str | None
    """Where its card is, for an entry by reference."""
    card: dict[str, Any] | None
    """Its card, for an entry that carries it (``data``)."""


@dataclass(frozen=True, slots=True)
class Catalog:
    url: str
    agents: list[CatalogAgent]
    signed: bool
    """Whether its signatures were checked (and verified)."""


def slug(text: str) -> str:
    """``Ada Lovelace (tutor)`` -> ``ada-lovelace-tutor``."""
    return _NOT_SLUG.sub("-", text.lower()).strip("-")


def is_catalog(data: object) -> bool:
    """Whether a JSON document is an AI Catalog (``specVersion`` and ``entries``)."""
    return isinstance(data, dict) and "specVersion" in data and "entries" in data


def _entry_type(entry: dict[str, Any]) -> str:
    given = entry.get("type", entry.get("mediaType"))
    return given.split(";", 1)[0].strip().lower() if isinstance(given, str) else ""


def catalog_agents(data: object, source: str) -> list[CatalogAgent]:
    """The A2A agents of a catalog document, in its order.

    Raises:
        CatalogError: not a catalog, a major version this reader does not know, or an A2A
            entry without its required fields; the message names ``source``, the entry and
            the field.
    """
    if not is_catalog(data):
        raise CatalogError(f"{source}: not an AI Catalog (no specVersion and entries)")
    assert isinstance(data, dict)
    version, entries = data["specVersion"], data["entries"]
    if not isinstance(version, str) or not re.fullmatch(r"\d+\.\d+", version):
        raise CatalogError(f"{source}: specVersion must be 'Major.Minor', not {version!r}")
    if int(version.split(".")[0]) != 1:
        raise CatalogError(f"{source}: specVersion {version} is not supported (1.x is)")
    if not isinstance(entries, list):
        raise CatalogError(f"{source}: entries must be a list")
    agents: list[CatalogAgent] = []
    taken: set[str] = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or _entry_type(entry) != A2A_CARD_TYPE:
            continue
        agent = _agent(entry, f"{source}: entries[{index}]", taken)
        taken.add(agent.name)
        agents.append(agent)
    return agents


def _agent(entry: dict[str, Any], where: str, taken: set[str]) -> CatalogAgent:
    for field in ("identifier", "displayName"):
        if not isinstance(entry.get(field), str) or not entry[field]:
            raise CatalogError(f"{where}: field {field} is required (a string)")
    url, card = entry.get("url"), entry.get("data")
    if (url is None) == (card is None):
        raise CatalogError(f"{where}: exactly one of url and data is required")
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise CatalogError(f"{where}: field url must be an http(s) URL")
    if card is not None and not isinstance(card, dict):
        raise CatalogError(f"{where}: field data must be an agent card (an object)")
    base = slug(entry["displayName"]) or slug(entry["identifier"]) or "agent"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    description = entry.get("description")
    return CatalogAgent(
        name=name,
        display_name=entry["displayName"],
        description=description if isinstance(description, str) else "",
        identifier=entry["identifier"],
        url=url,
        card=card,
    )


def choose_agent(catalog: Catalog, wanted: str) -> CatalogAgent:
    """The agent named ``wanted``: its name, identifier or display name (any case).

    Raises:
        CatalogError: none is, naming the catalog's agents.
    """
    for agent in catalog.agents:
        if wanted.lower() in (agent.name, agent.identifier.lower(), agent.display_name.lower()):
            return agent
    names = ", ".join(agent.name for agent in catalog.agents) or "none"
    raise CatalogError(f"No agent '{wanted}' in the AI Catalog at {catalog.url} (it has: {names})")


async def _get_json(http: httpx.AsyncClient, url: str, what: str, accept: str) -> Any:
    try:
        response = await http.get(url, headers={"Accept": accept})
    except httpx.HTTPError as error:
        raise CatalogError(f"{what} {url} cannot be read ({error!r})", transient=True) from None
    if response.status_code != 200:
        transient = response.status_code == 429 or response.status_code >= 500
        raise CatalogError(
            f"{what} {url} answered HTTP {response.status_code}", transient=transient
        )
    try:
        return response.json()
    except ValueError:
        raise CatalogError(f"{what} {url} is not JSON") from None


async def fetch_catalog(
    http: httpx.AsyncClient,
    url: str,
    *,
    require_signature: bool = False,
    jwks_url: str | None = None,
) -> Catalog:
    """Read the catalog at ``url`` and check its signatures when it is signed (or when
    ``require_signature``: then an unsigned one is refused).

    Raises:
        CatalogError: it cannot be read, is no catalog, or does not verify.
    """
    data = await _get_json(http, url, "The AI Catalog", f"{CATALOG_MEDIA_TYPE}, application/json")
    agents = catalog_agents(data, f"The AI Catalog {url}")
    host = data.get("host")
    manifest = host.get("trustManifest") if isinstance(host, dict) else None
    signed = isinstance(manifest, dict) and "signature" in manifest
    if not signed:
        if require_signature:
            raise CatalogError(f"The AI Catalog {url} is not signed, and a signed one is required")
        return Catalog(url, agents, signed=False)
    parts = urlsplit(url)
    keys_url = jwks_url or f"{parts.scheme}://{parts.netloc}{JWKS_PATH}"
    jwks = await _get_json(http, keys_url, "The key set of the AI Catalog,", "application/json")
    try:
        verify_catalog(data, jwks, required=True)
    except CatalogSignatureError as error:
        raise CatalogError(f"The AI Catalog {url} does not verify: {error}") from None
    return Catalog(url, agents, signed=True)
