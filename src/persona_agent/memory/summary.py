"""The running summary: what has left a conversation's window, summarized by a model, so
that the prompt still carries the conversation's start (docs/memory.md).

After a turn, in the background, the messages that have left the window since the last
summary are summarized with it into a new one (old summary + evicted messages → new
summary), one run at a time per conversation, and stored with the conversation
(:mod:`persona_agent.conversations.summary_store`). The next turn's prompt carries it as a
section of its own. The turn never waits for it: a
run that fails is logged, and the next turn tries again from where the stored summary
ends.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any, Protocol

from persona_agent.conversations.summary_store import Evicted, Summary, SummaryStore
from persona_agent.personas.model import Persona

__all__ = [
    "FOLLOWING",
    "NONE_YET",
    "NO_SUMMARY",
    "SO_FAR",
    "SUMMARY_REQUEST",
    "Complete",
    "ConversationSummary",
    "Locks",
    "RunningSummary",
    "summary_request",
]

logger = logging.getLogger(__name__)

SUMMARY_REQUEST = "You keep the running summary of a conversation"
"""How a summarization request's system message begins."""
SO_FAR = "Summary so far:"
FOLLOWING = "Messages that follow it:"
NONE_YET = "(none yet)"

MESSAGE_CHARS = 2000
"""A message is summarized from its first 2,000 characters (about 500 tokens)."""
CHUNK_CHARS = 12_000
"""The evicted messages of one summarization request, at most (about 3,000 tokens, with
the summary so far and the instructions about 4,000): a request fits any chat model."""
MAX_CHUNKS = 4
"""Requests one run makes at most: a long backlog (memory turned on in a long
conversation) is worked through over the next turns."""
_READ = 400  # messages read from the database for one run
_SENTENCE_END = re.compile(r"[.!?…](?=\s|$)")


class Complete(Protocol):
    """One request to a chat model (the hub's backend: :mod:`persona_agent.hub.memory_part`
    makes it): its whole answer's text; raises when the model fails."""

    async def __call__(
        self, persona_id: str, model: str, messages: list[dict[str, Any]], max_tokens: int
    ) -> str: ...


class Locks(Protocol):
    """Per-key locks (the engine's conversation locks, across replicas on PostgreSQL)."""

    def hold(self, key: str) -> AbstractAsyncContextManager[None]: ...


class ConversationSummary:
    """No running summary (the default): nothing in the prompt, nothing made."""

    async def current(self, conversation: str, *, new: bool = False) -> str:
        """The summary of what has left the conversation's window ("" when none, and
        for a ``new`` conversation)."""
        return ""

    def after_turn(
        self, persona: Persona, conversation: str, owner: str, model: str, messages: int = 0
    ) -> None:
        """A turn of the conversation was written to its history: bring its summary up to
        date in the background (``model``: the turn's; ``messages``: how many the
        conversation has when known, a new one's, else 0)."""

    async def settled(self) -> None:
        """Return once no summary is being made."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The hub's life: summaries still being made are abandoned when it closes."""
        yield


NO_SUMMARY = ConversationSummary()


class RunningSummary(ConversationSummary):
    """Summaries made by ``complete`` with ``model`` (``None``: the turn's model) and kept
    in ``store``, each within ``token_budget`` tokens (characters / 4, as the lorebook
    counts them), of the messages that leave windows of ``max_messages``.

    A run starts once ``batch`` messages (a fifth of the window, 2 to 10) have left the
    window since the last summary: a model call every few turns, not every turn; the few
    in between are found by memory's retrieval meanwhile. Runs of one conversation never
    overlap (a turn that ends while one runs starts another after it), nor across replicas
    when ``locks`` span them.
    """

    def __init__(
        self,
        store: SummaryStore,
        complete: Complete,
        *,
        max_messages: int,
        token_budget: int = 300,
        model: str | None = None,
        locks: Locks | None = None,
    ) -> None:
        self.store = store
        self.complete = complete
        self.max_messages = max_messages
        self.token_budget = token_budget
        self.model = model
        self.batch = max(2, min(10, max_messages // 5))
        self._locks = locks
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    async def current(self, conversation: str, *, new: bool = False) -> str:
        """As :meth:`ConversationSummary.current` (a new conversation's: not read); a
        database that fails leaves the turn without its summary (logged)."""
        if new:
            return ""
        try:
            return (await self.store.get(conversation)).text
        except Exception:
            logger.exception("conversation %s: its summary could not be read", conversation)
            return ""

    def after_turn(
        self, persona: Persona, conversation: str, owner: str, model: str, messages: int = 0
    ) -> None:
        if 0 < messages <= self.max_messages:  # none has left the window: nothing to do
            return
        if conversation in self._tasks:  # runs again once the one under way ends
            self._again.add(conversation)
            return
        run = self._run(persona, conversation, owner, self.model or model)
        self._tasks[conversation] = asyncio.create_task(run, name=f"summary of {conversation}")

    async def settled(self) -> None:
        while pending := [task for task in self._tasks.values() if not task.done()]:
            await asyncio.gather(*pending, return_exceptions=True)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            yield
        finally:  # a summary cut short is made again from the stored one at the next turn
            tasks = list(self._tasks.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, persona: Persona, conversation: str, owner: str, model: str) -> None:
        try:
            while True:
                self._again.discard(conversation)
                hold = self._locks.hold if self._locks is not None else None
                try:
                    async with hold(f"{conversation}#summary") if hold else nullcontext():
                        await self.update(persona, conversation, owner, model)
                except Exception as error:
                    logger.warning(
                        "persona %s: the summary of a conversation could not be made (%s); "
                        "the next turn tries again",
                        persona.id,
                        getattr(error, "message", None) or repr(error),
                    )
                    return
                if conversation not in self._again:
                    return
        finally:  # no await since the last look at _again: a turn ending now starts a run
            self._tasks.pop(conversation, None)
            self._again.discard(conversation)

    async def update(self, persona: Persona, conversation: str, owner: str, model: str) -> None:
        """Summarize what has left the conversation's window since its summary (nothing
        while fewer than ``batch`` messages have), in requests of at most
        :data:`CHUNK_CHARS`, :data:`MAX_CHUNKS` of them; each new summary is stored at once.

        Raises:
            Exception: the model or the database failed (what was stored before stays).
        """
        start = await self.store.window_start(conversation, self.max_messages)
        if start is None:
            return
        summary = await self.store.get(conversation)
        for chunk in range(MAX_CHUNKS):
            evicted = await self.store.evicted(conversation, summary.upto_seq, start, _READ)
            lines, upto = _lines(evicted, persona.name.strip())
            if chunk == 0 and len(_said(evicted)) < self.batch:
                return
            if not lines:
                if upto > summary.upto_seq:  # only tool calls and results left: skipped
                    await self._save(
                        conversation, persona, owner, Summary(summary.text, upto), summary
                    )
                return
            request = summary_request(persona.name.strip(), summary.text, lines, self.token_budget)
            text = await self.complete(persona.id, model, request, self.token_budget)
            text = bounded(text, self.token_budget * 4)
            if not text:
                raise ValueError("the model's summary is empty")
            new = Summary(text, upto)
            await self._save(conversation, persona, owner, new, summary)
            summary = new
            if upto >= evicted[-1].seq and len(evicted) < _READ:
                return

    async def _save(
        self, conversation: str, persona: Persona, owner: str, new: Summary, old: Summary
    ) -> None:
        await self.store.save(
            conversation, persona_id=persona.id, owner=owner, summary=new, previous=old
        )


def summary_request(
    name: str, summary: str, lines: Sequence[str], token_budget: int
) -> list[dict[str, Any]]:
    """The chat messages that ask a model for the new summary: the summary so far (or
    none) and the messages that follow it, each a line ``Speaker: text``."""
    words = max(20, token_budget * 3 // 4)
    instructions = (
        f"{SUMMARY_REQUEST} between a user and {name}. From the summary so far and the "
        "messages that follow it, write the new summary: keep what still matters (what the "
        "user said about themselves, their questions, names, numbers and dates, what was "
        "decided or promised) and add what the new messages say. Plain prose in the third "
        f"person, at most {words} words, no preamble."
    )
    asked = f"{SO_FAR}\n{summary or NONE_YET}\n\n{FOLLOWING}\n" + "\n".join(lines)
    return [{"role": "system", "content": instructions}, {"role": "user", "content": asked}]


def bounded(text: str, max_chars: int) -> str:
    """``text`` on one line within ``max_chars``: cut after its last whole sentence that
    fits (or at the limit, marked ``…``, when the first sentence does not)."""
    flat = " ".join(text.split())
    if len(flat) <= max_chars:
        return flat
    head = flat[:max_chars]
    ends = [match.end() for match in _SENTENCE_END.finditer(head)]
    return head[: ends[-1]] if ends else head[: max_chars - 1].rstrip() + "…"


def _said(evicted: Sequence[Evicted]) -> list[Evicted]:
    """The user's and the persona's messages with text (not tool calls and results)."""
    return [
        item
        for item in evicted
        if item.message.get("role") in ("user", "assistant")
        and isinstance(item.message.get("content"), str)
        and item.message["content"].strip()
    ]


def _lines(evicted: Sequence[Evicted], name: str) -> tuple[list[str], int]:
    """The lines of one request (``User: …``, ``Name: …``) from the oldest evicted messages
    on, within :data:`CHUNK_CHARS`, and the seq of the last message they cover (tool
    messages among them are passed over); ``(.., 0)`` when none is evicted."""
    lines: list[str] = []
    used, upto = 0, 0
    texts = {id(item) for item in _said(evicted)}
    for item in evicted:
        if id(item) in texts:
            speaker = "User" if item.message["role"] == "user" else name
            text = " ".join(str(item.message["content"]).split())
            if len(text) > MESSAGE_CHARS:
                text = text[: MESSAGE_CHARS - 1].rstrip() + "…"
            line = f"{speaker}: {text}"
            if lines and used + len(line) > CHUNK_CHARS:
                break
            lines.append(line)
            used += len(line) + 1
        upto = item.seq
    return lines, upto
