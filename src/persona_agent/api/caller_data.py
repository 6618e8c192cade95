"""What the hub keeps of one identified caller, and forgetting all of it (the right to be
forgotten: ``DELETE /api/v1/memories``, docs/memory.md).

Per caller the hub keeps: its memories with each persona (``pa_memories``, by owner) and
the running summaries of its conversations (``pa_summaries``, by owner), its
conversations with each persona (``pa_messages``, keyed ``{persona}:@{caller}:{contextId}``,
and the alternatives of their answers, ``pa_swipes``: :meth:`ConversationHistory.forget_caller`
deletes both) and its tasks (``pa_tasks``, owned by ``{persona}:{caller}``: each holds the
messages of its exchange), the documents it attached to its conversations (``pa_documents``),
and its saved user persona and its conversations' (``pa_user_personas``).
Push-notification configs go with their tasks at the next retention sweep. The usage
records keep no caller; the audit log keeps the caller's name, and records the
forgetting itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from persona_agent.a2a.tasks.task_store import SqlTaskStore
from persona_agent.chat.history import ConversationHistory
from persona_agent.conversations.keys import conversation_key
from persona_agent.conversations.user_persona import UserPersonas
from persona_agent.knowledge.document_store import KnowledgeStore
from persona_agent.memory.records import MemoryRecords

__all__ = ["CallerData", "Forgotten"]


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What was deleted of a caller (rows counted just before their deletion)."""

    memories: int
    conversations: int
    messages: int
    tasks: int
    documents: int
    user_personas: int


class CallerData:
    """Everything the hub stores of one identified caller, across every persona."""

    def __init__(
        self,
        records: MemoryRecords,
        history: ConversationHistory,
        tasks: SqlTaskStore,
        documents: KnowledgeStore,
        user_personas: UserPersonas,
    ) -> None:
        self.records = records
        self._user_personas = user_personas
        self._history = history
        self._tasks = tasks
        self._documents = documents

    async def forget(self, caller: str) -> Forgotten:
        """Delete ``caller``'s memories, conversations, tasks, the documents it
        attached to its conversations and its user personas, with every persona.

        A turn of the caller's that is still being answered may remember its exchange
        after this: the caller asks again once it has ended (the answer counts rows)."""
        memories = await self.records.forget_owner(caller)
        prefix = conversation_key(caller, "")
        conversations, messages = await self._history.forget_caller(prefix)
        tasks = await self._tasks.forget_caller(caller)
        documents = await self._documents.forget_conversations(prefix)
        users = await self._user_personas.forget_caller(caller, prefix)
        return Forgotten(memories, conversations, messages, tasks, documents, users)
