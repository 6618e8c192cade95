"""Cleaning the embedded model's answer as it streams.

A small base model continuing a transcript tends to go on with the next turn
("User: ..."), to drift into markup, and to loop on a sentence. The filter
below turns its raw text into the persona's answer, word by word, so the
answer still streams:

- it stops at a turn marker (``User:``, the persona's name, any ``Label:`` that
  opens a line), at a word that opens with ``[`` (a bracketed note, as the transcript
  writes the post-history instructions) and at a blank line (the end of the persona's
  paragraph);
- it strips HTML tags, markdown emphasis, header marks and code fences;
- it stops before a sentence the answer already contains, so no sentence
  appears twice (nor one of the answer that a continuation goes on with);
- near the length cap it holds each sentence back until it ends, so a capped
  answer ends on a whole sentence.

Text that could still turn out to be a marker (the first words of a line, an
unclosed ``<tag``, a sentence that so far repeats an earlier one) is held back
until it is decided, never sent and then taken back.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable

from persona_agent.personas.turn_prompt import PromptSections

__all__ = ["AnswerFilter", "fallback_line", "has_words", "speaker_names"]

_MAX_TAG = 200  # an unclosed "<tag" longer than this is not a tag: let it through
_TAG = re.compile(r"</?[A-Za-z!/][^<>]{0,200}>")
_TAG_START = re.compile(r"<(?=[A-Za-z!/])")
_OPEN_TAG = re.compile(r"<(?:[A-Za-z!/][^<>]*)?$")
_EMPHASIS = re.compile(r"\*\*|__|`+|~~")
_HEADER = re.compile(r"(?m)^[ \t]*#{1,6}[ \t]+")
_SPACES = re.compile(r"[ \t\r\f\v]+")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_WORD = re.compile(r"\S+\s*")
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*\s*$")
_NORMAL = re.compile(r"[^\w]+")
_LABEL_WORD = r"(?:[A-Z][\w'’.-]*|\d+)"
_LINE_LABEL = re.compile(rf"[>*\-\s]*{_LABEL_WORD}(?:[ \t]+{_LABEL_WORD}){{0,3}}[ \t]*:")
_MAYBE_LABEL = re.compile(rf"[>*\-\s]*(?:{_LABEL_WORD}(?:[ \t]+{_LABEL_WORD}){{0,3}})?[ \t]*")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?…])\s+")
_CLOSES = re.compile(r"[,.;:!?…)\]”’'\"]")  # text that goes on a word with no space between
_ROLE_WORDS = ("User", "Assistant", "System", "Human", "AI", "Bot", "Interviewer", "Question")


def has_words(text: str) -> bool:
    """Whether ``text`` has at least one letter or digit."""
    return any(char.isalnum() for char in text)


class AnswerFilter:
    """Turns raw model output into the persona's answer, incrementally.

    ``names``: the speakers whose ``Name:`` ends the answer (the persona's, the user's).
    ``after``: the answer this one continues; none of its sentences is said again, and the
    first text sent starts with the space that joins it on.

    Feed the model's text with :meth:`feed` as it comes; send what it returns.
    When :attr:`stopped` turns true, stop generating. Call :meth:`finish` at the
    end and send what it returns too. :attr:`text` is everything sent.
    """

    def __init__(self, names: Iterable[str] = (), *, after: str = "") -> None:
        labels = {*_ROLE_WORDS, *(name for name in names if name)}
        alternatives = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
        # A turn marker, or a bracketed note: the model echoing the post-history
        # instructions (``[Answer in two sentences.]``) or writing a stage direction.
        self._marker = re.compile(rf"(?<![\w'’])(?:{alternatives})[ \t]*:|(?<!\S)\[")
        self.text = ""
        """Everything sent so far."""
        self.stopped = False
        """The answer is over: stop generating."""
        self.hold_sentences = False
        """Send each sentence only once it ends (set near the length cap)."""
        self._raw = ""  # received, not yet examined
        self._held = ""  # cleaned words of the current sentence, not yet sent
        self._sent_of_sentence = ""  # cleaned words of the current sentence, already sent
        self._seen: set[str] = set()  # normalized sentences already in the answer
        self._line_start = True  # the next text starts a line
        self._joiner = ""  # put before the first text sent (a continuation's space)
        if after.strip():  # a continuation of ``after``: none of its sentences again
            self._seen.update(filter(None, map(_normalize, _SENTENCE_BREAK.split(after))))
            self._line_start = False  # the model goes on with the answer's last line
            self._joiner = "" if after[-1].isspace() else " "

    def feed(self, piece: str) -> str:
        """Take more raw text; return the cleaned text that may be sent now."""
        if self.stopped:
            return ""
        self._raw += piece
        return self._drain(final=False)

    def finish(self, *, truncated: bool = False) -> str:
        """Take the end of the output; return the last cleaned text to send.

        ``truncated``: generation hit the length cap. An unfinished last
        sentence is then dropped, unless the answer would be empty without it
        (it is sent with an ellipsis).
        """
        out = "" if self.stopped else self._drain(final=True)
        held = self._held.strip()
        self._held = ""
        # Held words are the start of a repeated sentence (dropped), or, near the cap,
        # the last sentence: sent if the model ended it, dropped if the cap cut it off.
        if held and (not has_words(self.text) or (self.hold_sentences and not truncated)):
            if truncated and not _SENTENCE_END.search(held):
                held = held.rstrip(",;:-–— ") + "…"
            out += self._send(held)
        self.stopped = True
        return out

    # -- internals -------------------------------------------------------------

    def _drain(self, *, final: bool) -> str:
        raw = self._raw
        cut = len(raw) if final else _last_word_end(raw)
        open_tag = _OPEN_TAG.search(raw, 0, cut)
        if open_tag is not None:
            if final:
                raw = raw[: open_tag.start()]
                cut = len(raw)
            elif len(raw) - open_tag.start() <= _MAX_TAG:
                cut = open_tag.start()
        chunk, self._raw = raw[:cut], raw[cut:] if not final else ""
        if not chunk:
            return ""
        text = _clean(chunk)
        out, rest = self._lines(text, final=final)
        if rest:  # undecided text: examine it again with what comes next
            self._raw = rest + self._raw
        return out

    def _lines(self, text: str, *, final: bool) -> tuple[str, str]:
        """Send ``text`` line by line; return (sent, held back for later)."""
        out = ""
        position = 0
        while position < len(text) and not self.stopped:
            if self._line_start:
                line, newline_follows = _first_line(text, position)
                if _LINE_LABEL.match(line):
                    self.stopped = True
                    break
                if newline_follows and not line.strip() and has_words(self.text):
                    self.stopped = True  # a blank line: the paragraph is over
                    break
                if not final and not newline_follows and _MAYBE_LABEL.fullmatch(line):
                    return out, text[position:]  # the start of a line that may be a label
            blank = _BLANK_LINE.search(text, position)
            newline = text.find("\n", position)
            end = len(text) if newline < 0 else newline + 1
            segment = text[position:end]
            marker = self._marker.search(segment)
            if marker is not None:
                segment = segment[: marker.start()]
                self.stopped = True
            if blank is not None and blank.start() < position + len(segment):
                segment = segment[: blank.start() - position]
                if has_words(self.text + self._held + segment):
                    self.stopped = True
            out += self._words(segment)
            position = end
            self._line_start = segment.endswith("\n") or (not has_words(self.text + self._held))
        return out, ""

    def _words(self, segment: str) -> str:
        out = ""
        for word in _WORD.findall(segment):
            if not self.text and not self._held and not has_words(word) and not self._joiner:
                continue  # no leading punctuation or blank lines (but a continuation's comma)
            sentence = self._sent_of_sentence + self._held + word
            ends = _SENTENCE_END.search(word) is not None
            key = _normalize(sentence)
            if ends:
                if key in self._seen:
                    if not self._sent_of_sentence:
                        self._held = ""  # a whole repeated sentence: drop it
                    else:
                        out += self._send(self._held + word)
                    self.stopped = True
                    return out
                if key:
                    self._seen.add(key)
                out += self._send(self._held + word)
                self._held, self._sent_of_sentence = "", ""
            elif self.hold_sentences or (not self._sent_of_sentence and self._repeats(key)):
                self._held += word
            else:
                out += self._send(self._held + word)
                self._sent_of_sentence += self._held + word
                self._held = ""
        return out

    def _repeats(self, key: str) -> bool:
        """Whether a sentence that begins with ``key`` could be one already said."""
        if not key:
            return True
        return any(seen == key or seen.startswith(key + " ") for seen in self._seen)

    def _send(self, text: str) -> str:
        if not self.text:
            text = text.lstrip()
            if text and not _CLOSES.match(text):
                text = self._joiner + text
        if self.text.endswith((" ", "\n")):
            text = text.lstrip(" ")
        self.text += text
        return text


def speaker_names(name: str) -> tuple[str, ...]:
    """The persona's name and its parts: each followed by a colon marks a new turn."""
    parts = [part for part in name.split() if len(part) > 2]
    return (name, *parts)


def fallback_line(
    sections: PromptSections, messages: list[dict[str, object]], *, after: str = ""
) -> str:
    """A short in-character line for when the model twice said nothing usable; ``after``:
    the answer it continues (a line not in it, joined on with a space)."""
    lines = list(sections.phrases)
    if not lines and sections.examples:
        lines = [sections.examples[0][1].split(". ")[0].rstrip(".") + "."]
    if not lines:
        lines = ["Forgive me, I have no answer to that just now."]
    lines = [line for line in lines if line not in after] or lines
    last = str(messages[-1].get("content", "")) if messages else ""
    line = lines[zlib.crc32(last.encode("utf-8")) % len(lines)]
    return f" {line}" if after.strip() and not after[-1].isspace() else line


def _last_word_end(raw: str) -> int:
    """The end of the last whole word of ``raw`` (a word is whole once whitespace follows)."""
    for index in range(len(raw) - 1, -1, -1):
        if raw[index].isspace():
            return index + 1
    return 0


def _first_line(text: str, position: int) -> tuple[str, bool]:
    """The line of ``text`` that starts at ``position``, and whether a newline ends it."""
    end = text.find("\n", position)
    return (text[position:], False) if end < 0 else (text[position:end], True)


def _clean(chunk: str) -> str:
    chunk = _TAG.sub(" ", chunk)
    chunk = _TAG_START.sub("", chunk)  # no tag can form across chunks
    chunk = _EMPHASIS.sub("", chunk)
    chunk = _HEADER.sub("", chunk)
    return _SPACES.sub(" ", chunk)


def _normalize(sentence: str) -> str:
    return _NORMAL.sub(" ", sentence.lower()).strip()
