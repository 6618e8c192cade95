"""Whose memory a turn reads and adds to, the engine's view of memory (no memory by
default), and forgetting a deleted persona's: this module loads nothing of the memory's
own (numpy, a model), so a hub without memory pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from persona_agent.conversations.summary_store import forget_persona_summaries
from persona_agent.db import GroupCommitWriter, Sql
from persona_agent.personas.model import Persona

if TYPE_CHECKING:  # the memory's own modules load numpy: not imported here
    from persona_agent.memory.embeddings import Embedder

__all__ = ["NO_MEMORY", "MemoryScope", "Recalled", "TurnMemory", "forget_persona"]


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Whose memory: a persona's with one caller (``owner``; empty: anonymous, and then
    only the one ``conversation``)."""

    persona_id: str
    owner: str
    conversation: str
    shared: tuple[str, ...] = ()
    """Other personas whose memory of the same caller (the same conversation when
    anonymous) this one reads too: those it shares memory with, each naming the other."""
    token_budget: int | None = None
    """Tokens of remembered text a prompt takes at most (``None``: the hub's default)."""
    max_items: int | None = None
    """Items a prompt takes at most (``None``: the hub's default)."""

    @property
    def conversation_only(self) -> bool:
        """Whether this memory is of one conversation only (an anonymous caller's, not
        shared): a new conversation's is then empty, and needs no search."""
        return not self.owner and not self.shared

    def of(self, persona_id: str) -> MemoryScope:
        """The same caller's memory with ``persona_id`` alone."""
        return MemoryScope(persona_id, self.owner, self.conversation)


class Recalled(tuple[str, ...]):
    """What memory brings to a turn's prompt, each item marked with who said it; and in
    :attr:`left_out`, the best items its budgets (tokens, items) left out, each with why:
    for the prompt's record (docs/prompt.md)."""

    left_out: tuple[tuple[str, str], ...]

    def __new__(
        cls, items: Iterable[str] = (), left_out: Iterable[tuple[str, str]] = ()
    ) -> Recalled:
        recalled = super().__new__(cls, items)
        recalled.left_out = tuple(left_out)
        return recalled


class TurnMemory:
    """No memory (the default): nothing recalled, nothing kept."""

    embedder: Embedder | None = None
    """What embeds text for this memory (``None``: no memory, nothing to search with)."""

    def scope(self, persona: Persona, owner: str, conversation: str) -> MemoryScope | None:
        """Whose memory a turn of ``persona`` with the caller ``owner`` (empty: anonymous,
        in ``conversation``) reads and adds to; ``None``: the persona remembers nothing
        (its file's ``memory.enabled`` is false)."""
        if not persona.memory.enabled:
            return None
        return MemoryScope(persona.id, owner, conversation)

    async def recall(
        self, scope: MemoryScope, message: str, in_prompt: Sequence[str], *, new: bool = False
    ) -> Recalled:
        """What to add to the prompt of the turn answering ``message``, each item marked
        with who said it; ``in_prompt``: texts the prompt has already; ``new``: the
        turn opens its conversation."""
        return Recalled()

    async def keep(self, scope: MemoryScope, said: Sequence[dict[str, Any]]) -> None:
        """Remember a completed turn's messages (the user's and the persona's answers)."""

    def find_personas(self, lookup: Callable[[str], Persona | None]) -> None:
        """Where the served personas are found (the registry's), for sharing memory
        between them; without it, no persona shares."""

    async def aclose(self) -> None:
        """Stop any background work (the hub is stopping; the turns are done)."""


NO_MEMORY = TurnMemory()

_FORGET = Sql("DELETE FROM pa_memories WHERE persona_id = :persona_id", table="pa_memories")


async def forget_persona(writer: GroupCommitWriter, persona_id: str) -> None:
    """Delete every memory of a persona and the running summaries of its conversations (it
    was deleted: a new persona with its id must not remember its callers), whether memory
    is on now or was before."""
    await writer.write(_FORGET, [{"persona_id": persona_id}])
    await forget_persona_summaries(writer, persona_id)
