"""Who the user is: the name ``{{user}}`` stands for and the description a persona reads of
the person it talks to (a "user persona", as SillyTavern's), checked once wherever it comes
from (a REST body, an A2A message's extension, the database).
"""

from __future__ import annotations

from dataclasses import dataclass

from persona_agent.errors import InvalidUserPersonaError
from persona_agent.personas.macros import MAX_USER_NAME_CHARS, USER_NAME

__all__ = [
    "DEFAULT_USER",
    "MAX_USER_DESCRIPTION_CHARS",
    "UserPersona",
]

MAX_USER_DESCRIPTION_CHARS = 2_000
"""The longest description of a user persona (characters, once stripped)."""


@dataclass(frozen=True, slots=True)
class UserPersona:
    """A user's display name (1 to :data:`~persona_agent.personas.macros.MAX_USER_NAME_CHARS`
    characters, one line) and description (at most :data:`MAX_USER_DESCRIPTION_CHARS`),
    both stripped. Build one with :meth:`of`, which checks them."""

    name: str
    description: str = ""

    @classmethod
    def of(cls, name: object, description: object = "") -> UserPersona:
        """A checked user persona.

        Raises:
            InvalidUserPersonaError: ``name`` is not a string of 1 to 64 characters on one line
                (once stripped), or ``description`` not a string of at most 2,000.
        """
        if name is None:
            raise InvalidUserPersonaError("The user persona needs a name (1 to 64 characters)")
        if not isinstance(name, str):
            raise InvalidUserPersonaError("The user persona's name must be a string")
        if description is None:
            description = ""
        if not isinstance(description, str):
            raise InvalidUserPersonaError("The user persona's description must be a string")
        name, description = name.strip(), description.strip()
        if not name:
            raise InvalidUserPersonaError(
                "The user persona's name is empty: give 1 to 64 characters"
            )
        if len(name) > MAX_USER_NAME_CHARS:
            raise InvalidUserPersonaError(
                f"The user persona's name has {len(name)} characters: "
                f"at most {MAX_USER_NAME_CHARS} are allowed"
            )
        if any(char in name for char in "\r\n") or not name.isprintable():
            raise InvalidUserPersonaError(
                "The user persona's name must be one line of printable text"
            )
        if len(description) > MAX_USER_DESCRIPTION_CHARS:
            raise InvalidUserPersonaError(
                f"The user persona's description has {len(description)} characters: "
                f"at most {MAX_USER_DESCRIPTION_CHARS:,} are allowed"
            )
        return cls(name, description)

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "description": self.description}


DEFAULT_USER = UserPersona(USER_NAME)
"""Who the user is when nobody said: ``{{user}}`` is "User", and no description."""
