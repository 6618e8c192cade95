"""Hybrid retrieval: the remembered messages most relevant to a new one, by meaning
(cosine of vectors) and by keywords (BM25), fused by rank, within a token budget.

No model is called here: the vectors are given, the keywords are words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from persona_agent.memory.embeddings import Vectors
from persona_agent.memory.index import Remembered, ScopeIndex
from persona_agent.memory.words import words

__all__ = ["estimate_tokens", "keyword_scores", "search", "select_remembered"]

_RANK_CONSTANT = 60
"""Reciprocal rank fusion's constant (the usual one): a rank r adds 1 / (60 + r)."""


def estimate_tokens(text: str) -> int:
    """Characters / 4, rounded up (the lorebook's rule: no tokenizer fits every model)."""
    return math.ceil(len(text) / 4)


def keyword_scores(query: str, texts: Sequence[str]) -> np.ndarray:
    """BM25 (k1 1.2, b 0.75) of each text for the query's words (a text's length counted
    in spaces: only the query's few words are looked for, each text is not split)."""
    terms = set(words(query))
    scores = np.zeros(len(texts), dtype=np.float64)
    if not terms or not texts:
        return scores
    lowered = [text.lower() for text in texts]
    lengths = np.array([text.count(" ") + 1 for text in lowered], dtype=np.float64)
    average = max(float(lengths.mean()), 1.0)
    for term in terms:
        word = re.compile(rf"(?<!\w){re.escape(term)}(?!\w)")
        frequency = np.array(
            [len(word.findall(text)) if term in text else 0 for text in lowered],
            dtype=np.float64,
        )
        containing = int(np.count_nonzero(frequency))
        if not containing:
            continue
        idf = math.log(1 + (len(texts) - containing + 0.5) / (containing + 0.5))
        scores += idf * frequency * 2.2 / (frequency + 1.2 * (0.25 + 0.75 * lengths / average))
    return scores


_CANDIDATES = 256
"""How deep each ranking is read: an item below rank 256 in both would add less than
1 / 316 twice, after hundreds better (a turn chooses 8)."""


def _rank_points(scores: np.ndarray, depth: int = _CANDIDATES) -> dict[int, float]:
    """The reciprocal-rank points of the ``depth`` best items by ``scores`` (none for a
    score of zero or less: that ranking did not find it), by position; of equal scores,
    the lower position ranks first. Linear in the items (no full sort)."""
    found = np.flatnonzero(scores > 0)
    if len(found) > depth:
        found = found[np.argpartition(-scores[found], depth - 1)[:depth]]
    ranking = found[np.lexsort((found, -scores[found]))]
    return {int(item): 1 / (_RANK_CONSTANT + rank) for rank, item in enumerate(ranking)}


def select_remembered(
    query: str,
    query_vector: Vectors,
    items: Sequence[Remembered],
    vectors: Vectors,
    *,
    token_budget: int,
    max_items: int,
    exclude: frozenset[str] = frozenset(),
    near_duplicate: float = 1.0,
    left_out: list[tuple[Remembered, str]] | None = None,
) -> list[Remembered]:
    """:func:`search` over ``items`` (newest first) and their ``vectors``, indexed here."""
    if not items:
        return []
    index = ScopeIndex(vectors.shape[1])  # oldest first, as the database's rows come
    index.extend((row, items[row], vectors[row]) for row in reversed(range(len(items))))
    return search(
        index,
        query,
        query_vector,
        token_budget=token_budget,
        max_items=max_items,
        exclude=exclude,
        near_duplicate=near_duplicate,
        left_out=left_out,
    )


def search(
    index: ScopeIndex,
    query: str,
    query_vector: Vectors,
    *,
    token_budget: int,
    max_items: int,
    exclude: frozenset[str] = frozenset(),
    near_duplicate: float = 1.0,
    left_out: list[tuple[Remembered, str]] | None = None,
) -> list[Remembered]:
    """The items most relevant to ``query``, fused from the cosine ranking and the
    keyword ranking (an item only one ranking finds counts there alone), weighed by what
    each is (:func:`~persona_agent.memory.index.prior`), the best first, until the next
    would overflow ``token_budget``; at most ``max_items``. Items whose text is in
    ``exclude`` (already in the prompt) are left out, and so are those whose cosine with
    one chosen is over ``near_duplicate`` (a message said again in other words would take
    the place of another: measured in bench/memory.py, 29 of 50 planted facts found
    without it, 42 with it). Of equal items, the newer comes first. ``left_out``, when
    given, receives the best items the budgets left out, each with why (over the tokens,
    or past the items: at most ``max_items`` of them), for the prompt's record."""
    if not len(index) or token_budget <= 0 or max_items <= 0:
        return []
    # Newest first: of two equal scores, the newer ranks higher.
    cosine = index.cosine(query_vector)[::-1]
    keywords = index.keyword_scores(query)[::-1]
    fused = _rank_points(cosine)
    for position, points in _rank_points(keywords).items():
        fused[position] = fused.get(position, 0.0) + points
    last = len(index) - 1
    priors = index.priors
    for position in fused:  # what was told of the caller first, questions last
        fused[position] *= float(priors[last - position])
    chosen: list[Remembered] = []
    chosen_rows: list[int] = []
    used = 0
    seen: set[str] = set()
    vectors = index.vectors
    dropped = left_out if left_out is not None else []
    for position in sorted(fused, key=lambda p: (-fused[p], p)):
        full = len(chosen) >= max_items
        if full and (left_out is None or len(dropped) >= max_items):
            break
        row = last - position
        item = index.items[row]
        if item.text in exclude or item.text in seen:
            continue
        cost = estimate_tokens(item.text)
        over = not full and used + cost > token_budget
        if over and left_out is None:
            continue  # a shorter one further down may still fit
        if (
            chosen_rows
            and near_duplicate < 1.0
            and float(np.max(vectors[chosen_rows] @ vectors[row])) > near_duplicate
        ):
            continue  # says what one chosen says (not a budget's cut)
        seen.add(item.text)
        if over or full:
            if len(dropped) < max_items:
                why = (
                    f"over memory's budget of {token_budget} tokens a turn"
                    if over
                    else f"over memory's limit of {max_items} items a turn"
                )
                dropped.append((item, why))
            continue
        chosen_rows.append(row)
        chosen.append(item)
        used += cost
    return chosen
