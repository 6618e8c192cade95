"""An answer cut into sentences as it streams, and each made fit to be spoken (no
Markdown marks, no code, no bare URLs)."""

from __future__ import annotations

import re

__all__ = ["SentenceSplitter", "speakable"]

_END = re.compile(r"""[.!?…]+["'”’)\]]*(?=\s+["'“‘(\[]?[A-Z0-9¿¡])|\n\s*\n""")
"""Where a sentence ends: its closing marks followed by space and the next sentence's
capital (or digit), or a blank line. Only linear-time constructs: no nested repetition."""
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "no"}
    | {"fig", "mt", "capt", "gen", "col", "lt", "sgt", "rev"}
)
_CLAUSE = re.compile(r"[,;:](?=\s+\S)")
"""The end of a clause, where the first piece may end when its sentence is long."""
_LAST_WORD = re.compile(r"(\S+)\.$")
_CODE_BLOCK = re.compile(r"```.*?(```|$)", re.DOTALL)
_LINK = re.compile(r"\[([^\]\n]{0,500})\]\([^)\s]{0,2000}\)")
_URL = re.compile(r"https?://\S*[^\s.,;:!?)\]\"']")
_LINE_MARK = re.compile(r"^[ \t]*(?:#{1,6}[ \t]+|[-*+>][ \t]+|\d{1,3}[.)][ \t]+)", re.MULTILINE)
_MARKS = re.compile(r"[*_`~#|<>]+")
_SPACE = re.compile(r"\s+")


def speakable(text: str) -> str:
    """``text`` as it should be read aloud: code blocks left out, links read as their
    text, URLs as "a link", Markdown's marks (emphasis, headings, bullets) dropped."""
    text = _CODE_BLOCK.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("a link", text)
    text = _LINE_MARK.sub("", text)
    text = _MARKS.sub("", text)
    return _SPACE.sub(" ", text).strip()


class SentenceSplitter:
    """Feed it the answer's pieces as they stream (:meth:`feed`); it gives back each
    sentence once the next one has begun, short ones (under ``min_chars``) joined to the
    next, and a run longer than ``max_chars`` without an end cut at its last comma or
    space (so that no sentence waits for the whole answer). The very first piece may be
    a clause: a comma (semicolon, colon) past ``first_clause_chars`` ends it, so that
    speech starts sooner. :meth:`rest` is what is left at the end."""

    def __init__(
        self, *, min_chars: int = 24, max_chars: int = 300, first_clause_chars: int = 40
    ) -> None:
        self.min_chars = min_chars
        self.max_chars = max_chars
        self.first_clause_chars = first_clause_chars
        self._text = ""
        self._held = ""  # short sentences waiting to be joined to the next
        self._started = False  # a first piece was given out

    def feed(self, piece: str) -> list[str]:
        """The sentences ``piece`` completes (often none)."""
        self._text += piece
        done: list[str] = []
        start = 0
        for end in _END.finditer(self._text):
            sentence = self._text[start : end.end()]
            if end.group().startswith(".") and _abbreviated(sentence.rstrip("\"'”’)] \n")):
                continue
            start = end.end()
            done.extend(self._joined(sentence))
        self._text = self._text[start:]
        if not done and not self._started and not self._held:
            clause = _CLAUSE.search(self._text, self.first_clause_chars)
            if clause is not None:  # the first words sooner: the first clause alone
                done.extend(self._joined(self._text[: clause.end()]))
                self._text = self._text[clause.end() :]
        while len(self._text) > self.max_chars:
            cut = _cut(self._text, self.max_chars)
            done.extend(self._joined(self._text[:cut]))
            self._text = self._text[cut:]
        return done

    def rest(self) -> str:
        """What is left once the answer is complete (and forgets it)."""
        rest = f"{self._held} {self._text.strip()}".strip()
        self._text = self._held = ""
        return rest

    def _joined(self, sentence: str) -> list[str]:
        sentence = sentence.strip()
        whole = f"{self._held} {sentence}" if self._held and sentence else self._held or sentence
        if len(whole) < self.min_chars:
            self._held = whole
            return []
        self._held = ""
        self._started = self._started or bool(whole)
        return [whole] if whole else []


def _abbreviated(sentence: str) -> bool:
    """Whether the sentence's final period ends an abbreviation ("Dr.", "e.g.") or an
    initial ("J."), not the sentence."""
    last = _LAST_WORD.search(sentence)
    if last is None:
        return False
    word = last.group(1).lower().lstrip("\"'“‘([")
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def _cut(text: str, limit: int) -> int:
    """Where to cut a run of ``text`` with no sentence end: after its last comma, semicolon
    or colon before ``limit``, else its last space, else at ``limit``."""
    head = text[:limit]
    for marks in (",;:", " "):
        at = max(head.rfind(mark) for mark in marks)
        if at > limit // 3:
            return at + 1
    return limit
