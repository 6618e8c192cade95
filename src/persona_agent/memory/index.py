"""One scope's remembered messages searchable in memory: their vectors as one matrix and
their words as an inverted index, both extended row by row as the scope grows.

A search then costs a matrix-vector product and the postings of the query's few words,
not a pass of Python over every row (what made a turn with 10,000 remembered messages
take ~200 ms). The keyword scores are the same BM25 as
:func:`persona_agent.memory.retrieval.keyword_scores` (a test holds them equal).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from persona_agent.memory.embeddings import Vectors
from persona_agent.memory.words import is_question, speaks_of_self, words

__all__ = ["FACT_ROLE", "PRIORS", "Remembered", "ScopeIndex", "prior"]

_ROW_BYTES = 160
"""What a row costs beside its text and vector (its :class:`Remembered`, its seq, its
length), an estimate for the cache's bound."""
_TERM_BYTES = 200
"""What a distinct word costs in the index (its key, its two arrays), an estimate."""


@dataclass(frozen=True, slots=True)
class Remembered:
    """One remembered message: who said it, its text, when (ms since the epoch)."""

    role: str
    text: str
    at_ms: int


FACT_ROLE = "fact"
"""The role of a row the ``remember`` tool kept (the turns' rows are ``user`` and
``assistant``)."""

PRIORS = {"told": 1.0, "said": 0.5, "asked": 0.3}
"""How much a remembered message's rank counts, by what it is: what a caller *told* of
itself (a statement in the first person, or a fact the persona chose to remember) fully,
anything else *said* (the persona's answers, a caller's other statements) half, a
question *asked* (by either side) a third: a new message looks for what answers it, and
questions do not. Measured (bench/memory.py, wordllama): of 50 planted facts asked back in
a new conversation, 40 found with every message alike, 46 with these."""


def prior(item: Remembered) -> float:
    """The :data:`PRIORS` weight of ``item``."""
    if is_question(item.text):
        return PRIORS["asked"]
    if item.role == FACT_ROLE or (item.role == "user" and speaks_of_self(item.text)):
        return PRIORS["told"]
    return PRIORS["said"]


class ScopeIndex:
    """Rows in the order added (oldest first), each with its seq in the database."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.items: list[Remembered] = []
        self.seqs: list[int] = []
        self._vectors = np.zeros((0, dimensions), dtype=np.float32)
        self._lengths = array("f")
        self._priors = array("f")
        self._postings: dict[str, tuple[array[int], array[int]]] = {}
        self._text_bytes = 0

    def __len__(self) -> int:
        return len(self.items)

    @property
    def vectors(self) -> Vectors:
        """One row per item (a view of the matrix, which grows by doubling)."""
        return self._vectors[: len(self.items)]

    @property
    def nbytes(self) -> int:
        """About what the index holds in memory (the cache's bound counts this)."""
        return (
            self._vectors.nbytes
            + self._text_bytes
            + _ROW_BYTES * len(self.items)
            + sum(len(docs) * 8 for docs, _ in self._postings.values())
            + _TERM_BYTES * len(self._postings)
        )

    def extend(self, rows: Iterable[tuple[int, Remembered, Vectors]]) -> None:
        """Add rows (seq, item, unit vector), in seq order."""
        for seq, item, vector in rows:
            row = len(self.items)
            if row == len(self._vectors):
                grown = np.zeros((max(16, 2 * row), self.dimensions), dtype=np.float32)
                grown[:row] = self._vectors
                self._vectors = grown
            self._vectors[row] = vector
            self.items.append(item)
            self.seqs.append(seq)
            self._text_bytes += len(item.text)
            lowered = item.text.lower()
            self._lengths.append(lowered.count(" ") + 1)  # as keyword_scores counts it
            self._priors.append(prior(item))
            counts: dict[str, int] = {}
            for word in words(lowered):
                counts[word] = counts.get(word, 0) + 1
            for word, count in counts.items():
                posting = self._postings.get(word)
                if posting is None:
                    posting = self._postings[word] = (array("i"), array("i"))
                posting[0].append(row)
                posting[1].append(count)

    def newest(self, rows: int) -> ScopeIndex:
        """An index of the newest ``rows`` rows only (the scope outgrew its bound)."""
        kept = ScopeIndex(self.dimensions)
        start = max(0, len(self.items) - rows)
        kept.extend(
            (self.seqs[i], self.items[i], self._vectors[i]) for i in range(start, len(self.items))
        )
        return kept

    @property
    def priors(self) -> np.ndarray:
        """Each row's :func:`prior`."""
        return np.frombuffer(self._priors, dtype=np.float32)

    def cosine(self, query: Vectors) -> np.ndarray:
        """Each row's cosine with the query's unit vector."""
        if not self.items:
            return np.zeros(0, dtype=np.float32)
        # Not BLAS's matrix product: its threads, on cores busy with the hub's other
        # work, made a search of 10,000 rows 10x slower (measured: 4 ms against 0.4).
        products: np.ndarray = np.einsum("ij,j->i", self.vectors, query.reshape(-1))
        return products

    def keyword_scores(self, query: str) -> np.ndarray:
        """BM25 (k1 1.2, b 0.75) of each row for the query's words, from the postings."""
        count = len(self.items)
        scores = np.zeros(count, dtype=np.float64)
        if not count:
            return scores
        lengths = np.frombuffer(self._lengths, dtype=np.float32).astype(np.float64)
        average = max(float(lengths.mean()), 1.0)
        for term in set(words(query)):
            posting = self._postings.get(term)
            if posting is None:
                continue
            rows = np.frombuffer(posting[0], dtype=np.int32)
            frequency = np.frombuffer(posting[1], dtype=np.int32).astype(np.float64)
            idf = math.log(1 + (count - len(rows) + 0.5) / (len(rows) + 0.5))
            norm = 1.2 * (0.25 + 0.75 * lengths[rows] / average)
            scores[rows] += idf * frequency * 2.2 / (frequency + norm)
        return scores
