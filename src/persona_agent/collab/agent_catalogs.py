"""The agents file's ``catalogs:``: each AI Catalog's A2A agents brought in as outside agents.

The catalogs are read in the background from start-up on (all in parallel), so that a slow
one never delays the hub, each within
:class:`~persona_agent.a2a.discovery.catalog_reader.CatalogLimits`;
each A2A agent a catalog lists becomes an outside agent named ``{prefix}-{slug}`` with the
default timeouts, its card as the catalog carries it (or fetched from the entry's ``url``),
called where :meth:`AgentReach.of_catalog <persona_agent.collab.agent_reach.AgentReach.of_catalog>`
allows: the catalog's credential goes to the catalog's own origin alone. An entry that
cannot be used is skipped with a warning. A catalog that cannot be read then is logged and
read again, at most every :data:`~persona_agent.collab.agent_client.CARD_RETRY` seconds,
when a persona that names one of its agents is offered its tools or calls it, as a card is.
A catalog that is no catalog, over a limit, or whose signature does not verify is logged as
an error and not read again. Nothing a catalog holds stops the hub.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import httpx
from pydantic import ValidationError

from persona_agent.a2a.discovery.catalog_reader import (
    DEFAULT_CATALOG_LIMITS,
    CatalogAgent,
    CatalogError,
    CatalogLimits,
    fetch_catalog,
)
from persona_agent.collab.agent_client import CARD_RETRY, CARD_TIMEOUT, RemoteAgent
from persona_agent.collab.agent_credentials import AgentCredentials, CredentialError
from persona_agent.collab.agent_exchange import Failure
from persona_agent.collab.agent_reach import AgentReach
from persona_agent.collab.agents_file import AGENT_NAME, AgentConfig, CatalogConfig

__all__ = ["AgentCatalogs", "AgentSink", "read_cards"]

logger = logging.getLogger(__name__)

AgentSink = Callable[[str, AgentConfig, "dict[str, Any] | None", AgentReach], RemoteAgent | None]
"""Adds one outside agent (name, configuration, its card when the catalog carries it, where
it may be called); ``None`` when the name is taken."""

CARD_READS = 8
"""Cards of a catalog's agents read at once, after the catalog."""


class _Catalog:
    def __init__(self, name: str, config: CatalogConfig, allowed_hosts: Iterable[str]) -> None:
        self.name = name
        self.config = config
        self.reach = AgentReach.of_catalog(config, allowed_hosts)
        self.prefix = f"{config.prefix or name}-"
        self.read = False
        self.failed_at: float | None = None
        self.given_up = False
        self.reading: asyncio.Task[None] | None = None
        """The read under way (one at a time)."""


class AgentCatalogs:
    """The catalogs of the agents file; ``add`` takes each agent they bring in.
    ``limits``: how much of a catalog is read; ``allowed_hosts``: hosts its agents may be
    on though not public (``PERSONA_AGENT_AGENT_URL_ALLOWED_HOSTS``)."""

    def __init__(
        self,
        catalogs: dict[str, CatalogConfig],
        add: AgentSink,
        *,
        clock: Callable[[], float] = time.monotonic,
        limits: CatalogLimits = DEFAULT_CATALOG_LIMITS,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        allowed = tuple(allowed_hosts)
        self._catalogs = [_Catalog(name, config, allowed) for name, config in catalogs.items()]
        self._add = add
        self._clock = clock
        self._limits = limits
        self._pending: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Begin reading every catalog, in the background: start-up does not wait for them.
        One that cannot be read is logged (and read again later)."""
        for catalog in self._catalogs:
            self._spawn(catalog)

    async def settled(self) -> None:
        """Wait for the reads under way (tests; a call waits by :meth:`ensure`)."""
        await asyncio.gather(*self._pending, return_exceptions=True)

    def _spawn(self, catalog: _Catalog) -> asyncio.Task[None]:
        """The catalog's read under way, or a new one."""
        if catalog.reading is None or catalog.reading.done():
            catalog.reading = asyncio.get_running_loop().create_task(self._read(catalog))
            self._pending.add(catalog.reading)
            catalog.reading.add_done_callback(self._pending.discard)
        return catalog.reading

    def may_bring(self, name: str) -> bool:
        """Whether a catalog not read yet (and not given up) may bring in ``name``."""
        return any(
            name.startswith(c.prefix) and not c.read and not c.given_up for c in self._catalogs
        )

    def _wanted(self, name: str) -> list[_Catalog]:
        """The catalogs not read yet that could bring in the agent ``name`` (by its prefix),
        being read now or that may be asked again now."""
        now = self._clock()
        return [
            catalog
            for catalog in self._catalogs
            if not catalog.read
            and not catalog.given_up
            and name.startswith(catalog.prefix)
            and (
                catalog.failed_at is None
                or now - catalog.failed_at >= CARD_RETRY
                or (catalog.reading is not None and not catalog.reading.done())
            )
        ]

    def read_soon(self, name: str) -> None:
        """In the background, read again a catalog that could bring in ``name``."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no event loop: the next call reads it
            return
        for catalog in self._wanted(name):
            self._spawn(catalog)

    async def ensure(self, name: str) -> None:
        """Read now a catalog that could bring in ``name`` (before a call of it), or wait
        for its read under way (which a canceled call leaves running)."""
        reads = [self._spawn(catalog) for catalog in self._wanted(name)]
        await asyncio.gather(*(asyncio.shield(read) for read in reads))

    async def aclose(self) -> None:
        for task in list(self._pending):
            task.cancel()
        await asyncio.gather(*self._pending, return_exceptions=True)

    async def _read(self, catalog: _Catalog) -> None:
        if catalog.read:
            return
        try:
            await self._read_now(catalog)
        except CatalogError as error:
            catalog.failed_at = self._clock()
            catalog.given_up = not error.transient
            again = "read again when one of its agents is called" if error.transient else ""
            log = logger.warning if error.transient else logger.error
            log("Agents file, catalog %r: %s%s", catalog.name, error, again and f"; {again}")
        except Exception:  # whatever a catalog holds, the hub goes on without it
            catalog.failed_at = self._clock()
            catalog.given_up = True
            logger.exception("Agents file, catalog %r: it could not be used", catalog.name)

    async def _read_now(self, catalog: _Catalog) -> None:
        config = catalog.config
        headers = await _headers(config)
        timeout = httpx.Timeout(CARD_TIMEOUT)
        async with httpx.AsyncClient(timeout=timeout) as http:
            found = await fetch_catalog(
                http,
                config.url,
                require_signature=config.signed,
                jwks_url=config.jwks_url,
                limits=self._limits,
                headers=headers,
            )
        catalog.read = True
        for skipped in found.skipped:
            logger.warning("Agents file, catalog %r: skipped the entry %s", catalog.name, skipped)
        brought = [(agent, self._bring(catalog, agent)) for agent in found.agents]
        added = [agent for agent, remote in brought if remote is not None]
        await read_cards([remote for _, remote in brought if remote is not None], CARD_READS)
        logger.info(
            "Agents file, catalog %r: %d outside agent(s) from %s%s: %s",
            catalog.name,
            len(added),
            config.url,
            " (signature verified)" if found.signed else "",
            ", ".join(catalog.prefix + agent.name for agent in added) or "none",
        )

    def _bring(self, catalog: _Catalog, agent: CatalogAgent) -> RemoteAgent | None:
        """The outside agent of ``agent`` (``None``: left out, or skipped with a warning)."""
        config = catalog.config
        if config.include is not None and agent.name not in config.include:
            return None
        if agent.name in config.exclude:
            return None
        name = catalog.prefix + agent.name
        if not AGENT_NAME.match(name) or "__" in name:
            logger.warning(
                "Agents file, catalog %r: the agent %r is skipped: its name %r is not "
                "^[a-zA-Z0-9_-]{1,57}$ (give the catalog a shorter prefix)",
                catalog.name,
                agent.display_name,
                name,
            )
            return None
        try:  # an inline card's source is the catalog itself
            agent_config = config.agent(agent.url or config.url)
        except ValidationError as error:
            logger.warning(
                "Agents file, catalog %r: the agent %r is skipped: %s",
                catalog.name,
                agent.display_name,
                error.errors()[0]["msg"] if error.errors() else error,
            )
            return None
        remote = self._add(name, agent_config, agent.card, catalog.reach)
        if remote is None:
            logger.warning(
                "Agents file, catalog %r: the agent %r is skipped: an agent named %r exists",
                catalog.name,
                agent.display_name,
                name,
            )
        return remote


async def read_cards(agents: list[RemoteAgent], at_once: int) -> None:
    """Read the agents' cards (those a catalog carries are only checked), ``at_once`` at a
    time; one that cannot be read is logged, its tool still offered, and read again when
    its agent is called."""
    gate = asyncio.Semaphore(at_once)

    async def read(agent: RemoteAgent) -> None:
        async with gate:
            try:
                await agent.client()
            except Failure as failure:
                logger.warning(
                    "Outside agent %s: %s; its tool is offered, and the card is read again "
                    "when it is called",
                    agent.name,
                    failure.message,
                )

    await asyncio.gather(*(read(agent) for agent in agents))


async def _headers(config: CatalogConfig) -> dict[str, str]:
    """The catalog's credential, as a header (an API key in ``X-API-Key`` unless the file
    names its header)."""
    if config.auth is None:
        return {}
    from a2a.types.a2a_pb2 import AgentCard

    async with httpx.AsyncClient(timeout=CARD_TIMEOUT) as http:
        try:
            name, value = await AgentCredentials(config.auth, http).header(AgentCard())
        except CredentialError as error:
            raise CatalogError(error.message, transient=error.transient) from None
    return {name: value}
