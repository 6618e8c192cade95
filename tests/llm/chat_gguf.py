"""A chat GGUF made for the tests: the bundled base model with a chat template added.

No chat GGUF ships on the package index, so the tests make one: the bundled Gemma 3 270M
file with a ``tokenizer.chat_template`` metadata key put before its others. The template
writes Gemma's turns and offers tools in the Hermes way (``<tool_call>{"name": ...,
"arguments": ...}</tool_call>``), which llama.cpp's server reads from the template itself
(its parser for the model's tool calls is derived from how the template renders them).
A base model calls no tool of itself; the template shows it one call made (an example
turn with the first tool), which it copies, and llama.cpp's grammar holds what follows
``<tool_call>`` to a call of an offered tool with arguments of its schema.
"""

from __future__ import annotations

import struct
from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "with_chat_template"]

CHAT_TEMPLATE = Path(__file__).with_name("tool_chat_template.jinja").read_text(encoding="utf-8")
"""A tool-capable chat template in Gemma's turns (``tool_chat_template.jinja``)."""

_KEY = b"tokenizer.chat_template"
_HEADER = struct.Struct("<4sIQQ")  # magic, version, tensor count, metadata count
_ALIGNMENT = 32  # GGUF's default (the bundled file sets no general.alignment)
_STRING = 8  # GGUF's value type of a string


def with_chat_template(base: Path, target: Path, template: str = CHAT_TEMPLATE) -> Path:
    """Write ``base`` (a GGUF file with no chat template) to ``target`` with ``template`` as
    its ``tokenizer.chat_template``.

    The new key goes first; its bytes are padded (inside a Jinja comment) to a multiple of
    the file's alignment, so the tensor data after the metadata stays aligned as it was.
    """
    data = base.read_bytes()
    magic, version, tensors, keys = _HEADER.unpack_from(data)
    assert magic == b"GGUF", base
    assert _KEY not in data[: 64 * 1024 * 1024], f"{base} has a chat template already"

    def entry(text: str) -> bytes:
        value = text.encode()
        return struct.pack("<Q", len(_KEY)) + _KEY + struct.pack("<IQ", _STRING, len(value)) + value

    padding = -len(entry(template + "{##}")) % _ALIGNMENT
    added = entry(template + "{#" + " " * padding + "#}")
    head = _HEADER.pack(magic, version, tensors, keys + 1)
    target.write_bytes(head + added + data[_HEADER.size :])
    return target
