"""Whether this process may take requests (``/readyz``): the database, the personas, the
model backend."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from persona_agent.a2a.registry import A2ARegistry
from persona_agent.db import GroupCommitWriter, Sql
from persona_agent.errors import LLMError
from persona_agent.llm.base import LLMBackend

__all__ = ["Readiness"]

logger = logging.getLogger(__name__)

_PING = Sql("SELECT 1")


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
        self._llm_error = ""  # why the last load failed

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
                await self._writer.fetch(_PING)
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
            if self._llm_error:
                model["error"] = self._llm_error
            not_ready.append("llm")
            if self._loading is None or self._loading.done():  # load it now (once at a time)
                self._loading = asyncio.create_task(self._load_quietly())
        body["llm"] = model
        return body, not_ready

    async def _load_quietly(self) -> None:
        """Load the model backend for a readiness probe; a failure is logged and kept for
        the next probe to report (which tries again)."""
        try:
            await self.llm.load()
            self._llm_error = ""
        except LLMError as error:  # a missing or damaged model file, say: named in the message
            if error.message != self._llm_error:
                logger.error("The model backend could not be loaded: %s", error.message)
            self._llm_error = error.message
        except Exception:
            logger.exception("Loading the model backend failed")
