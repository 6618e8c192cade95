"""The agents file's ``catalogs:``: each AI Catalog's A2A agents brought in as outside agents.

A catalog is read at start-up (all in parallel); each A2A agent it lists becomes an outside
agent named ``{prefix}-{slug}`` with the catalog's credential and the default timeouts,
its card as the catalog carries it (or fetched from the entry's ``url``). A catalog that
cannot be read then is logged and read again, at most every
:data:`~persona_agent.collab.agent_client.CARD_RETRY` seconds, when a persona that names
one of its agents is offered its tools or calls it, as a card is. A catalog that is no
catalog, or whose signature does not verify, is logged as an error and not read again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx

from persona_agent.a2a.catalog_reader import CatalogAgent, CatalogError, fetch_catalog
from persona_agent.collab.agent_client import CARD_RETRY, CARD_TIMEOUT
from persona_agent.collab.agent_credentials import AgentCredentials, CredentialError
from persona_agent.collab.agents_file import AGENT_NAME, AgentConfig, CatalogConfig

__all__ = ["AgentCatalogs", "AgentSink"]

logger = logging.getLogger(__name__)

AgentSink = Callable[[str, AgentConfig, "dict[str, Any] | None"], bool]
"""Adds one outside agent (name, configuration, its card when the catalog carries it);
False when the name is taken."""


class _Catalog:
    def __init__(self, name: str, config: CatalogConfig) -> None:
        self.name = name
        self.config = config
        self.prefix = f"{config.prefix or name}-"
        self.read = False
        self.failed_at: float | None = None
        self.given_up = False
        self.lock = asyncio.Lock()


class AgentCatalogs:
    """The catalogs of the agents file; ``add`` takes each agent they bring in."""

    def __init__(
        self,
        catalogs: dict[str, CatalogConfig],
        add: AgentSink,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._catalogs = [_Catalog(name, config) for name, config in catalogs.items()]
        self._add = add
        self._clock = clock
        self._pending: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Read every catalog; one that cannot be read is logged (and read again later)."""
        await asyncio.gather(*(self._read(catalog) for catalog in self._catalogs))

    def _wanted(self, name: str) -> list[_Catalog]:
        """The catalogs not read yet that could bring in the agent ``name`` (by its prefix),
        and may be asked again now."""
        now = self._clock()
        return [
            catalog
            for catalog in self._catalogs
            if not catalog.read
            and not catalog.given_up
            and name.startswith(catalog.prefix)
            and (catalog.failed_at is None or now - catalog.failed_at >= CARD_RETRY)
        ]

    def read_soon(self, name: str) -> None:
        """In the background, read again a catalog that could bring in ``name``."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop: the next call reads it
            return
        for catalog in self._wanted(name):
            if catalog.lock.locked():
                continue
            task = loop.create_task(self._read(catalog))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def ensure(self, name: str) -> None:
        """Read now a catalog that could bring in ``name`` (before a call of it)."""
        await asyncio.gather(*(self._read(catalog) for catalog in self._wanted(name)))

    async def aclose(self) -> None:
        for task in list(self._pending):
            task.cancel()
        await asyncio.gather(*self._pending, return_exceptions=True)

    async def _read(self, catalog: _Catalog) -> None:
        async with catalog.lock:
            if catalog.read:
                return
            config = catalog.config
            try:
                headers = await _headers(config)
                timeout = httpx.Timeout(CARD_TIMEOUT)
                async with httpx.AsyncClient(headers=headers, timeout=timeout) as http:
                    found = await fetch_catalog(
                        http, config.url, require_signature=config.signed, jwks_url=config.jwks_url
                    )
            except CatalogError as error:
                catalog.failed_at = self._clock()
                catalog.given_up = not error.transient
                again = "read again when one of its agents is called" if error.transient else ""
                log = logger.warning if error.transient else logger.error
                log("Agents file, catalog %r: %s%s", catalog.name, error, again and f"; {again}")
                return
            catalog.read = True
            added = [agent for agent in found.agents if self._bring(catalog, agent)]
            logger.info(
                "Agents file, catalog %r: %d outside agent(s) from %s%s: %s",
                catalog.name,
                len(added),
                config.url,
                " (signature verified)" if found.signed else "",
                ", ".join(catalog.prefix + agent.name for agent in added) or "none",
            )

    def _bring(self, catalog: _Catalog, agent: CatalogAgent) -> bool:
        config = catalog.config
        if config.include is not None and agent.name not in config.include:
            return False
        if agent.name in config.exclude:
            return False
        name = catalog.prefix + agent.name
        if not AGENT_NAME.match(name) or "__" in name:
            logger.warning(
                "Agents file, catalog %r: the agent %r is skipped: its name %r is not "
                "^[a-zA-Z0-9_-]{1,57}$ (give the catalog a shorter prefix)",
                catalog.name,
                agent.display_name,
                name,
            )
            return False
        if not self._add(name, config.agent(agent.url or agent.identifier), agent.card):
            logger.warning(
                "Agents file, catalog %r: the agent %r is skipped: an agent named %r exists",
                catalog.name,
                agent.display_name,
                name,
            )
            return False
        return True


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
