"""The passages of a persona's documents most relevant to a message: by meaning (cosine
of vectors) and by keywords (BM25), fused by rank, within a token budget; memory's
retrieval (:mod:`persona_agent.memory.retrieval`) applied to passages.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from persona_agent.knowledge.document_store import StoredPassage
from persona_agent.memory.embeddings import Vectors
from persona_agent.memory.retrieval import estimate_tokens, keyword_scores

__all__ = ["select_passages", "vectors_of"]

_RANK_CONSTANT = 60
"""Reciprocal rank fusion's constant, as memory's."""


def vectors_of(passages: Sequence[StoredPassage]) -> Vectors:
    """The passages' vectors, one row each."""
    if not passages:
        return np.zeros((0, 0), dtype=np.float32)
    return np.vstack([np.frombuffer(p.vector, dtype="<f4") for p in passages]).astype(
        np.float32, copy=False
    )


def _rank_points(scores: np.ndarray) -> np.ndarray:
    ranking = np.argsort(-scores, kind="stable")
    points = np.zeros(len(scores), dtype=np.float64)
    points[ranking] = 1 / (_RANK_CONSTANT + np.arange(len(scores)))
    return np.where(scores > 0, points, 0.0)


def select_passages(
    query: str,
    query_vector: Vectors,
    passages: Sequence[StoredPassage],
    vectors: Vectors,
    *,
    token_budget: int,
    max_passages: int,
) -> list[StoredPassage]:
    """The passages most relevant to ``query``, the best first, until the next would
    overflow ``token_budget`` (a shorter one further down may still fit); at most
    ``max_passages``."""
    if not passages or token_budget <= 0 or max_passages <= 0:
        return []
    cosine = vectors @ query_vector.reshape(-1)
    keywords = keyword_scores(query, [passage.text for passage in passages])
    fused = _rank_points(cosine) + _rank_points(keywords)
    chosen: list[StoredPassage] = []
    used = 0
    for index in np.argsort(-fused, kind="stable"):
        if fused[index] <= 0:
            break
        passage = passages[int(index)]
        cost = estimate_tokens(passage.text)
        if used + cost > token_budget:
            continue
        chosen.append(passage)
        used += cost
        if len(chosen) >= max_passages:
            break
    return chosen
