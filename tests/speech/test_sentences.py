"""An answer cut into sentences as it streams, and made fit to be read aloud."""

from __future__ import annotations

import pytest

from persona_agent.speech import SentenceSplitter, speakable


def split(text: str, pieces: int = 3, **limits: int) -> list[str]:
    """The sentences of ``text`` streamed ``pieces`` characters at a time, the rest last."""
    splitter = SentenceSplitter(**limits)
    done: list[str] = []
    for start in range(0, len(text), pieces):
        done.extend(splitter.feed(text[start : start + pieces]))
    rest = splitter.rest()
    return [*done, rest] if rest else done


def test_each_sentence_comes_once_the_next_begins() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed("The harbour is quiet tonight. ") == []  # is it over? not yet known
    assert splitter.feed("What") == ["The harbour is quiet tonight."]
    assert splitter.feed(" brings you to the lighthouse?") == []
    assert splitter.rest() == "What brings you to the lighthouse?"
    assert splitter.rest() == ""


def test_short_sentences_are_joined_to_the_next() -> None:
    assert split("Ahoy! Yes. The harbour is quiet tonight. What brings you here, friend?") == [
        "Ahoy! Yes. The harbour is quiet tonight.",
        "What brings you here, friend?",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Mr. Smith keeps the lamp burning all night long. He never sleeps.",
        "Dr. J. Watson keeps the lamp burning all night long. He never sleeps.",
        "It costs 3.50 dollars and the lamp burns all night long. He never sleeps.",
    ],
)
def test_abbreviations_initials_and_numbers_end_no_sentence(text: str) -> None:
    first, second = split(text)
    assert second == "He never sleeps."
    assert first.endswith("all night long.")


def test_quotes_and_blank_lines_end_sentences() -> None:
    assert split('"Who goes there?" asked the keeper of the light. "A friend," said I.') == [
        '"Who goes there?" asked the keeper of the light.',
        '"A friend," said I.',
    ]
    assert split("A list of things to see here\n\nthe lamp and the rocks below") == [
        "A list of things to see here",
        "the lamp and the rocks below",
    ]


def test_a_run_without_an_end_is_cut_at_a_comma_or_a_space() -> None:
    text = ", ".join(f"and the wave number {n} rolled in" for n in range(30))
    sentences = split(text, pieces=7, max_chars=120)
    assert len(sentences) > 5
    assert all(len(sentence) <= 120 for sentence in sentences)
    assert all(sentence.endswith(",") for sentence in sentences[:-1])
    assert " ".join(sentences) == text


def test_speakable_reads_markdown_as_words() -> None:
    markdown = (
        "# The lamp\n\n**Hello** _there_, see [the log](https://example.org/log) or "
        "https://example.org/a.\n- one\n- two\n```python\nprint('code')\n```\nThat is all."
    )
    assert speakable(markdown) == (
        "The lamp Hello there, see the log or a link. one two That is all."
    )
    assert speakable("*waves* `code` ~~gone~~") == "waves code gone"


def test_a_long_first_sentence_gives_its_first_clause_at_once() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed("The harbour is quiet tonight, and") == []  # 28 characters: too short
    assert splitter.feed(" the lamp turns slowly above the rocks, ") == []  # the next clause?
    assert splitter.feed("while") == [
        "The harbour is quiet tonight, and the lamp turns slowly above the rocks,"
    ]
    # Only the first: later sentences wait for their end.
    assert splitter.feed(" the sea sleeps below, grey and calm and cold as stone. What") == [
        "while the sea sleeps below, grey and calm and cold as stone."
    ]
