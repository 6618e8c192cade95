"""Whether this process may take requests (``/readyz``): the database, the personas, the
model backend."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy import literal, select

from persona_agent.a2a.registry import A2ARegistry
from persona_agent.db import GroupCommitWriter
from persona_agent.llm.base import LLMBackend

__all__ = ["Readiness"]

logger = logging.getLogger(__name__)


class Readiness:
    """What ``/readyz`` checks; ``personas_loaded`` is set once start-up has put every
    persona in the registry."""

    def __init__(
        self,
        writer: GroupCommitWriter,
        registry: A2ARegistry,
        llm: LLMBackend,
        *,
        replica: str | None = None,
    ) -> None:
        self.llm = llm
        """The model backend, loaded by a probe when start-up did not load it."""
        self.personas_loaded = False
        self._writer = writer
        self._registry = registry
        self._replica = replica
        self._loading: asyncio.Task[None] | None = None

    async def check(self) -> tuple[dict[str, Any], list[str]]:
        """What the probe reports (personas served, replica, database, model), and what is
        not ready (``database``, ``personas``, ``llm``). A model backend not loaded starts
        loading (once at a time)."""
        not_ready: list[str] = []
        body: dict[str, Any] = {"personas": len(self._registry)}
        if self._replica is not None:
            body["replica"] = self._replica
        try:
            async with asyncio.timeout(2):
                await self._writer.fetch(select(literal(1)))
            body["database"] = "ok"
        except Exception as error:
            logger.warning("Readiness check: the database does not answer (%s)", error)
            body["database"] = "unreachable"
            not_ready.append("database")
        if not self.personas_loaded:
            not_ready.append("personas")
        llm = self.llm
        model: dict[str, Any] = {"backend": llm.name, "model": llm.default_model}
        if not llm.loaded:
            model["loaded"] = False
            not_ready.append("llm")
            if self._loading is None or self._loading.done():  # load it now (once at a time)
                self._loading = asyncio.create_task(_load_quietly(llm))
        body["llm"] = model
        return body, not_ready


async def _load_quietly(llm: LLMBackend) -> None:
    """Load the model backend for a readiness probe; a failure is logged (the probe keeps
    saying not ready, and the next one tries again)."""
    try:
        await llm.load()
    except Exception:
        logger.exception("Loading the model backend failed")
