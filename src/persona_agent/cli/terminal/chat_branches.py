"""The terminal chat's conversation commands: /history, /retry, /swipe, /continue, /edit,
/delete, /fork, /greeting and /me, over the hub's REST API (docs/conversations.md).

They work on the conversation under way with a persona of a persona-agent hub: the one the
chat's A2A context names (``/api/v1/conversations/{persona}/{context}``). Numbers are the
ones ``/history`` shows: the greeting, each message of the user's and each answer of the
persona's, counted from 1; a command reads the conversation again before it acts, so
the numbers are those of the conversation as it is now.

A new conversation's chosen greeting (``/greeting K``) and who the user is (``/me``, said
before the first message) go with its first message, in the message's metadata (the A2A
conversation and user extensions, docs/a2a.md).

This module imports httpx, so :mod:`persona_agent.cli.terminal.chat` imports it only when the
command runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import typer
from a2a.types.a2a_pb2 import AgentCard

from persona_agent.a2a.extensions import (
    CONVERSATION_EXTENSION_URI,
    GREETING_EXTENSION_URI,
    USER_EXTENSION_URI,
)
from persona_agent.cli.terminal.a2a_chat import ChatError, ChatSession
from persona_agent.cli.terminal.chat_prompt import show_prompt
from persona_agent.cli.terminal.markup import AnswerWriter, echo_rendered

__all__ = ["COMMANDS", "STREAMED", "BranchCommands", "Shown", "greetings", "shown_turns"]

COMMANDS = frozenset(
    {
        "/history",
        "/retry",
        "/swipe",
        "/continue",
        "/edit",
        "/delete",
        "/fork",
        "/greeting",
        "/me",
        "/prompt",
    }
)
"""The commands this module carries out."""
STREAMED = frozenset({"/retry", "/continue"})
"""The commands whose answer streams: a turn of the persona, a task that Ctrl-C cancels."""
_WRITE = {"X-Requested-With": "persona-agent-chat"}
"""Sent with each change: a keyless hub takes REST writes from this machine (docs/api.md)."""


@dataclass(frozen=True)
class Shown:
    """One numbered turn of the conversation as ``/history`` shows it."""

    number: int
    kind: str
    """``greeting``, ``user`` or ``answer``."""
    id: int | None
    """The message that editing or deleting it changes (an answer's last with text)."""
    text: str
    own: str
    """The text of that message (an answer with tool calls shows the texts of several)."""
    swipes: dict[str, Any] | None
    """An answer's alternatives: ``{"anchor", "selected", "count", "texts"}``."""


def shown_turns(conversation: dict[str, Any]) -> list[Shown]:
    """The conversation's turns, numbered: its user messages and the answers after them
    (an answer: the persona's messages up to the next user message, tool calls included;
    one before any user message is the greeting)."""
    groups: list[dict[str, Any]] = []
    answer: dict[str, Any] | None = None
    for message in conversation.get("messages", []):
        role = message.get("role")
        content = message.get("content") if isinstance(message.get("content"), str) else ""
        if role == "user":
            answer = None
            groups.append({"kind": "user", "id": message["id"], "texts": [content], "swipes": None})
        elif role in ("assistant", "tool"):
            if answer is None:
                kind = "answer" if any(g["kind"] == "user" for g in groups) else "greeting"
                answer = {"kind": kind, "id": None, "texts": [], "swipes": message.get("swipes")}
                groups.append(answer)
            if role == "assistant" and (content or answer["id"] is None):
                answer["id"] = message["id"]
                if content:
                    answer["texts"].append(content)
    return [
        Shown(
            number=number,
            kind=group["kind"],
            id=group["id"],
            text="\n\n".join(group["texts"]),
            own=group["texts"][-1] if group["texts"] else "",
            swipes=group["swipes"],
        )
        for number, group in enumerate(groups, 1)
    ]


def greetings(card: AgentCard) -> list[str]:
    """The card's greeting then its alternate greetings (its greeting extension), or []."""
    for extension in card.capabilities.extensions:
        if extension.uri != GREETING_EXTENSION_URI:
            continue
        fields = extension.params.fields
        first = fields["greeting"].string_value if "greeting" in fields else ""
        others = fields["alternateGreetings"].list_value.values if first else []
        return [first, *(value.string_value for value in others)] if first else []
    return []


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, list):  # FastAPI's validation errors
        detail = "; ".join(str(item.get("msg", item)) for item in detail if isinstance(item, dict))
    return str(detail or response.reason_phrase or response.status_code)


def _say(name: str, text: str, note: str = "") -> None:
    typer.echo(typer.style(f"{name}: ", fg=typer.colors.CYAN, bold=True), nl=False)
    echo_rendered(text)
    if note:
        typer.secho(note, dim=True)


class BranchCommands:
    """The conversation commands of one chat; ``remember(context_id)`` is told of a
    conversation the chat moves to (a fork, one made with a greeting) so that the next
    run continues it."""

    def __init__(
        self, http: httpx.AsyncClient, session: ChatSession, remember: Callable[[str], None]
    ) -> None:
        self._http = http
        self._session = session
        self._remember = remember
        self.greeting: int | None = None
        """The greeting (0: the first) the next new conversation opens with, if chosen."""
        self.user: dict[str, str] | None = None
        """Who the user is in the next new conversation, if said."""

    # -- the REST API -------------------------------------------------------------------

    def _base(self) -> str:
        target = self._session.target
        if target.hub_url is None or target.persona_id is None:
            raise ChatError("this command needs a persona of a persona-agent hub, not --agent")
        return f"{target.hub_url}/api/v1/conversations"

    def _path(self, rest: str = "") -> str:
        base = self._base()
        context = self._session.context_id
        if not context:
            raise ChatError("no conversation yet: send a first message")
        persona = quote(self._session.target.persona_id or "", safe="")
        return f"{base}/{persona}/{quote(context, safe='')}{rest}"

    async def _call(
        self, method: str, url: str, body: object = None, *, missing_ok: bool = False
    ) -> Any:
        """The hub's answer (None for 204, or for 404 with ``missing_ok``)."""
        headers = _WRITE if method != "GET" else {}
        try:
            response = await self._http.request(method, url, json=body, headers=headers)
        except httpx.HTTPError as error:
            raise ChatError(f"Cannot reach the hub: {error}") from error
        if missing_ok and response.status_code == 404:
            return None
        if response.is_error:
            raise ChatError(f"The hub refused ({response.status_code}): {_detail(response)}")
        return None if response.status_code == 204 else response.json()

    async def _turns(self) -> list[Shown]:
        return shown_turns(await self._call("GET", self._path()))

    async def _numbered(self, number: int | None) -> Shown:
        """Turn ``number`` of the conversation as it is now (None: the last with an id)."""
        turns = [turn for turn in await self._turns() if turn.id is not None]
        if not turns:
            raise ChatError("the conversation has no messages yet")
        if number is None:
            return turns[-1]
        for turn in turns:
            if turn.number == number:
                return turn
        raise ChatError(f"no message {number}: /history lists them")

    # -- the commands -------------------------------------------------------------------

    async def run(self, name: str, argument: str) -> None:
        """Carry out ``name`` (one of :data:`COMMANDS`); a :class:`ChatError` says what went
        wrong, and the conversation is then as it was."""
        if name == "/history":
            self._history(await self._turns())
        elif name in STREAMED:
            await self._generate(name)
        elif name == "/swipe":
            await self._swipe(argument)
        elif name == "/edit":
            await self._edit(argument)
        elif name == "/delete":
            number = _number(argument, "/delete N: which message (/history numbers them)?")
            turn = await self._numbered(number)
            await self._call("DELETE", self._path(f"/messages/{turn.id}?following=false"))
            typer.secho(f"(message {number} deleted)", dim=True)
        elif name == "/fork":
            await self._fork(argument)
        elif name == "/greeting":
            self._greeting(argument)
        elif name == "/me":
            await self._me(argument)
        elif name == "/prompt":  # what reached the model for the last answer
            show_prompt(await self._call("GET", self._path("/prompt"), missing_ok=True))

    def _history(self, turns: list[Shown]) -> None:
        if not turns:
            typer.secho("(no messages yet)", dim=True)
        for turn in turns:
            who = "you" if turn.kind == "user" else self._session.name
            swipes = turn.swipes
            where = f"  ({swipes['selected'] + 1}/{swipes['count']})" if swipes else ""
            text = turn.text.replace("\n", "\n     ")
            typer.echo(f"{turn.number:>3}. " + typer.style(f"{who}: ", bold=True), nl=False)
            echo_rendered(text, nl=False)
            typer.secho(where, dim=True)

    async def _generate(self, name: str) -> None:
        """Regenerate or continue the last answer, shown as it is written (the hub's
        server-sent events: the turn is a task, which leaving the stream cancels)."""
        regenerate = name == "/retry"
        typer.secho("(writing another answer...)" if regenerate else "(continuing...)", dim=True)
        operation = "/regenerate" if regenerate else "/continue"
        typer.echo(
            typer.style(f"{self._session.name}: ", fg=typer.colors.CYAN, bold=True), nl=False
        )
        if not regenerate:
            typer.echo("…", nl=False)
        try:
            done = await self._streamed(self._path(operation))
        finally:
            typer.echo("")
        if not regenerate:
            return
        last = shown_turns(done.get("conversation", {}))
        swipes = last[-1].swipes if last else None
        if swipes:
            typer.secho(
                f"(answer {swipes['selected'] + 1}/{swipes['count']}: /swipe N shows another)",
                dim=True,
            )

    async def _streamed(self, url: str) -> dict[str, Any]:
        """POST ``url`` asking for server-sent events; each ``text`` shown as it comes, the
        ``answer`` event's data returned; an ``error`` event or a refusal a
        :class:`ChatError`."""
        headers = {**_WRITE, "Accept": "text/event-stream"}
        event = ""
        writer = AnswerWriter()
        try:
            async with self._http.stream("POST", url, json={}, headers=headers) as response:
                if response.is_error:
                    await response.aread()
                    raise ChatError(
                        f"The hub refused ({response.status_code}): {_detail(response)}"
                    )
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        event = line.removeprefix("event: ")
                    elif line.startswith("data: "):
                        data = json.loads(line.removeprefix("data: "))
                        if event == "text":
                            writer.write(str(data.get("text", "")))
                        elif event == "answer":
                            return dict(data)
                        elif event == "error":
                            raise ChatError(
                                f"The answer failed ({data.get('status')}): {data.get('detail')}"
                            )
        except httpx.HTTPError as error:
            raise ChatError(f"Cannot reach the hub: {error}") from error
        finally:
            writer.end()
        raise ChatError("The hub's answer ended before the persona's")

    async def _swipe(self, argument: str) -> None:
        turns = await self._turns()
        last = next((t for t in reversed(turns) if t.kind in ("answer", "greeting")), None)
        swipes = last.swipes if last is not None else None
        if last is None or not swipes:
            raise ChatError("the last answer has no alternatives: /retry writes one")
        count = int(swipes["count"])
        if not argument:
            at = f"answer {swipes['selected'] + 1}/{count}"
            typer.secho(f"({at}: /swipe N, 1 to {count})", dim=True)
            return
        number = _number(argument, f"/swipe N: which alternative, 1 to {count}?")
        if not 1 <= number <= count:
            raise ChatError(f"/swipe N: the last answer has alternatives 1 to {count}")
        body = {"selected": number - 1}
        done = await self._call("PUT", self._path(f"/swipes/{swipes['anchor']}"), body)
        shown = [t for t in shown_turns(done) if t.kind in ("answer", "greeting")]
        _say(self._session.name, shown[-1].text if shown else "", f"(answer {number}/{count})")

    async def _edit(self, argument: str) -> None:
        first, _, rest = argument.partition(" ")
        number = int(first) if first.isdigit() and rest.strip() else None
        text = rest.strip() if number is not None else argument
        if not text:
            raise ChatError("/edit [N] TEXT: the new text (of message N, else of the last)")
        turn = await self._numbered(number)
        await self._call("PATCH", self._path(f"/messages/{turn.id}"), {"content": text})
        typer.secho(f"(message {turn.number} edited)", dim=True)

    async def _fork(self, argument: str) -> None:
        number = _number(argument, "/fork [N]: at which message?") if argument else None
        turn = await self._numbered(number)
        made = await self._call("POST", self._path("/fork"), {"message_id": turn.id})
        context = str(made["context_id"])
        self._session.use_context(context)
        self._remember(context)
        typer.secho(
            f"(a new conversation, {context}, up to message {turn.number}: the chat goes on "
            "in it; /history shows it)",
            dim=True,
        )

    def _greeting(self, argument: str) -> None:
        texts = greetings(self._session.card)
        if len(texts) < 2:
            raise ChatError(f"{self._session.name} has no other greeting to choose")
        if not argument:
            for number, text in enumerate(texts, 1):
                typer.echo(f"{number:>3}. {text}")
            typer.secho("(/greeting K opens the conversation with greeting K)", dim=True)
            return
        if self._session.context_id:
            raise ChatError("/greeting K chooses how a new conversation opens: /new first")
        number = _number(argument, f"/greeting K: which greeting, 1 to {len(texts)}?")
        if not 1 <= number <= len(texts):
            raise ChatError(f"/greeting K: {self._session.name} has greetings 1 to {len(texts)}")
        self.greeting = number - 1
        _say(self._session.name, texts[number - 1])

    async def _me(self, argument: str) -> None:
        if not argument:
            user = self.user
            if self._session.context_id:
                user = await self._call("GET", self._path("/user"), missing_ok=True)
            name = (user or {}).get("name") or "User"
            described = f" ({user['description']})" if user and user.get("description") else ""
            typer.secho(f"(you are {name}{described}: /me NAME [-- DESCRIPTION])", dim=True)
            return
        name, _, description = argument.partition("--")
        user = {"name": name.strip(), "description": description.strip()}
        if not user["name"]:
            raise ChatError("/me NAME [-- DESCRIPTION]: your name, please")
        if self._session.context_id:
            await self._call("PUT", self._path("/user"), user)
        else:
            self.user = user  # the conversation is made with it
        typer.secho(f"(you are {user['name']} in this conversation)", dim=True)

    def first_message_metadata(self) -> dict[str, Any] | None:
        """The metadata of a new conversation's first message: the greeting it opens with
        (the A2A conversation extension) and who the user is (the user extension), if
        chosen; then nothing is chosen any more."""
        if self._session.context_id:
            return None
        metadata: dict[str, Any] = {}
        if self.greeting:
            metadata[CONVERSATION_EXTENSION_URI] = {"greeting": self.greeting}
        if self.user is not None:
            metadata[USER_EXTENSION_URI] = self.user
        self.greeting = self.user = None
        return metadata or None

    def reset(self) -> None:
        """A new conversation: nothing chosen for it yet."""
        self.greeting = self.user = None


def _number(argument: str, question: str) -> int:
    if not argument.strip().isdigit():
        raise ChatError(question)
    return int(argument.strip())
