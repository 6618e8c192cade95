"""How a turn opens and ends by its mode (issue 37, docs/conversations.md): a message (the
greeting of a new conversation first, the one chosen), a regeneration of the last answer,
or the continuation of it.

- ``message``: the user's message after the history; a new conversation opens with greeting
  ``turn.greeting`` (0: the card's first message, k: its k-th alternate greeting), the others
  kept as that answer's alternatives.
- ``regenerate``: the last answer is stashed among its alternatives, the model is shown the
  history up to the last user message (the selected branch, nothing after it), and the new
  answer becomes the selected alternative; a failed turn puts the old answer back.
- ``continue``: the model is shown the history, which ends with its answer, and a nudge to
  go on; the text it gives is added to that answer.

A turn whose caller sends the conversation (:mod:`.supplied`) is a message after that
history, with no greeting: the caller's conversation is as it sent it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from persona_agent.chat.history import ConversationHistory
from persona_agent.chat.tools import Turn
from persona_agent.conversations.branches import Branches
from persona_agent.errors import ConversationStateError
from persona_agent.llm.base import Message
from persona_agent.personas.macros import USER_NAME, apply_macros
from persona_agent.personas.model import Persona

__all__ = ["CONTINUE_NUDGE", "Opening", "greetings_of", "open_turn"]

CONTINUE_NUDGE = "[Continue your last message without repeating its original content.]"


@dataclass(slots=True)
class Opening:
    """What a turn starts from."""

    past: list[Message]
    """The history the prompt shows before ``said``."""
    said: list[Message]
    """What the turn adds before its answer (a new conversation's greeting, the message)."""
    query: str
    """What memory and the documents are searched with (the user's latest message; its own
    words, when it brings documents)."""
    anchor: int | None = None
    """A regeneration: the user message whose answer was stashed."""
    greetings: list[str] = field(default_factory=list)
    """A new conversation opened with one of several greetings: all of them, rendered."""
    greeting: int = 0
    extra: list[Message] = field(default_factory=list)
    """Shown to the model after ``said`` and never stored (the nudge of a continuation)."""
    cut: bool = False
    """Older messages than ``past`` were left out: the history's window is full."""


def greetings_of(persona: Persona, user: str = USER_NAME) -> list[str]:
    """The persona's greetings, macros replaced (``{{user}}`` as ``user``): its first
    message, then the alternate ones (none without a first message)."""
    if persona.greeting is None:
        return []
    name = persona.name.strip()
    texts = [persona.greeting, *persona.alternate_greetings]
    return [apply_macros(text, name, user) for text in texts]


async def open_turn(
    history: ConversationHistory,
    branches: Branches,
    persona: Persona,
    key: str,
    user_message: str,
    turn: Turn,
    user: str = USER_NAME,
) -> Opening:
    """The turn's start by its mode (the conversation's lock held); ``user``: what
    ``{{user}}`` in a new conversation's greeting becomes.

    Raises:
        ConversationStateError: nothing to regenerate or continue; a greeting the persona
            does not have.
    """
    if turn.mode == "regenerate":
        anchor = await branches.stash_answer(key)
        try:
            past, cut = await history.window(key)
        except BaseException:
            await branches.restore_answer(key, anchor)
            raise
        return Opening(past, [], _last_user_text(past), anchor=anchor, cut=cut)
    if turn.supplied is not None:  # the caller's conversation: nothing stored is read
        past = list(turn.supplied.history)
        has_message = not turn.supplied.answers_history
        new: list[Message] = [{"role": "user", "content": user_message}] if has_message else []
        query = (turn.question or user_message) if has_message else _last_user_text(past)
        return Opening(past, new, query)
    past, cut = await history.window(key, new=turn.new_context)
    if turn.mode == "continue":
        last = past[-1] if past else {}
        if last.get("role") != "assistant" or not isinstance(last.get("content"), str):
            raise ConversationStateError(
                "Nothing to continue: the last message is not the persona's answer"
            )
        nudge: Message = {"role": "system", "content": CONTINUE_NUDGE}
        return Opening(past, [], _last_user_text(past), extra=[nudge], cut=cut)
    asked: Message = {"role": "user", "content": user_message}
    if turn.images:  # what the history keeps of them (their bytes: persona_agent.media)
        asked["media"] = [image.meta() for image in turn.images]
    if turn.documents:  # their text is in the content; what they were, beside it
        asked["files"] = [dict(entry) for entry in turn.documents]
    said: list[Message] = [asked]
    query = turn.question or user_message
    if past:
        return Opening(past, said, query, cut=cut)
    greetings = greetings_of(persona, user)
    index = turn.greeting or 0
    if index and not 0 <= index < len(greetings):
        raise ConversationStateError(
            f"The persona has no greeting {index} (it has {len(greetings)}: 0 is its first "
            "message, 1 and on its alternate greetings)"
        )
    if greetings:
        said.insert(0, {"role": "assistant", "content": greetings[index]})
    return Opening(
        past, said, query, greetings=greetings if len(greetings) > 1 else [], greeting=index
    )


def _last_user_text(messages: list[Message]) -> str:
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            return content
    return ""
