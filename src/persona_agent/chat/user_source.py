"""Where the engine learns who the user of a turn is (their name for ``{{user}}``, their
description for the prompt): :class:`UserSource`, implemented by
:class:`persona_agent.conversations.user_persona.UserPersonas`; none by default."""

from __future__ import annotations

from typing import Protocol

from persona_agent.personas.user_identity import DEFAULT_USER, UserPersona

__all__ = ["NO_USERS", "UserSource"]


class UserSource(Protocol):
    """Who the user of a turn is."""

    async def resolve(
        self, owner: str, key: str, from_message: UserPersona | None, *, new: bool = False
    ) -> UserPersona:
        """The user persona of a turn of the conversation ``key`` (the history's key) of
        ``owner`` (``""``: anonymous); ``from_message``: the one the turn's message carries,
        if any (kept as the conversation's from then on); ``new``: the conversation was
        begun by this turn (none of its own is stored)."""
        ...


class _NoUsers:
    """Nothing kept: the message's user persona, else the default."""

    async def resolve(
        self, owner: str, key: str, from_message: UserPersona | None, *, new: bool = False
    ) -> UserPersona:
        return from_message if from_message is not None else DEFAULT_USER


NO_USERS: UserSource = _NoUsers()
"""No user personas kept (an engine built without them)."""
