"""Reading an AI Catalog as a client: its A2A agents, each with a short name, signatures checked.

Used by ``persona-agent chat --agent CATALOG_URL`` and by the agents file's ``catalogs:``.
A catalog of any publisher is read, not only a hub's: ``specVersion`` 1.x (a higher major
version is refused, as the specification asks), entries typed ``application/a2a-agent-card+json``
(in ``mediaType``, or ``type`` as its ADR 0014 renames it), each carrying its card inline
(``data``) or by reference (``url``); other entries (MCP servers, nested catalogs) are
skipped. A signed catalog (its host's Trust Manifest has a ``signature``) is verified
against the JWK set at its origin's ``/.well-known/jwks.json`` (or ``jwks_url``), and
refused when it does not verify.

A catalog is another party's document: it is read within :class:`CatalogLimits` (bytes, as
they stream; nesting; entries; time), and an A2A entry that cannot be used (no
``displayName``, a URN ``identifier`` with neither ``url`` nor ``data``, a field of the
wrong type) is skipped, named in :attr:`Catalog.skipped`, never the whole catalog.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from persona_agent.a2a.discovery.ai_catalog import A2A_CARD_TYPE, CATALOG_MEDIA_TYPE
from persona_agent.security.card_signing import JWKS_PATH
from persona_agent.security.catalog_signing import CatalogSignatureError, verify_catalog
from persona_agent.security.egress.bounded_reads import (
    IDENTITY,
    ReadRefused,
    parse_json,
    read_capped,
)

__all__ = [
    "DEFAULT_CATALOG_LIMITS",
    "Catalog",
    "CatalogAgent",
    "CatalogError",
    "CatalogLimits",
    "catalog_agents",
    "choose_agent",
    "fetch_catalog",
    "is_catalog",
    "open_catalog",
    "read_document",
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
class CatalogLimits:
    """How much of a catalog is read (``PERSONA_AGENT_CATALOG_MAX_*``, docs/security.md)."""

    max_bytes: int = 8 * 1024 * 1024
    """Bytes of the document (and of its key set); the connection is closed past them."""
    max_depth: int = 32
    """Lists and objects nested in one another (a catalog of inline cards needs ~12)."""
    max_entries: int = 1000
    """Entries; a catalog of more is refused."""
    seconds: float = 30.0
    """The whole read: the document, its key set, the check of its signatures."""


DEFAULT_CATALOG_LIMITS = CatalogLimits()


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
    skipped: tuple[str, ...] = ()
    """The A2A entries that could not be used, each with why (``entries[3]
    ('urn:x:ada'): exactly one of url and data is required``)."""


def slug(text: str) -> str:
    """``Ada Lovelace (tutor)`` -> ``ada-lovelace-tutor``."""
    return _NOT_SLUG.sub("-", text.lower()).strip("-")


def is_catalog(data: object) -> bool:
    """Whether a JSON document is an AI Catalog (``specVersion`` and ``entries``)."""
    return isinstance(data, dict) and "specVersion" in data and "entries" in data


def _entry_type(entry: dict[str, Any]) -> str:
    given = entry.get("type", entry.get("mediaType"))
    return given.split(";", 1)[0].strip().lower() if isinstance(given, str) else ""


def catalog_agents(
    data: object, source: str, *, max_entries: int = 1000
) -> tuple[list[CatalogAgent], list[str]]:
    """The A2A agents of a catalog document, in its order, and the A2A entries skipped
    (each named, with why).

    Raises:
        CatalogError: not a catalog, a major version this reader does not know, or more
            than ``max_entries`` entries; the message names ``source``.
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
    if len(entries) > max_entries:
        raise CatalogError(
            f"{source}: it lists {len(entries):,} entries, more than the limit of "
            f"{max_entries:,} (PERSONA_AGENT_CATALOG_MAX_ENTRIES)"
        )
    agents: list[CatalogAgent] = []
    skipped: list[str] = []
    taken: set[str] = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or _entry_type(entry) != A2A_CARD_TYPE:
            continue
        try:
            agent = _agent(entry, taken)
        except ValueError as error:
            skipped.append(f"entries[{index}]{_named(entry)}: {error}")
            continue
        taken.add(agent.name)
        agents.append(agent)
    return agents, skipped


def _named(entry: dict[str, Any]) -> str:
    """`` ('urn:x:ada')``: the entry's identifier (else display name) as it gave it."""
    for field in ("identifier", "displayName"):
        value = entry.get(field)
        if isinstance(value, str) and value:
            return f" ({value[:120]!r})"
    return ""


def _agent(entry: dict[str, Any], taken: set[str]) -> CatalogAgent:
    """One A2A entry as an agent.

    Raises:
        ValueError: a field it needs is missing or of the wrong type (the message names it).
    """
    for field in ("identifier", "displayName"):
        if not isinstance(entry.get(field), str) or not entry[field]:
            raise ValueError(f"field {field} is required (a string)")
    url, card = entry.get("url"), entry.get("data")
    if (url is None) == (card is None):
        raise ValueError("exactly one of url and data is required")
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise ValueError("field url must be an http(s) URL")
    if card is not None and not isinstance(card, dict):
        raise ValueError("field data must be an agent card (an object)")
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


_SETTING = {"bytes": "PERSONA_AGENT_CATALOG_MAX_BYTES", "depth": "PERSONA_AGENT_CATALOG_MAX_DEPTH"}
"""The setting of each limit a document may be over."""


async def read_document(
    http: httpx.AsyncClient,
    url: str,
    what: str,
    accept: str,
    limits: CatalogLimits,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """The JSON document at ``url``, read within ``limits`` (bytes as they stream, then
    nesting); ``headers``: more for this request (the catalog's credential).

    Raises:
        CatalogError: it cannot be read (``transient`` for no connection, 429, 5xx), is
            over a limit, or is not JSON; the message names ``what`` and ``url``.
    """
    sent = {"Accept": accept, **IDENTITY, **(headers or {})}
    try:
        async with http.stream("GET", url, headers=sent) as response:
            if response.status_code != 200:
                transient = response.status_code == 429 or response.status_code >= 500
                raise CatalogError(
                    f"{what} {url} answered HTTP {response.status_code}", transient=transient
                )
            body = await read_capped(response, limits.max_bytes)
    except httpx.HTTPError as error:
        raise CatalogError(f"{what} {url} cannot be read ({error!r})", transient=True) from None
    except ReadRefused as error:
        raise _refused(what, url, error) from None
    try:  # in a thread: parsing and walking a few MB holds the event loop otherwise
        return await asyncio.to_thread(parse_json, body, limits.max_depth)
    except ReadRefused as error:
        raise _refused(what, url, error) from None


def _refused(what: str, url: str, error: ReadRefused) -> CatalogError:
    setting = f" ({_SETTING[error.limit]})" if error.limit in _SETTING else ""
    return CatalogError(f"{what} {url} is refused: {error}{setting}")


async def fetch_catalog(
    http: httpx.AsyncClient,
    url: str,
    *,
    require_signature: bool = False,
    jwks_url: str | None = None,
    limits: CatalogLimits = DEFAULT_CATALOG_LIMITS,
    headers: Mapping[str, str] | None = None,
) -> Catalog:
    """Read the catalog at ``url`` within ``limits`` and check its signatures when it is
    signed (or when ``require_signature``: then an unsigned one is refused). ``headers``
    go with the catalog's request alone (not to its key set).

    Raises:
        CatalogError: it cannot be read, is over a limit, is no catalog, or does not verify.
    """
    try:
        async with asyncio.timeout(limits.seconds):
            data = await read_document(
                http,
                url,
                "The AI Catalog",
                f"{CATALOG_MEDIA_TYPE}, application/json",
                limits,
                headers,
            )
            return await open_catalog(
                http,
                url,
                data,
                require_signature=require_signature,
                jwks_url=jwks_url,
                limits=limits,
            )
    except TimeoutError:
        raise CatalogError(
            f"The AI Catalog {url} was not read within {limits.seconds:g} s "
            "(PERSONA_AGENT_CATALOG_READ_SECONDS)",
            transient=True,
        ) from None


async def open_catalog(
    http: httpx.AsyncClient,
    url: str,
    data: object,
    *,
    require_signature: bool = False,
    jwks_url: str | None = None,
    limits: CatalogLimits = DEFAULT_CATALOG_LIMITS,
) -> Catalog:
    """The catalog ``data`` read from ``url``, its signatures checked (as
    :func:`fetch_catalog`, for a document already read).

    Raises:
        CatalogError: as :func:`fetch_catalog`.
    """
    agents, skipped = catalog_agents(data, f"The AI Catalog {url}", max_entries=limits.max_entries)
    assert isinstance(data, dict)  # a catalog
    host = data.get("host")
    manifest = host.get("trustManifest") if isinstance(host, dict) else None
    signed = isinstance(manifest, dict) and "signature" in manifest
    if not signed:
        if require_signature:
            raise CatalogError(f"The AI Catalog {url} is not signed, and a signed one is required")
        return Catalog(url, agents, signed=False, skipped=tuple(skipped))
    parts = urlsplit(url)
    keys_url = jwks_url or f"{parts.scheme}://{parts.netloc}{JWKS_PATH}"
    what = "The key set of the AI Catalog,"
    jwks = await read_document(http, keys_url, what, "application/json", limits)
    try:
        await asyncio.to_thread(verify_catalog, data, jwks, required=True)
    except CatalogSignatureError as error:
        raise CatalogError(f"The AI Catalog {url} does not verify: {error}") from None
    return Catalog(url, agents, signed=True, skipped=tuple(skipped))
