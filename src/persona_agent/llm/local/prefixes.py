"""Personas' fixed prompt prefixes, read once and kept: in the embedded server's prompt
cache, and in files under the data directory so that a restart does not read them again.

A new conversation's prompt starts with what every new conversation with the persona
starts with: who the persona is, its background, its sample exchanges, its greeting.
Reading that (some 500 tokens, 1,500 for a long card) is what a persona's first answer
waits for. :func:`warm_prefix` reads it ahead of time into one of the server's slots and
saves the slot to a file (llama.cpp's slot save); after a restart it restores the file
instead, which takes milliseconds. Either way the next task on that slot moves the
prefix into the server's prompt cache, where any slot finds it for the persona's next
new conversation.

A file is named by a hash of the tokens it holds and of the model and server that read
them, so a persona that changed, or another model, never restores a stale one; files no
persona uses any more are deleted (:meth:`PrefixFiles.prune`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from persona_agent.llm.local.server import EmbeddedServer
from persona_agent.llm.local.transcript import sections_of
from persona_agent.personas.macros import USER_NAME, apply_macros
from persona_agent.personas.model import Persona
from persona_agent.personas.turn_prompt import PromptSections

__all__ = [
    "PLACEHOLDER",
    "PrefixFiles",
    "Warmed",
    "new_conversation",
    "prefix_of",
    "warm_persona",
    "warm_prefix",
]

logger = logging.getLogger(__name__)

PLACEHOLDER = "Placeholder7f3a9c"
"""Stands for a new conversation's first message, where the fixed prefix ends."""
_SUFFIX = ".slot"
_FORMAT = "1"  # bumped when what a file holds, or how it is named, changes

Warmed = Literal["restored", "read", "cached"]
"""How a prefix was warmed: restored from its file; read (and saved); already read."""


def new_conversation(persona: Persona) -> PromptSections:
    """The sections of a new conversation with ``persona`` whose first message is
    :data:`PLACEHOLDER` (after the persona's greeting, when it has one)."""
    messages: list[dict[str, object]] = []
    if persona.greeting is not None:
        greeting = apply_macros(persona.greeting, persona.name.strip(), USER_NAME)
        messages.append({"role": "assistant", "content": greeting})
    messages.append({"role": "user", "content": PLACEHOLDER})
    return sections_of(None, persona, messages)


def prefix_of(prompt: str) -> str | None:
    """The part of a new conversation's ``prompt`` (made of :func:`new_conversation`) that
    every new conversation shares: up to the first message, without the space before it
    (a tokenizer joins that space to the word after it). None: the prompt was shortened so
    far that it does not show the message."""
    end = prompt.find(PLACEHOLDER)
    return None if end < 0 else prompt[:end].rstrip(" ")


@dataclass(frozen=True, slots=True)
class PrefixFiles:
    """The directory of saved slots, and the model and server whose reading they hold."""

    directory: Path
    model: Path
    server: str
    """What else a saved slot depends on: the server's version, the context per slot."""

    def name_of(self, tokens: list[int]) -> str:
        """The file name for a slot that read ``tokens`` (a name llama.cpp accepts)."""
        stat = self.model.stat()
        digest = hashlib.sha256(
            f"{_FORMAT}|{self.model.name}|{stat.st_size}|{stat.st_mtime_ns}|{self.server}|".encode()
        )
        digest.update(",".join(map(str, tokens)).encode())
        return digest.hexdigest()[:40] + _SUFFIX

    def prune(self, keep: set[str]) -> int:
        """Delete the saved slots not named in ``keep``; how many were deleted."""
        deleted = 0
        for path in self.directory.glob(f"*{_SUFFIX}"):
            if path.name not in keep:
                path.unlink(missing_ok=True)
                deleted += 1
        return deleted


def warm_prefix(
    server: EmbeddedServer, tokens: list[int], files: PrefixFiles | None
) -> tuple[Warmed, str]:
    """Make ``tokens`` (a persona's prefix) read in ``server``'s cache: restored from its
    file, or read and then saved to it (with no ``files``: read); how, and the file's name.
    Blocks (a worker thread's); uses the server's last slot (a request pinned to it waits
    while a conversation uses it).

    Raises:
        RuntimeError: the server refused to save the slot.
    """
    slot = server.slots - 1
    if files is None:
        return ("cached" if server.prime(tokens, slot) >= len(tokens) - 1 else "read"), ""
    name = files.name_of(tokens)
    path = files.directory / name
    if path.exists():
        try:
            restored = server.restore_slot(slot, name)
        except RuntimeError as error:
            logger.warning("A saved prefix %s could not be restored (%s): read again", name, error)
            restored = 0
        if restored >= len(tokens):
            # A new task on the slot moves what it restored into the prompt cache, where
            # every slot finds it (the next restore would otherwise overwrite it).
            server.prime(tokens[:1], slot)
            return "restored", name
        path.unlink(missing_ok=True)
    found = server.prime(tokens, slot)
    server.save_slot(slot, name)
    return ("cached" if found >= len(tokens) - 1 else "read"), name


def warm_persona(
    server: EmbeddedServer,
    persona: Persona,
    prefix_tokens: Callable[[PromptSections], list[int] | None],
    files: PrefixFiles | None,
) -> tuple[Warmed, str] | None:
    """:func:`warm_prefix` for ``persona``'s prefix (``prefix_tokens`` of a new
    conversation's sections: the backend's prompt, cut by :func:`prefix_of`); None when
    it has none or it was not kept (logged)."""
    tokens = prefix_tokens(new_conversation(persona))
    if not tokens:
        return None
    try:
        return warm_prefix(server, tokens, files)
    except RuntimeError as error:
        logger.warning("The prefix of persona %s was not kept: %s", persona.id, error)
        return None
