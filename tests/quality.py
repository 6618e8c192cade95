"""The quality rules an embedded-model answer must pass (issue 4): it reads as the persona."""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["assert_reads_as_the_persona"]

_SCAFFOLDING = ("User:", "The following is a conversation", "<end_of_turn>", "<start_of_turn>")


def assert_reads_as_the_persona(answer: str, name: str, cap: int) -> None:
    """Words, at most ``cap`` of them, no prompt scaffolding, no markup, no sentence 3 times."""
    assert any(char.isalpha() for char in answer), f"empty answer: {answer!r}"
    assert len(answer.split()) <= cap, answer
    for scaffolding in (*_SCAFFOLDING, f"{name}:"):
        assert scaffolding not in answer, f"{scaffolding!r} in {answer!r}"
    assert not re.search(r"</?[A-Za-z][^>]*>", answer), f"markup in {answer!r}"
    sentences = [
        " ".join(re.sub(r"[^\w]+", " ", sentence.lower()).split())
        for sentence in re.split(r"(?<=[.!?])\s+", answer)
    ]
    counts = Counter(sentence for sentence in sentences if sentence)
    assert not counts or max(counts.values()) < 3, f"a sentence repeats: {answer!r}"
