"""The words of a text that carry its meaning: lowercased, the most common English words
(articles, pronouns, auxiliaries) left out. Keywords are searched by them, and a static
embedding model averages their vectors only (:mod:`persona_agent.memory.embeddings`)."""

from __future__ import annotations

import re

__all__ = ["STOP_WORDS", "content_text", "is_question", "speaks_of_self", "words"]

_WORD = re.compile(r"\w+", re.UNICODE)
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "do",
        "does",
        "did",
        "for",
        "from",
        "has",
        "have",
        "i",
        "i'm",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "can",
        "could",
        "would",
        "should",
        "about",
        "tell",
    ]
)
"""Words too common to find anything by."""


def words(text: str) -> list[str]:
    """The words of a text that count for keywords (lowercased, stop words left out)."""
    return [word for word in _WORD.findall(text.lower()) if word not in STOP_WORDS]


def content_text(text: str) -> str:
    """The text's words that count, joined by spaces; the text itself when none does (a
    message of stop words only is still embedded as it is)."""
    return " ".join(words(text)) or text


_FIRST_PERSON = frozenset(["i", "me", "my", "mine", "myself", "we", "us", "our", "ours"])


def speaks_of_self(text: str) -> bool:
    """Whether the text is said in the first person ("I", "my", "we"...): said by a
    caller, it tells something of the caller. English only: in another language no text
    does, and every statement then counts alike."""
    return not _FIRST_PERSON.isdisjoint(_WORD.findall(text.lower()))


def is_question(text: str) -> bool:
    """Whether the text ends with a question mark (any script's)."""
    return text.rstrip().endswith(("?", "\uff1f", "\u061f"))
