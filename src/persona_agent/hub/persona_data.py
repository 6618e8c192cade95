"""What goes with a deleted persona: its tasks, its conversations, its usage records,
what it remembers of its callers and its knowledge documents.

A persona's tasks and history are keyed by its id, so a new persona given the id of a
deleted one would find them (and could continue them). When the persona store reports a
deletion (REST, CLI or a file removed from the watched directory), both are deleted; the
REST API waits for that before answering a delete, and before creating a persona with
an id whose deletion is still being carried out.
"""

from __future__ import annotations

import asyncio
import logging

from persona_agent.a2a.tasks.task_store import SqlTaskStore
from persona_agent.chat.history import ConversationHistory
from persona_agent.chat.usage_log import UsageLog
from persona_agent.conversations.user_persona import UserPersonas
from persona_agent.db import GroupCommitWriter
from persona_agent.knowledge.document_store import KnowledgeStore
from persona_agent.memory.scope import forget_persona
from persona_agent.personas.stores.asset_store import PersonaAssets
from persona_agent.personas.stores.store import PersonaChange

__all__ = ["DeletedPersonaData"]

logger = logging.getLogger(__name__)


class DeletedPersonaData:
    """Subscribed to the persona store: deletes a deleted persona's tasks and history."""

    def __init__(
        self,
        task_store: SqlTaskStore,
        history: ConversationHistory,
        usage: UsageLog | None = None,
        *,
        memories: GroupCommitWriter | None = None,
        documents: KnowledgeStore | None = None,
        user_personas: UserPersonas | None = None,
        assets: PersonaAssets | None = None,
    ) -> None:
        """``memories``: the database whose memories of the persona go too;
        ``documents``: where its knowledge documents go from; ``user_personas``: where its
        conversations' user personas go from; ``assets``: where its CHARX assets go from."""
        self._assets = assets
        self._user_personas = user_personas
        self._memories = memories
        self._documents = documents
        self._task_store = task_store
        self._history = history
        self._usage = usage
        self._pending: dict[str, asyncio.Task[None]] = {}

    def on_change(self, change: PersonaChange) -> None:
        if change.kind != "delete":
            return
        persona_id = change.persona_id
        previous = self._pending.get(persona_id)
        task = asyncio.create_task(self._forget(persona_id, previous))
        self._pending[persona_id] = task
        task.add_done_callback(lambda done: self._done(persona_id, done))

    async def settled(self, persona_id: str) -> None:
        """Return once the deletion of this persona's data, if one is under way, is done."""
        task = self._pending.get(persona_id)
        if task is not None:
            await asyncio.shield(task)

    async def aclose(self) -> None:
        """Finish every deletion under way."""
        if self._pending:
            await asyncio.gather(*self._pending.values(), return_exceptions=True)

    async def _forget(self, persona_id: str, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        try:
            await self._task_store.forget_persona(persona_id)
            await self._history.forget_persona(persona_id)
            if self._usage is not None:
                await self._usage.forget_persona(persona_id)
            if self._memories is not None:
                await forget_persona(self._memories, persona_id)
            if self._documents is not None:
                await self._documents.forget_persona(persona_id)
            if self._user_personas is not None:
                await self._user_personas.forget_persona(persona_id)
            if self._assets is not None:
                await self._assets.forget_persona(persona_id)
        except Exception:
            logger.exception("Could not delete the tasks and history of persona '%s'", persona_id)
            raise
        logger.info("Deleted the tasks and conversations of persona '%s'", persona_id)

    def _done(self, persona_id: str, task: asyncio.Task[None]) -> None:
        if self._pending.get(persona_id) is task:
            del self._pending[persona_id]
        if not task.cancelled():
            task.exception()  # reported by _forget's log
