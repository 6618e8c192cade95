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
    left_out: list[tuple[StoredPassage, str]] | None = None,
) -> list[StoredPassage]:
    """The passages most relevant to ``query``, the best first, until the next would
    overflow ``token_budget`` (a shorter one further down may still fit); at most
    ``max_passages``. ``left_out``, when given, receives the best passages the budgets
    left out, each with why (at most ``max_passages`` of them), for the prompt's record."""
    if not passages or token_budget <= 0 or max_passages <= 0:
        return []
    cosine = vectors @ query_vector.reshape(-1)
    keywords = keyword_scores(query, [passage.text for passage in passages])
    fused = _rank_points(cosine) + _rank_points(keywords)
    chosen: list[StoredPassage] = []
    dropped = left_out if left_out is not None else []
    used = 0
    for index in np.argsort(-fused, kind="stable"):
        full = len(chosen) >= max_passages
        if fused[index] <= 0 or (full and (left_out is None or len(dropped) >= max_passages)):
            break
        passage = passages[int(index)]
        cost = estimate_tokens(passage.text)
        over = not full and used + cost > token_budget
        if over or full:
            if left_out is not None and len(dropped) < max_passages:
                why = (
                    f"over the knowledge budget of {token_budget} tokens a turn"
                    if over
                    else f"over the knowledge limit of {max_passages} passages a turn"
                )
                dropped.append((passage, why))
            continue
        chosen.append(passage)
        used += cost
    return chosen
