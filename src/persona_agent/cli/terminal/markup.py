"""Answers and greetings as the terminal can show them: ``*actions*`` in italics, ``**bold**``,
"quoted speech" in colour, list bullets, quotes and code, as the community's cards expect.

Text streams in pieces, so :class:`MarkupStream` reads it as it comes, holding back only what
it cannot yet tell (a ``*`` at a piece's end may open ``**``; a line's first characters may
begin a list item or a code fence). The styles are written with ``rich`` on a terminal only:
piped output, ``NO_COLOR`` or ``TERM=dumb`` get the text exactly as the model wrote it
(:func:`styled_output`). Nothing in the text is interpreted as terminal control: the model's
words are written as :class:`rich.text.Text`, never as rich markup.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

import typer
from rich.console import Console
from rich.text import Text

__all__ = [
    "AnswerWriter",
    "MarkupStream",
    "echo_rendered",
    "print_rendered",
    "render",
    "styled_output",
]

ACTION = "italic"
STRONG = "bold"
SPEECH = "dark_orange"
CODE = "green"
QUOTE_BAR = "dim"
_LINE_MARKS = set(" \t-*+>#0123456789.`")
"""The characters a line's beginning may hold before it is known what the line is."""
_FENCE = re.compile(r"[ \t]*```")
_BULLET = re.compile(r"([ \t]*)[-*+][ \t]+")
_QUOTE = re.compile(r"[ \t]*>[ \t]?")
_HEADING = re.compile(r"[ \t]*#{1,6}[ \t]+")
_NUMBERED = re.compile(r"[ \t]*\d{1,3}\.[ \t]+")
_OPEN_QUOTES = {'"': '"', "“": "”"}


def styled_output() -> bool:
    """Whether answers are written with styles: on a terminal, unless ``NO_COLOR`` is set
    (https://no-color.org) or the terminal is ``dumb``."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(sys.stdout, "isatty", None)
    return bool(isatty and isatty())


@dataclass
class MarkupStream:
    """Turns an answer's pieces into styled text as they come.

    ``feed`` returns what can be shown of the pieces so far; ``end`` returns what was held
    back, and forgets the styles still open (an unclosed ``*`` does not run into the next
    answer). Styles open within a paragraph close at a blank line.
    """

    held: str = ""
    italic: bool = False
    bold: bool = False
    speech: str = ""
    """The quote mark that closes the speech under way, or ''."""
    code: bool = False
    code_block: bool = False
    line_style: str = ""
    at_line_start: bool = True
    previous: str = "\n"
    out: Text = field(default_factory=Text)

    def feed(self, piece: str) -> Text:
        text = self.held + piece
        self.held = ""
        self.out = Text()
        index = 0
        while index < len(text):
            if self.at_line_start:
                taken = self._line_start(text, index)
                if taken < 0:
                    self.held = text[index:]
                    break
                index = taken
                continue
            taken = self._inline(text, index)
            if taken < 0:
                self.held = text[index:]
                break
            index = taken
        return self.out

    def end(self) -> Text:
        """What was held back, as written; the styles reset."""
        held, self.held = self.held, ""
        self.out = Text()
        if held:
            self._put(held)
        self.italic = self.bold = self.code = self.code_block = False
        self.speech = self.line_style = ""
        self.at_line_start, self.previous = True, "\n"
        return self.out

    def _style(self) -> str:
        if self.code or self.code_block:
            return CODE
        styles = [self.line_style] if self.line_style else []
        styles += [ACTION] if self.italic else []
        styles += [STRONG] if self.bold else []
        styles += [SPEECH] if self.speech else []
        return " ".join(styles)

    def _put(self, text: str, style: str | None = None) -> None:
        self.out.append(text, style=self._style() if style is None else style)
        self.previous = text[-1:] or self.previous

    def _line_start(self, text: str, index: int) -> int:
        """Read a line's beginning from ``index``; where the line's text goes on, or -1 while
        what the line is cannot be told yet."""
        rest = text[index:]
        newline = rest.find("\n")
        head = rest if newline < 0 else rest[:newline]
        if newline < 0 and all(c in _LINE_MARKS for c in head) and len(head) < 12:
            return -1
        self.at_line_start = False
        if _FENCE.match(rest):
            self.code_block = not self.code_block
            end = len(rest) if newline < 0 else newline
            self._put(rest[:end], CODE)
            return index + end
        if self.code_block:
            return index
        if match := _BULLET.match(rest):
            self._put(match.group(1) + "• ", STRONG)
        elif match := _QUOTE.match(rest):
            self._put("│ ", QUOTE_BAR)
            self.line_style = "italic"
        elif match := _HEADING.match(rest):
            self.line_style = STRONG
        elif match := _NUMBERED.match(rest):
            self._put(match.group(0), STRONG)
        return index + (match.end() if match else 0)

    def _inline(self, text: str, index: int) -> int:
        """Read from ``index`` up to the next mark (or line's end); where reading goes on,
        or -1 when a mark at the text's end cannot be told yet."""
        char = text[index]
        if char == "\n":
            blank = self.previous == "\n"
            self._put("\n", "")
            self.at_line_start, self.line_style = True, ""
            if blank and not self.code_block:  # a paragraph's end closes its styles
                self.italic = self.bold = self.code = False
                self.speech = ""
            return index + 1
        if self.code_block:
            end = text.find("\n", index)
            end = len(text) if end < 0 else end
            self._put(text[index:end], CODE)
            return end
        if char == "`":
            self.code = not self.code
            self._put("`", CODE)
            return index + 1
        if char == "*" and not self.code:
            return self._stars(text, index)
        if not self.code and (char in _OPEN_QUOTES or char == self.speech):
            return self._quote(char, index)
        end = index + 1
        while end < len(text) and text[end] not in '\n`*"“”':
            end += 1
        self._put(text[index:end])
        return end

    def _stars(self, text: str, index: int) -> int:
        end = index
        while end < len(text) and text[end] == "*":
            end += 1
        if end == len(text):
            return -1  # more stars, or what follows them, still to come
        run, after, before = end - index, text[end], self.previous
        closes = not before.isspace()
        opens = not after.isspace()
        if run in (1, 3) and ((self.italic and closes) or (not self.italic and opens)):
            self.italic = not self.italic  # the marks themselves are not shown
            self.bold = not self.bold if run == 3 else self.bold
        elif run == 2 and ((self.bold and closes) or (not self.bold and opens)):
            self.bold = not self.bold
        else:
            self._put(text[index:end])
        self.previous = text[end - 1]
        return end

    def _quote(self, char: str, index: int) -> int:
        if self.speech == char:
            self._put(char)
            self.speech = ""
        else:
            self.speech = _OPEN_QUOTES[char]
            self._put(char)
        return index + 1


def render(text: str) -> Text:
    """A whole text (a greeting, a message of the history) styled."""
    stream = MarkupStream()
    rendered = stream.feed(text)
    rendered.append_text(stream.end())
    return rendered


def print_rendered(text: Text | str, console: Console | None = None) -> None:
    """Write styled text at once, as it is (no wrapping, no rich markup read in it)."""
    (console or _console()).print(text, end="", soft_wrap=True, markup=False, highlight=False)


def _console() -> Console:
    return Console(file=sys.stdout, force_terminal=True, highlight=False)


class AnswerWriter:
    """Writes an answer's pieces as they stream in: styled where :func:`styled_output`
    says so, else exactly as they come."""

    def __init__(self, styled: bool | None = None) -> None:
        styled = styled_output() if styled is None else styled
        self._stream = MarkupStream() if styled else None
        self._console = _console() if styled else None

    def write(self, piece: str) -> None:
        if self._stream is None:
            typer.echo(piece, nl=False)
        else:
            print_rendered(self._stream.feed(piece), self._console)

    def end(self) -> None:
        """Write what was held back; the styles still open end here."""
        if self._stream is not None:
            print_rendered(self._stream.end(), self._console)


def echo_rendered(text: str, nl: bool = True) -> None:
    """Write a whole text (a greeting, a message of the history), styled where the terminal
    can show it."""
    writer = AnswerWriter()
    writer.write(text + ("\n" if nl else ""))
    writer.end()
