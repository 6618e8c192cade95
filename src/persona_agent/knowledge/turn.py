"""The engine's view of knowledge documents: the files a turn brings, the passages found
for it, and no knowledge at all (a hub built without). This module loads nothing of the
knowledge's own (numpy, pypdf, a model): a hub whose personas have no documents pays
nothing for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "NO_KNOWLEDGE",
    "AttachedFile",
    "FoundPassages",
    "Passage",
    "TurnKnowledge",
    "numbered",
]


@dataclass(frozen=True, slots=True)
class AttachedFile:
    """A file sent with a message (an A2A file part), for the conversation's documents."""

    name: str
    media_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Passage:
    """A passage found for a turn: its document (id and name), its place in it
    (``position``, from 0; the PDF ``page`` it starts on), its text."""

    document_id: str
    name: str
    position: int
    page: int | None
    text: str

    def where(self) -> str:
        """Where it is, for the prompt: ``handbook.pdf, page 3, passage 7``."""
        page = f", page {self.page}" if self.page is not None else ""
        return f"{self.name}{page}, passage {self.position + 1}"

    def citation(self) -> dict[str, Any]:
        """Where it is, for the answer's metadata (``citations``)."""
        cited: dict[str, Any] = {
            "document": self.name,
            "documentId": self.document_id,
            "passage": self.position + 1,
        }
        if self.page is not None:
            cited["page"] = self.page
        return cited


class FoundPassages(tuple[Passage, ...]):
    """The passages found for a turn, the best first; and in :attr:`left_out`, the best
    ones the knowledge's budgets (tokens, passages) left out, each with why: for the
    prompt's record (docs/prompt.md)."""

    left_out: tuple[tuple[Passage, str], ...]

    def __new__(
        cls, found: Iterable[Passage] = (), left_out: Iterable[tuple[Passage, str]] = ()
    ) -> FoundPassages:
        passages = super().__new__(cls, found)
        passages.left_out = tuple(left_out)
        return passages


def numbered(found: tuple[Passage, ...]) -> tuple[str, ...]:
    """The passages for the prompt, each opened by its number and where it is."""
    return tuple(
        f"[{number}] ({passage.where()}) {passage.text}" for number, passage in enumerate(found, 1)
    )


class TurnKnowledge:
    """No knowledge: nothing found, and a file attached to a conversation is refused."""

    async def for_turn(
        self,
        persona_id: str,
        conversation: str,
        message: str,
        files: Sequence[AttachedFile] = (),
    ) -> FoundPassages:
        """Attach ``files`` to ``conversation`` (the engine's conversation key), then the
        passages of the persona's documents and the conversation's most relevant to
        ``message``, the best first, within the knowledge's token budget.

        Raises:
            DocumentError: a file cannot be taken (its name and the reason said; none of
                the turn's files is stored then).
        """
        if files:
            from persona_agent.errors import DocumentError

            raise DocumentError(f"{files[0].name}: this hub takes no documents")
        return FoundPassages()


NO_KNOWLEDGE = TurnKnowledge()
