"""A chat completion request, read: the persona (``model``), the new message, and what the
caller supplies with it (:class:`~persona_agent.chat.supplied.SuppliedTurn`), or a
:class:`WireError` naming the field at fault.

The client's messages are the conversation (the API keeps nothing between requests): the
system (or developer) messages that open it, up to the first with a ``name`` (an example
SillyTavern sends), are the caller's instructions, read after the persona's own; the last
user message is the turn's message, and everything before it the history. A request that
ends with tool results, or with the start of the persona's answer, has no new message:
the model goes on from the history.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from persona_agent.chat.supplied import SuppliedTurn
from persona_agent.llm.base import Message

__all__ = ["MAX_STOPS", "MAX_TOOLS", "CompletionAsk", "WireError", "read_request"]

MAX_TOOLS = 128
"""Tools one request may declare (OpenAI's own limit)."""
MAX_STOPS = 4
"""Stop sequences one request may give (OpenAI's own limit)."""
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
GOING_ON = "(The conversation goes on from its last message.)"
"""The task's message when the request brings no new user message (tool results, or the
start of the answer): what the task's history shows; the model is not shown it."""


class WireError(Exception):
    """A request refused, in OpenAI's terms: the status, the message, its ``type`` and
    ``code``, and the field at fault (``param``)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = headers or {}


def _bad(message: str, param: str, code: str | None = None) -> WireError:
    return WireError(400, message, param=param, code=code)


@dataclass(frozen=True, slots=True)
class CompletionAsk:
    """What a chat completion request asks."""

    model: str
    text: str
    """The turn's message (:data:`GOING_ON` when there is none)."""
    supplied: SuppliedTurn
    stream: bool = False
    include_usage: bool = False


def read_request(body: Any, *, max_messages: int) -> CompletionAsk:
    """The request ``body`` (parsed JSON) as a :class:`CompletionAsk`.

    Fields this door does not use (``top_p``, the penalties, ``seed``, ``logit_bias``,
    ``user``...) are ignored, as many servers do; ``n`` other than 1 is refused.

    Raises:
        WireError: 400, naming the field.
    """
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object", "body")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("'model' must be a persona's or a panel's id (GET /v1/models)", "model")
    n = body.get("n")
    if n is not None and n != 1:
        raise _bad("Only n=1 is served: a persona gives one answer a request", "n")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' must be a non-empty list", "messages")
    if len(messages) > max_messages:
        raise _bad(
            f"'messages' holds {len(messages)} messages; at most {max_messages} are taken "
            "(PERSONA_AGENT_OPENAI_MAX_MESSAGES)",
            "messages",
            "too_many_messages",
        )
    read = [_message(message, index) for index, message in enumerate(messages)]
    stream = body.get("stream") is True
    options = body.get("stream_options")
    include_usage = stream and isinstance(options, dict) and options.get("include_usage") is True
    text, supplied = _turn(read, body)
    return CompletionAsk(model, text, supplied, stream=stream, include_usage=include_usage)


def _turn(read: list[Message], body: dict[str, Any]) -> tuple[str, SuppliedTurn]:
    """The turn's message and what comes with it."""
    opening = 0
    while opening < len(read) and read[opening]["role"] == "system" and "name" not in read[opening]:
        opening += 1
    instructions = "\n\n".join(str(m["content"]) for m in read[:opening] if m["content"])
    rest = read[opening:]
    if not any(message["role"] == "user" for message in rest):
        raise _bad("'messages' holds no user message", "messages")
    asks = rest[-1]["role"] == "user" and bool(rest[-1]["content"])
    text = str(rest.pop()["content"]) if asks else GOING_ON
    history = ([{"role": "system", "content": instructions}] if instructions else []) + rest
    tools = _tools(body.get("tools"), body.get("tool_choice"))
    supplied = SuppliedTurn(
        history=tuple(history),
        tools=tools,
        temperature=_temperature(body.get("temperature")),
        max_tokens=_max_tokens(body),
        stop=_stops(body.get("stop")),
        answers_history=not asks,
    )
    return text, supplied


def _message(message: Any, index: int) -> Message:
    """One message as the engine takes it (the OpenAI format, checked)."""
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise _bad(f"{where} must be an object", where)
    role = message.get("role")
    if role not in _ROLES:
        raise _bad(f"{where}.role must be one of {', '.join(sorted(_ROLES))}", f"{where}.role")
    role = "system" if role == "developer" else role
    read: Message = {"role": role, "content": _content(message.get("content"), where)}
    name = message.get("name")
    if isinstance(name, str) and name and role != "tool":
        read["name"] = name[:64]
    if role == "assistant" and message.get("tool_calls"):
        read["tool_calls"] = _tool_calls(message["tool_calls"], where)
        read["content"] = read["content"] or None
    elif role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _bad(f"{where}.tool_call_id is needed", f"{where}.tool_call_id")
        read["tool_call_id"] = call_id
    return read


def _content(content: Any, where: str) -> str:
    """A message's text: a string, or text parts (an image or audio part is refused)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise _bad(f"{where}.content must be a string or a list of parts", f"{where}.content")
    texts = []
    for number, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in ("text", "input_text"):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise _bad(
                f"{where}.content[{number}] is a {kind!s:.40} part: this door reads text parts "
                "only (send images to a persona over A2A: docs/media.md)",
                f"{where}.content",
                "unsupported_content",
            )
        texts.append(str(part.get("text", "")))
    return "\n".join(texts)


def _tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(calls, list):
        raise _bad(f"{where}.tool_calls must be a list", f"{where}.tool_calls")
    read = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str):
            raise _bad(
                f"{where}.tool_calls: each needs an id and a function", f"{where}.tool_calls"
            )
        arguments = function.get("arguments", "")
        read.append(
            {
                "id": call["id"],
                "type": "function",
                "function": {
                    "name": str(function.get("name", "")),
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
    return read


def _tools(tools: Any, choice: Any) -> tuple[dict[str, Any], ...]:
    """The caller's tools (none when ``tool_choice`` is ``none``)."""
    if tools is None or tools == []:
        return ()
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS:
        raise _bad(f"'tools' must be a list of at most {MAX_TOOLS} tools", "tools")
    if choice not in (None, "auto", "none"):
        raise _bad(
            "Only tool_choice 'auto' and 'none' are served: the persona chooses its tools",
            "tool_choice",
        )
    read = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not function:
            raise _bad(f"tools[{index}] must be a function tool", f"tools[{index}]")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise _bad(
                f"tools[{index}].function.name must be 1 to 64 letters, digits, _ or -",
                f"tools[{index}].function.name",
            )
        spec: dict[str, Any] = {"name": name}
        for key in ("description", "parameters", "strict"):
            if key in function:
                spec[key] = function[key]
        read.append({"type": "function", "function": spec})
    return () if choice == "none" else tuple(read)


def _temperature(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 2:
        raise _bad("'temperature' must be a number from 0 to 2", "temperature")
    return float(value)


def _max_tokens(body: dict[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _bad(f"'{key}' must be a positive integer", key)
        return value
    return None


def _stops(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if (
        not isinstance(stops, list)
        or len(stops) > MAX_STOPS
        or not all(isinstance(stop, str) and stop for stop in stops)
    ):
        raise _bad(f"'stop' must be a string or a list of at most {MAX_STOPS} strings", "stop")
    return tuple(stops)
