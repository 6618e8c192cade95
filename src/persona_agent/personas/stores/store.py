"""Persona stores: where personas live, and who hears of their changes.

``PersonaStore`` is the interface; ``FilePersonaStore`` (``file_store.py``) keeps one
file per persona in a directory (the embedded default).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from persona_agent.errors import (
    PersonaFileError,
    PersonaNotFoundError,
)
from persona_agent.personas.formats.png import CleanImage
from persona_agent.personas.loader import (
    AVATAR_SUFFIX,
    PersonaSource,
    dump_persona_yaml,
)
from persona_agent.personas.model import Persona

__all__ = [
    "AVATAR_SUFFIX",
    "HeldPersonaStore",
    "PersonaChange",
    "PersonaStore",
    "not_found",
    "version_matches",
]

logger = logging.getLogger(__name__)

_NEW_FILE_MODE = 0o644
_IMAGE_CACHE_SIZE = 64
"""Avatars kept re-encoded in memory (least recently served are dropped)."""

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class PersonaChange:
    """A persona was created or replaced (``upsert``, with the new persona) or
    deleted (``delete``, ``persona`` is ``None``)."""

    kind: Literal["upsert", "delete"]
    persona_id: str
    persona: Persona | None


class PersonaStore(ABC):
    """Where personas live. Subscribers hear of every successful change.

    The hub uses a store through this interface only (the REST API, the registry's
    subscription, start-up), so a store in a database can stand in for the files.
    Implementations call ``super().__init__()`` and :meth:`_notify` after each change.
    """

    def __init__(self) -> None:
        self._subscribers: builtins.list[Callable[[PersonaChange], None]] = []

    @abstractmethod
    def load(self) -> builtins.list[PersonaFileError]:
        """Read every persona into memory, once, at start-up; one error per persona that
        could not be read (those are not served). Subscribers are not notified."""

    @abstractmethod
    async def list(self) -> builtins.list[Persona]:
        """Every persona, sorted by id."""

    @abstractmethod
    async def get(self, persona_id: str) -> Persona:
        """The persona with this id.

        Raises:
            PersonaNotFoundError: no persona has this id.
        """

    @abstractmethod
    async def put(
        self,
        persona: Persona,
        *,
        image: CleanImage | None = None,
        source: PersonaSource | None = None,
    ) -> Persona:
        """Create or replace the persona with ``persona.id``, then notify subscribers; the
        persona as stored. With ``image``, that becomes its avatar; with ``source`` (the
        file ``persona`` was read from), a store that keeps files keeps that text as it is.

        Raises:
            PersonaFileError: its ``avatar`` names no image the store has.
        """

    @abstractmethod
    async def create(
        self,
        persona: Persona,
        *,
        image: CleanImage | None = None,
        source: PersonaSource | None = None,
    ) -> Persona:
        """Create a persona whose id is new, then notify subscribers; the persona as stored
        (``image`` and ``source`` as for :meth:`put`).

        Raises:
            PersonaExistsError: a persona has this id already.
            PersonaFileError: its ``avatar`` names no image the store has.
        """

    @abstractmethod
    async def replace(
        self,
        persona: Persona,
        *,
        if_match: str | None = None,
        image: CleanImage | None = None,
        source: PersonaSource | None = None,
    ) -> Persona:
        """Replace an existing persona, then notify subscribers; the persona as stored
        (``image`` and ``source`` as for :meth:`put`).

        Raises:
            PersonaNotFoundError: no persona has this id.
            PreconditionFailedError: ``if_match`` is neither ``*`` nor the current version.
            PersonaFileError: its ``avatar`` names no image the store has.
        """

    @abstractmethod
    async def avatar(self, persona_id: str) -> CleanImage | None:
        """The persona's avatar as PNG without text chunks, or ``None`` if it has none.

        Raises:
            PersonaNotFoundError: no persona has this id.
        """

    @abstractmethod
    async def delete(self, persona_id: str, *, if_match: str | None = None) -> None:
        """Delete the persona with this id, then notify subscribers.

        Raises:
            PersonaNotFoundError: no persona has this id.
            PreconditionFailedError: ``if_match`` is neither ``*`` nor the current version.
            ReadOnlyPersonaError: the persona is a read-only example.
        """

    async def source(self, persona_id: str) -> PersonaSource:
        """The persona's file as stored: its text as written where the store keeps files,
        else the YAML file the hub writes for it.

        Raises:
            PersonaNotFoundError: no persona has this id.
        """
        persona = await self.get(persona_id)
        return PersonaSource(dump_persona_yaml(persona).encode("utf-8"), "yaml")

    def subscribe(self, callback: Callable[[PersonaChange], None]) -> Callable[[], None]:
        """Call ``callback`` after each successful put or delete; returns the unsubscribe.

        Callbacks run synchronously, in subscription order, on the task that made
        the change; one that raises is logged and does not stop the others.
        """
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def _notify(self, change: PersonaChange) -> None:
        for callback in builtins.list(self._subscribers):
            try:
                callback(change)
            except Exception:
                logger.exception("persona store subscriber failed on %s", change)


def not_found(persona_id: str) -> PersonaNotFoundError:
    return PersonaNotFoundError(f"No persona with id '{persona_id}'")


def version_matches(if_match: str, version: str) -> bool:
    """Whether an ``If-Match`` value (a list of entity tags, or ``*``) names ``version``."""
    tags = [tag.strip().removeprefix("W/").strip('"') for tag in if_match.split(",")]
    return "*" in tags or version in tags


class HeldPersonaStore(PersonaStore):
    """A store that holds every persona in memory (``_personas``, by id): reads never wait
    for files or a database. Both stores are one."""

    def __init__(self) -> None:
        super().__init__()
        self._personas: dict[str, Persona] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._changes: set[asyncio.Future[Any]] = set()

    async def list(self) -> builtins.list[Persona]:
        return [self._personas[key] for key in sorted(self._personas)]

    async def get(self, persona_id: str) -> Persona:
        try:
            return self._personas[persona_id]
        except KeyError:
            raise not_found(persona_id) from None

    async def _complete(self, change: Coroutine[Any, Any, _T]) -> _T:
        """Run ``change`` to the end even if the caller is cancelled meanwhile, so that
        the stored copy (file or row), memory and notification never part."""
        task = asyncio.ensure_future(change)
        self._changes.add(task)  # a strong reference while it runs
        task.add_done_callback(self._changes.discard)
        return await asyncio.shield(task)

    def _lock(self, persona_id: str) -> asyncio.Lock:
        """The lock that serializes the changes to one id."""
        return self._locks.setdefault(persona_id, asyncio.Lock())
