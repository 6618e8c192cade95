"""The special tokens of a GGUF model's vocabulary, and text made inert against them.

llama.cpp's server reads a chat request's prompt with special tokens parsed: a text such
as Gemma's ``<end_of_turn>`` becomes the control token itself, not the letters. So a
persona card or a user message that contains one could end a turn, open another, or
speak as the model. Before any such text enters the prompt, each occurrence of a special
token's text is broken by a zero-width space after its first character
(:meth:`SpecialText.inert`): the model reads the same letters, tokenized as plain text.
Only the text the hub writes itself (a chat template's turn markers) stays special.

The texts come from the file's metadata (read once, at load): the tokens typed control or
unknown (the ones llama.cpp matches only when it parses special tokens), and those the
file names as its BOS, EOS, end-of-turn and other special ids (llama.cpp makes an
end-of-turn token control whatever its type).
"""

from __future__ import annotations

import mmap
import re
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["NO_SPECIALS", "SpecialText", "read_specials"]

_CONTROL_TYPES = {2, 3}  # llama.cpp's token types UNKNOWN and CONTROL
_BREAKS = ("\u200b", "\u2060", "\ufeff")  # zero-width: space, word joiner, no-break space
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
"""GGUF's fixed-size value types (by type id) and their sizes in bytes."""
_STRING, _ARRAY = 8, 9
_INTEGER = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}


class SpecialText:
    """Makes text inert against a vocabulary's special-token texts."""

    def __init__(self, specials: Iterable[str]) -> None:
        texts = {text for text in specials if text}
        # The break must not itself be in a special token's text (it could make one).
        self._break = next(b for b in _BREAKS if not any(b in text for text in texts))
        self._single = {text for text in texts if len(text) == 1}
        self._lengths: dict[str, set[int]] = {}
        for text in texts - self._single:
            self._lengths.setdefault(text[0], set()).add(len(text))
        self._texts = texts
        starts = "".join(sorted(self._lengths) + sorted(self._single))
        self._start = re.compile(f"[{re.escape(starts)}]") if starts else None

    @property
    def texts(self) -> frozenset[str]:
        """The special tokens' texts."""
        return frozenset(self._texts)

    def inert(self, text: str) -> str:
        """``text`` with every special token's text in it broken (overlapping ones too): a
        zero-width space after its first character; a one-character special token's text is
        replaced by U+FFFD. Text with none is returned as it is."""
        if self._start is None or not self._start.search(text):
            return text
        cuts: set[int] = set()
        for found in self._start.finditer(text):
            at = found.start()
            for length in self._lengths.get(text[at], ()):
                if text[at : at + length] in self._texts:
                    cuts.add(at + 1)
        pieces: list[str] = []
        last = 0
        for cut in sorted(cuts):
            pieces += [text[last:cut], self._break]
            last = cut
        pieces.append(text[last:])
        joined = "".join(pieces)
        for single in self._single:
            joined = joined.replace(single, "\ufffd")
        return joined

    def inert_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` (OpenAI format) with the text of each made :meth:`inert`: a string
        content, and the text parts of a list (images are left as they are)."""
        return [self._inert_message(message) for message in messages]

    def _inert_message(self, message: dict[str, Any]) -> dict[str, Any]:
        content = message.get("content")
        if isinstance(content, str):
            return {**message, "content": self.inert(content)}
        if isinstance(content, list):
            parts = [
                {**part, "text": self.inert(part["text"])}
                if isinstance(part, dict) and isinstance(part.get("text"), str)
                else part
                for part in content
            ]
            return {**message, "content": parts}
        return message


NO_SPECIALS = SpecialText(())
"""For a vocabulary with none (and for tests with no model)."""


def read_specials(path: Path) -> SpecialText:
    """The special-token texts of the GGUF file at ``path``, from its metadata.

    Raises:
        ValueError: the metadata is not GGUF as this reader knows it.
        OSError: the file cannot be read.
    """
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        metadata = _Metadata(data)
        tokens: list[str] = []
        types: list[int] = []
        ids: list[int] = []
        for key, kind in metadata.entries():
            if key == "tokenizer.ggml.tokens":
                tokens = metadata.strings(kind)
            elif key == "tokenizer.ggml.token_type":
                types = metadata.integers(kind)
            elif key.startswith("tokenizer.ggml.") and key.endswith("_token_id"):
                ids.append(metadata.integer(kind))
            else:
                metadata.skip(kind)
    specials = {text for text, kind in zip(tokens, types, strict=False) if kind in _CONTROL_TYPES}
    specials.update(tokens[i] for i in ids if 0 <= i < len(tokens))
    return SpecialText(specials)


class _Metadata:
    """A reader over a GGUF file's key-value metadata (its head), one value at a time."""

    def __init__(self, data: mmap.mmap) -> None:
        self._data = data
        if data[:4] != b"GGUF":
            raise ValueError("not a GGUF file")
        version, _tensors, self._count = struct.unpack_from("<IQQ", data, 4)
        if version < 2:
            raise ValueError(f"GGUF version {version} is too old")
        self._at = 24

    def entries(self) -> Iterable[tuple[str, int]]:
        """Each key and its value's type; the caller reads or skips the value before the next."""
        for _ in range(self._count):
            key = self._string()
            yield key, self._unpack("<I")

    def skip(self, kind: int) -> None:
        if kind == _STRING:
            self._string()
        elif kind == _ARRAY:
            item, count = self._unpack("<I"), self._unpack("<Q")
            if item in _SIZES:
                self._at += _SIZES[item] * count
            else:
                for _ in range(count):
                    self.skip(item)
        elif kind in _SIZES:
            self._at += _SIZES[kind]
        else:
            raise ValueError(f"unknown GGUF value type {kind}")

    def integer(self, kind: int) -> int:
        if kind not in _INTEGER:
            self.skip(kind)
            return -1
        return int(self._unpack(_INTEGER[kind]))

    def integers(self, kind: int) -> list[int]:
        item, count = self._array(kind)
        if item not in _INTEGER:
            raise ValueError("a GGUF token type list that is not of integers")
        return [self.integer(item) for _ in range(count)]

    def strings(self, kind: int) -> list[str]:
        item, count = self._array(kind)
        if item != _STRING:
            raise ValueError("a GGUF token list that is not of strings")
        return [self._string() for _ in range(count)]

    def _array(self, kind: int) -> tuple[int, int]:
        if kind != _ARRAY:
            raise ValueError("a GGUF token list that is not a list")
        return self._unpack("<I"), self._unpack("<Q")

    def _string(self) -> str:
        length = self._unpack("<Q")
        start, self._at = self._at, self._at + length
        if self._at > len(self._data):
            raise ValueError("GGUF metadata that runs past the end of the file")
        return self._data[start : self._at].decode("utf-8", "replace")

    def _unpack(self, form: str) -> Any:
        try:
            (value,) = struct.unpack_from(form, self._data, self._at)
        except struct.error as error:
            raise ValueError("GGUF metadata that runs past the end of the file") from error
        self._at += struct.calcsize(form)
        return value
