"""AnswerFilter: the embedded model's raw output turned into the persona's answer, as it streams."""

from __future__ import annotations

import pytest

from persona_agent.llm.local.answer import AnswerFilter, has_words


def run(
    raw: str,
    *,
    names: tuple[str, ...] = ("Socrates",),
    step: int = 3,
    truncated: bool = False,
    hold_from: int | None = None,
) -> tuple[str, list[str]]:
    """Feed ``raw`` in pieces of ``step`` characters, as a model would; (answer, pieces sent)."""
    answer = AnswerFilter(names)
    sent: list[str] = []
    for start in range(0, len(raw), step):
        if hold_from is not None and start >= hold_from:
            answer.hold_sentences = True
        piece = answer.feed(raw[start : start + step])
        if piece:
            sent.append(piece)
        if answer.stopped:
            break
    last = answer.finish(truncated=truncated)
    if last:
        sent.append(last)
    assert "".join(sent) == answer.text
    return answer.text, sent


def test_plain_text_streams_word_by_word() -> None:
    text, sent = run(" Ah, my friend, what do you mean by justice? Let us inquire together.")
    assert text == "Ah, my friend, what do you mean by justice? Let us inquire together."
    assert len(sent) >= 8


@pytest.mark.parametrize(
    "raw",
    [
        " I do not know.\nUser: What then?",
        " I do not know. User: What then?",
        " I do not know.\nSocrates: And yet",
        " I do not know.\n\nThen a new paragraph.",
        " I do not know.\nQ: next",
        " I do not know.\n**Charles Darwin:** hello",
    ],
)
def test_stops_at_the_next_turn(raw: str) -> None:
    assert run(raw)[0].strip() == "I do not know."


def test_a_name_label_in_mid_line_stops_it() -> None:
    text, _ = run(" I wonder. Darwin: indeed", names=("Charles Darwin", "Charles", "Darwin"))
    assert text.strip() == "I wonder."


def test_an_answer_that_opens_with_a_label_is_empty() -> None:
    assert run(" Socrates: hello there.")[0] == ""
    assert not has_words(run("\n\n   ")[0])


def test_markup_is_stripped() -> None:
    text, _ = run(" ## Justice\n<p>It is <b>giving</b> each his **due**.</p> Yes `code`.")
    assert "<" not in text
    assert ">" not in text
    assert "#" not in text
    assert "*" not in text
    assert "`" not in text
    assert "giving" in text
    assert "due" in text


def test_an_unclosed_tag_at_the_end_is_dropped() -> None:
    assert run(" Here it is. <div class='x")[0].strip() == "Here it is."


def test_a_less_than_sign_is_not_a_tag() -> None:
    assert run(" Three < four, surely.")[0] == "Three < four, surely."


def test_a_repeated_sentence_is_dropped_and_ends_the_answer() -> None:
    text, sent = run(" I know nothing. Truly. I know nothing. I know nothing.")
    assert text.strip() == "I know nothing. Truly."
    assert "I know nothing. Truly. I" not in "".join(sent)  # the repeat was never sent


def test_a_sentence_that_starts_like_an_earlier_one_is_released_when_it_differs() -> None:
    text, _ = run(" I know nothing. I know little else.")
    assert text == "I know nothing. I know little else."


def test_a_capped_answer_ends_on_a_whole_sentence() -> None:
    raw = " The engine is grand. It weaves patterns as the loom weaves flowers and"
    text, _ = run(raw, truncated=True, hold_from=20)
    assert text.strip() == "The engine is grand."


def test_a_capped_answer_of_one_unfinished_sentence_gets_an_ellipsis() -> None:
    text, _ = run(" It weaves patterns as the loom weaves flowers and", truncated=True, hold_from=0)
    assert text == "It weaves patterns as the loom weaves flowers and…"


def test_nothing_is_accepted_after_it_stopped() -> None:
    answer = AnswerFilter(["Ada"])
    answer.feed(" Yes.\nUser: ")
    assert answer.stopped
    assert answer.feed(" more words ") == ""
    assert answer.finish() == ""
    assert answer.text.strip() == "Yes."


def test_a_bracketed_note_ends_the_answer() -> None:
    """The transcript writes the post-history instructions in brackets: an echo of them,
    or a stage direction, is not part of the answer."""
    text, _ = run("It sank in the storm. [Answer as Maren Holt, in two sentences.] And")
    assert text.strip() == "It sank in the storm."
    text, _ = run("It sank.\n[Answer briefly.]")
    assert text.strip() == "It sank."
    text, _ = run("The word list[3] stays.")
    assert text == "The word list[3] stays."


def test_the_users_own_name_as_a_label_in_mid_line_stops_it() -> None:
    answer, _ = run(
        'The Shadowfangs hunt at dusk. Kestrel: "What are Shadowfangs?"',
        names=("Maren Holt", "Maren", "Holt", "Kestrel"),
    )
    assert answer.strip() == "The Shadowfangs hunt at dusk."


def test_a_continuation_joins_on_with_a_space_and_repeats_none_of_the_answer() -> None:
    before = "I was born in Athens. My mother was a midwife."
    answer = AnswerFilter(("Socrates",), after=before)
    sent = answer.feed(" My mother was a midwife. I ask questions. ") + answer.finish()
    assert sent == ""  # it opened by repeating a sentence of the answer: nothing added
    answer = AnswerFilter(("Socrates",), after=before)
    sent = answer.feed("I ask questions of everyone.\nUser: why?") + answer.finish()
    assert sent == " I ask questions of everyone.\n"
    assert (before + sent).count("midwife") == 1


def test_a_continuation_after_a_space_or_before_punctuation_adds_no_space() -> None:
    answer = AnswerFilter(("Socrates",), after="I was born in Athens ")
    assert (answer.feed("in 470 BC. ") + answer.finish()) == "in 470 BC. "
    answer = AnswerFilter(("Socrates",), after="I was born in Athens")
    assert (answer.feed(", in 470 BC. ") + answer.finish()).startswith(", in 470 BC.")
