"""An embedder reads a text's first :data:`EMBEDDED_CHARS` characters only: a 1 MiB
message searched with (memory, knowledge) held the interpreter's lock in the tokenizer for
2.6 s, and with it the event loop (issue 46.8)."""

from __future__ import annotations

import numpy as np
import pytest

from persona_agent.memory.embeddings import (
    EMBEDDED_CHARS,
    Embedder,
    HashingEmbedder,
    LocalModelEmbedder,
)


def long_message() -> tuple[str, str]:
    """A 1 MiB message whose first part speaks of apples and the rest of zebras."""
    head = ("apples orchards cider harvest " * 2000)[:EMBEDDED_CHARS]
    tail = "zebras stripes savanna herds " * 35_000
    return head + tail, head


@pytest.mark.parametrize("name", ["hashing", "wordllama"])
async def test_a_long_text_is_embedded_as_its_first_characters(name: str) -> None:
    embedder: Embedder = HashingEmbedder() if name == "hashing" else LocalModelEmbedder(name)
    text, head = long_message()
    assert len(text) > 1_000_000
    whole, first, tail = await embedder.embed([text, head, text[EMBEDDED_CHARS:]], query=True)
    assert np.allclose(whole, first)  # the zebras are never read
    assert float(np.dot(whole, tail)) < 0.9
