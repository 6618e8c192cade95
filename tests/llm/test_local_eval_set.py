"""bench/local_eval.py's evaluation set (docs/local-model.md#how-good-its-answers-are): it
covers every bundled persona but the panel and its evaluation card, every question can be
scored, and the scores count what the docs say they count. The answers themselves are the
real model's, scored by the bench, not here."""

from __future__ import annotations

import importlib

import pytest

from tests.personas import BUNDLED

# By name: bench/ is no package, and its local_eval/ folder would shadow the module for mypy.
local_eval = importlib.import_module("bench.local_eval")
hits, repetition, persona_of = local_eval.hits, local_eval.repetition, local_eval.persona_of
SET = local_eval.load_set(local_eval.EVAL_DIR / "questions.yaml")


def test_the_set_asks_every_bundled_persona_but_the_panel_and_the_card() -> None:
    bundled = {path.stem for path in BUNDLED.glob("*.yaml")}
    panels = {key for key in bundled if persona_of(key).panel is not None}
    assert panels  # the science panel, answered for by its members
    assert set(SET) == (bundled - panels) | {"maren-holt.json"}
    assert all(len(questions) >= 4 for questions in SET.values())


@pytest.mark.parametrize("key", sorted(SET))
def test_every_question_expects_words_it_does_not_give_away(key: str) -> None:
    persona_of(key)  # loads, as the bench reads it
    for question in SET[key]:
        assert question.expect, question
        assert not hits(question.ask, question.expect), question


def test_the_card_brings_its_lore_and_instructions() -> None:
    card = persona_of("maren-holt.json")
    assert card.lore is not None
    assert card.lore.entries
    assert card.post_history_instructions
    assert card.system_prompt
    assert card.greeting
    keys = {key.casefold() for entry in card.lore.entries for key in entry.keys}
    assert any(key in q.ask.casefold() for q in SET["maren-holt.json"] for key in keys)


def test_hits_and_repetition_count_what_the_docs_say() -> None:
    assert hits("It was the BEAGLE, a brig.", ["Beagle"])
    assert not hits("A ship of the navy.", ["Beagle", "brig"])
    assert repetition("one two three") == (1, 0)
    assert repetition("I think so. I think so. I think so.") == (7, 4)
    assert repetition("") == (0, 0)
