"""Telling MCP clients that the personas changed: ``subscriptions/listen`` for 2026-07-28
clients, ``list_changed`` notifications on the sessions of handshake-era ones.

A persona created, changed or removed (REST, a file, another replica: the store's change
events) changes the tools and the card resources. Handshake-era sessions are kept as
requests name them (the most recent :data:`MAX_SESSIONS_HEARD`) and forgotten when they
close; on replicas, where they hold no session (:mod:`.mcp_stateless`), none is kept.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable

from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ToolsListChanged,
)

from persona_agent.personas.stores.store import PersonaChange, PersonaStore

__all__ = ["MAX_SESSIONS_HEARD", "ListChanges"]

MAX_SESSIONS_HEARD = 10_000
"""Handshake-era sessions told of persona changes at most (the most recent)."""


class ListChanges:
    """The clients to tell when the personas change, and telling them."""

    def __init__(self, store: PersonaStore | None) -> None:
        self._store = store
        self._bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self._bus)
        """The server's ``subscriptions/listen`` handler (2026-07-28 clients)."""
        self._sessions: OrderedDict[str, ServerSession] = OrderedDict()
        self._announcing: set[asyncio.Task[None]] = set()

    def subscribe(self) -> Callable[[], None]:
        """Hear the store's changes; what to call to stop."""
        if self._store is None:
            return lambda: None
        return self._store.subscribe(self.changed)

    def close(self) -> None:
        """Stop the announcements under way (end the listeners' streams first, with
        ``listen.close()``, while the session manager still runs)."""
        for task in list(self._announcing):
            task.cancel()

    def changed(self, _change: PersonaChange | None = None) -> None:
        """A persona came, changed or went: tell the clients their lists changed."""
        task = asyncio.ensure_future(self._announce())
        self._announcing.add(task)
        task.add_done_callback(self._announcing.discard)

    async def _announce(self) -> None:
        await self._bus.publish(ToolsListChanged())
        await self._bus.publish(ResourcesListChanged())
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
                await session.send_resource_list_changed()
            except Exception:  # the session ended: forget it
                self._sessions.pop(key, None)

    def heard(self, key: str, session: ServerSession) -> None:
        """A handshake-era session (``key``: its id, or ``stdio``) made a request."""
        self._sessions[key] = session
        self._sessions.move_to_end(key)
        if len(self._sessions) > MAX_SESSIONS_HEARD:
            self._sessions.popitem(last=False)

    def forget(self, key: str) -> None:
        """The session closed."""
        self._sessions.pop(key, None)
