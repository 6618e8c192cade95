"""The terminal's markup (cli/terminal/markup.py): answers styled as cards expect, the same
whether the text comes whole or in pieces, and as written where styles cannot be shown."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.text import Text

from persona_agent.cli.terminal.markup import (
    ACTION,
    CODE,
    SPEECH,
    STRONG,
    MarkupStream,
    print_rendered,
    render,
    styled_output,
)

ANSWER = (
    '*She smiles softly* and says "Hello **there**", 2 * 3.\n'
    "- one\n* two\n> a quote\n"
    "```python\nx = *not italic*\n```\n"
    "then `co*de*` and ***both***"
)


def styled(text: Text, part: str) -> set[str]:
    """The styles over the first occurrence of ``part`` in ``text``."""
    start = text.plain.index(part)
    return {
        word
        for span in text.spans
        if span.start < start + len(part) and span.end > start
        for word in str(span.style).split()
    }


def test_actions_bold_speech_lists_quotes_and_code_are_styled() -> None:
    text = render(ANSWER)
    assert text.plain.startswith('She smiles softly and says "Hello there", 2 * 3.\n')
    assert styled(text, "She smiles softly") == {ACTION}
    assert styled(text, "Hello") == {SPEECH}
    assert styled(text, "there") == {STRONG, SPEECH}
    assert styled(text, ", 2 * 3.") == set()  # a lone star between spaces is a star
    assert "• one\n• two\n│ a quote\n" in text.plain
    assert styled(text, "a quote") == {"italic"}
    assert "x = *not italic*" in text.plain  # a code block is shown as written
    assert styled(text, "x = *not italic*") == {CODE}
    assert styled(text, "co*de*") == {CODE}
    assert styled(text, "both") == {ACTION, STRONG}


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_pieces_read_as_the_whole(size: int) -> None:
    stream = MarkupStream()
    pieces = Text()
    for start in range(0, len(ANSWER), size):
        pieces.append_text(stream.feed(ANSWER[start : start + size]))
    pieces.append_text(stream.end())
    whole = render(ANSWER)
    assert pieces.plain == whole.plain
    for part in ("She smiles softly", "there", "a quote", "co*de*", "both"):
        assert styled(pieces, part) == styled(whole, part)


def test_an_unclosed_mark_ends_with_its_paragraph_and_its_answer() -> None:
    text = render("*runs off\n\nnext paragraph")
    assert styled(text, "runs off") == {ACTION}
    assert styled(text, "next paragraph") == set()
    stream = MarkupStream()
    stream.feed("**open")
    stream.end()
    assert styled(stream.feed("next answer"), "next answer") == set()


def test_rich_markup_and_brackets_in_the_text_are_words() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, color_system="256")
    print_rendered(render("[bold red]not a style[/] *yes*"), console)
    written = console.file.getvalue()  # type: ignore[attr-defined]
    assert "[bold red]not a style[/]" in written
    assert "\x1b[3myes" in written  # italics


def test_styles_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert not styled_output()
    monkeypatch.setattr("sys.stdout", Tty())
    assert styled_output()
    monkeypatch.setenv("NO_COLOR", "1")
    assert not styled_output()
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not styled_output()
