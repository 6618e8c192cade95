"""Settings of what the hub keeps: the database, conversation history, task listing,
retention, and each caller's storage quota.

A section of :class:`persona_agent.settings.Settings`, which is composed of them and read
once at the edge; each field is ``PERSONA_AGENT_<NAME>`` there.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings

__all__ = ["StoreSettings"]


class StoreSettings(BaseSettings):
    """What the hub keeps, and for how long."""

    database_url: str | None = None
    """SQLAlchemy async URL; default ``sqlite+aiosqlite:///<data_dir>/persona-agent.db``.
    With ``postgresql+asyncpg://...``, replicas on one database are one hub
    (docs/deployment.md)."""
    db_auto_upgrade: bool = True
    """Migrate the database to the newest schema at start-up. When false, start-up fails,
    naming ``persona-agent db upgrade``, if the database is not at the newest revision."""
    db_pool_size: int = Field(default=10, ge=1, le=1000)
    """PostgreSQL: connections each replica keeps open (SQLAlchemy's ``pool_size``)."""
    db_max_overflow: int = Field(default=20, ge=0, le=1000)
    """PostgreSQL: connections a replica may open beyond the pool under load."""
    replica_lease_seconds: float = Field(default=15.0, ge=1.0, le=3600.0)
    """PostgreSQL: a replica that sends no heartbeat for this long is lost, and its tasks
    still under way end ``failed`` (heartbeats every third of it)."""
    history_cache_size: int = Field(default=200, ge=1)
    """Conversations kept in memory; older ones are read back from the database."""
    history_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=1024 * 1024)
    """Bytes of conversation text kept in memory, at most (the oldest go first)."""
    history_max_messages: int = Field(default=50, ge=2)
    """Messages of a conversation sent to the model (the oldest are dropped first)."""
    prompt_records_kept: int = Field(default=20, ge=0, le=10_000)
    """Each answer's prompt by section (docs/prompt.md) is kept for the last this many
    answers of each conversation; 0: none kept."""
    task_listing: Literal["context", "off", "all"] = "context"
    """Who may list tasks over A2A: ``context`` (only the tasks of a contextId the caller
    names), ``off``, or ``all`` (every task of the persona: trusted networks only)."""
    max_id_length: int = Field(default=128, ge=36, le=1024)
    """Longest task, context, message or push-configuration id a client may send."""
    retention_task_days: float = Field(default=30.0, ge=0)
    """Tasks older than this (by their last status) are deleted; 0: kept however old."""
    retention_task_count: int = Field(default=100_000, ge=0)
    """Tasks kept at most, the newest; 0: no limit."""
    retention_task_bytes: int = Field(default=1024**3, ge=0)
    """Bytes of stored tasks kept at most, the newest; 0: no limit."""
    retention_message_count: int = Field(default=1_000_000, ge=0)
    """Conversation messages kept at most, the newest; 0: no limit."""
    retention_message_bytes: int = Field(default=1024**3, ge=0)
    """Bytes of conversation messages kept at most, the newest; 0: no limit."""
    retention_memory_days: float = Field(default=365.0, ge=0)
    """Memories remembered (or edited) longer ago than this are deleted; 0: kept however
    old."""
    retention_interval: float = Field(default=3600.0, gt=0)
    """Seconds between two retention sweeps (the first runs at start-up)."""
    # A caller's storage (docs/conversations.md, "Storage quotas"): a write past one is
    # refused (409), and retention trims a caller to it before the hub's limits.
    caller_max_conversations: int = Field(default=10_000, ge=0)
    """Conversations one caller keeps at most: starting, forking or importing one more is
    refused; 0: no limit."""
    caller_max_messages: int = Field(default=100_000, ge=0)
    """Conversation messages (and alternatives) one caller keeps at most: a fork or import
    past it is refused, and retention deletes the caller's oldest beyond it; 0: no limit."""
    caller_max_message_bytes: int = Field(default=100 * 1024**2, ge=0)
    """Bytes of conversation messages one caller keeps at most, as
    ``caller_max_messages``; 0: no limit."""
