"""Who the user is, kept: each identified caller's saved user persona and each
conversation's (``pa_user_personas``), and which one a turn uses.

A turn's user persona is, first found: the one its message carries (the A2A user
extension, stored then as the conversation's), the conversation's, the caller's saved one,
else :data:`~persona_agent.personas.user_identity.DEFAULT_USER` ("User", no description).
A caller's saved persona is read by its owner only: an anonymous caller has none, and no
caller's is ever read for another's turn.
"""

from __future__ import annotations

import time

from persona_agent.db import GroupCommitWriter, Sql, like_escaped
from persona_agent.personas.user_identity import DEFAULT_USER, UserPersona

__all__ = ["UserPersona", "UserPersonas", "caller_scope", "conversation_scope"]

_T = "pa_user_personas"
"""One row per scope: an identified caller's saved user persona, or one conversation's
(:mod:`.user_persona_table`)."""
_COLUMNS = f"SELECT {_T}.scope, {_T}.name, {_T}.description FROM {_T} "
# Two scopes at most, each a parameter of its own.
_SELECT = (
    Sql(_COLUMNS + f"WHERE {_T}.scope = :first", table=_T),
    Sql(_COLUMNS + f"WHERE {_T}.scope = :first OR {_T}.scope = :second", table=_T),
)
_INSERT = Sql(
    f"INSERT INTO {_T} (scope, name, description, at_ms) "
    "VALUES (:scope, :name, :description, :at_ms)",
    table=_T,
)
_DELETE = Sql(f"DELETE FROM {_T} WHERE {_T}.scope = :the_scope", table=_T)
_SCOPES_LIKE = Sql(
    f"SELECT {_T}.scope FROM {_T} WHERE {_T}.scope LIKE :pattern ESCAPE '\\'", table=_T
)
_DELETE_LIKE = Sql(f"DELETE FROM {_T} WHERE {_T}.scope LIKE :pattern ESCAPE '\\'", table=_T)


def caller_scope(owner: str) -> str:
    """The scope of an identified caller's saved user persona."""
    return f"caller:{owner}"


def conversation_scope(key: str) -> str:
    """The scope of one conversation's user persona (``key``: the history's key,
    ``{persona_id}:{conversation_key(owner, context_id)}``)."""
    return f"conversation:{key}"


class UserPersonas:
    """The user personas in the hub's database (every replica reads the same rows)."""

    def __init__(self, writer: GroupCommitWriter) -> None:
        self._db = writer

    async def get_caller(self, owner: str) -> UserPersona | None:
        """An identified caller's saved user persona (``None``: none saved)."""
        return (await self._read([caller_scope(owner)])).get(caller_scope(owner))

    async def put_caller(self, owner: str, user: UserPersona) -> None:
        """Save ``user`` as the caller's (``owner``: an identified caller, never ``""``)."""
        if not owner:
            raise ValueError("an anonymous caller has no saved user persona")
        await self._put(caller_scope(owner), user)

    async def delete_caller(self, owner: str) -> bool:
        """Delete the caller's saved user persona; whether there was one."""
        return await self._remove(caller_scope(owner))

    async def get_conversation(self, key: str) -> UserPersona | None:
        """The conversation's user persona (``None``: none was given for it)."""
        return (await self._read([conversation_scope(key)])).get(conversation_scope(key))

    async def put_conversation(self, key: str, user: UserPersona) -> None:
        """``user`` as the conversation's, from its next turn on."""
        await self._put(conversation_scope(key), user)

    async def delete_conversation(self, key: str) -> bool:
        """Forget the conversation's user persona (its turns then use the caller's saved
        one, or the default); whether there was one."""
        return await self._remove(conversation_scope(key))

    async def resolve(
        self, owner: str, key: str, from_message: UserPersona | None, *, new: bool = False
    ) -> UserPersona:
        """Who the user is for a turn of the conversation ``key`` of ``owner`` (``""``:
        anonymous): ``from_message`` (then kept as the conversation's), the
        conversation's, the caller's saved one, else the default. ``new``: the
        conversation was begun by this turn, so it has none stored (not read)."""
        conversation = conversation_scope(key)
        if from_message is not None:
            stored = None if new else (await self._read([conversation])).get(conversation)
            if stored != from_message:
                await self._put(conversation, from_message)
            return from_message
        scopes = [] if new else [conversation]
        if owner:
            scopes.append(caller_scope(owner))
        if not scopes:
            return DEFAULT_USER
        found = await self._read(scopes)
        for scope in scopes:
            if scope in found:
                return found[scope]
        return DEFAULT_USER

    async def forget_caller(self, owner: str, prefix: str) -> int:
        """Delete an identified caller's saved user persona and those of its conversations
        (``prefix``: its conversations' keys after the persona's id, ``@{caller}:``); how
        many there were."""
        pattern = "conversation:%:" + like_escaped(prefix) + "%"
        rows = await self._db.fetch(_SCOPES_LIKE, {"pattern": pattern})
        head = len("conversation:")
        # LIKE matches the prefix anywhere (and, on SQLite, in any case): keep exact ones.
        scopes = [s for (s,) in rows if s[head:].partition(":")[2].startswith(prefix)]
        if await self.get_caller(owner) is not None:
            scopes.append(caller_scope(owner))
        if scopes:
            await self._db.write(_DELETE, [{"the_scope": scope} for scope in scopes])
        return len(scopes)

    async def forget_persona(self, persona_id: str) -> None:
        """Delete the user personas of a deleted persona's conversations."""
        pattern = conversation_scope(like_escaped(persona_id) + ":") + "%"
        await self._db.write(_DELETE_LIKE, [{"pattern": pattern}])

    async def _read(self, scopes: list[str]) -> dict[str, UserPersona]:
        values = dict(zip(("first", "second"), scopes, strict=False))
        rows = await self._db.fetch(_SELECT[len(scopes) - 1], values)
        return {scope: UserPersona(name, description) for scope, name, description in rows}

    async def _put(self, scope: str, user: UserPersona) -> None:
        row = {
            "scope": scope,
            "name": user.name,
            "description": user.description,
            "at_ms": int(time.time() * 1000),
        }
        await self._db.write_together([(_DELETE, [{"the_scope": scope}]), (_INSERT, [row])])

    async def _remove(self, scope: str) -> bool:
        if not (await self._read([scope])):
            return False
        await self._db.write(_DELETE, [{"the_scope": scope}])
        return True
