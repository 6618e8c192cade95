"""Every table of the hub, on :data:`persona_agent.db.metadata`: each is defined beside the
store that owns it, and this imports them all.

What Alembic compares with the database (``env.py``: autogenerate) and what the tests make
with ``create_all`` or compare with the revisions (``tests/migrations``): a table added in
a new owner is named here, or those would not see it (the test of the migrations fails).
"""

from __future__ import annotations

from sqlalchemy import Table

from persona_agent.chat.usage_table import usage_table
from persona_agent.cluster.tasks import replicas_table, task_events_table
from persona_agent.conversations.message_tables import messages_table, swipes_table
from persona_agent.conversations.prompt_table import prompts_table
from persona_agent.conversations.summary_table import summaries_table
from persona_agent.conversations.user_persona_table import user_personas_table
from persona_agent.db import metadata, push_callers_table, tasks_table
from persona_agent.knowledge.document_tables import document_chunks_table, documents_table
from persona_agent.media.media_table import media_table
from persona_agent.memory.memory_table import memories_table
from persona_agent.personas.stores.asset_table import persona_assets_table
from persona_agent.personas.stores.sql_writes import personas_table

__all__ = ["TABLES", "metadata"]

TABLES: tuple[Table, ...] = (
    tasks_table,
    push_callers_table,
    task_events_table,
    replicas_table,
    usage_table,
    personas_table,
    persona_assets_table,
    messages_table,
    swipes_table,
    summaries_table,
    user_personas_table,
    memories_table,
    documents_table,
    document_chunks_table,
    media_table,
    prompts_table,
)
"""The hub's tables, by owner: A2A tasks, replicas, usage, personas (and their CHARX
assets), conversations, memory,
knowledge, media."""
