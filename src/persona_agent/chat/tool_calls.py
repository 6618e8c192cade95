"""A turn's tool calls: the calls the model asked for, one after the other, each result
added to the messages for its next call; and a tool's question to the user, whose answer
(the next message of the same task) goes to that tool first.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from persona_agent.chat.events import ChatEvent, ToolEnd, ToolOutput, ToolStart
from persona_agent.chat.tools import ToolQuestion, ToolResult, ToolSource, ToolUpdate, Turn
from persona_agent.chat.turn_state import TurnState
from persona_agent.errors import ToolError
from persona_agent.llm.base import Message, StreamEnd, StreamItem, ToolCall
from persona_agent.personas.model import Persona

__all__ = ["MAX_TOOL_RESULT_CHARS", "MAX_WAITING", "TurnTools"]

logger = logging.getLogger(__name__)

MAX_TOOL_RESULT_CHARS = 20_000
MAX_WAITING = 1024
"""Tasks waiting for the user's answer to a tool's question, remembered at most."""


class TurnTools:
    """The tools' side of the engine's turns (``tools``: what the model may call; ``None``:
    nothing)."""

    def __init__(self, tools: ToolSource | None) -> None:
        self.tools = tools
        self._waiting: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()
        """(conversation, task id) → the tool that asked the user a question in that task,
        and the argument its answer goes in (kept in this process only)."""

    def waiting(self, conversation: str, task_id: str) -> tuple[str, str] | None:
        """The tool (and its argument) that waits for this message of ``task_id`` as the
        user's answer, no longer waiting (``None``: none)."""
        return self._waiting.pop((conversation, task_id), None)

    @staticmethod
    def answer(state: TurnState) -> AsyncGenerator[StreamItem, None]:
        """In place of the model: the call that gives the user's answer to the tool that
        asked (``state.answering``, then cleared)."""
        assert state.answering is not None
        tool, argument = state.answering
        state.answering = None
        call = ToolCall(_call_id(), tool, json.dumps({argument: state.user_message}))
        return _answer_with(call)

    async def round(self, state: TurnState) -> AsyncGenerator[ChatEvent, None]:
        """The tool calls the model asked for, one after the other, each result added to
        the messages for its next call."""
        calls = state.end.tool_calls
        call_message: Message = {
            "role": "assistant",
            "content": state.text or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in calls
            ],
        }
        state.messages.append(call_message)
        state.said.append(call_message)
        for call in calls:
            async with aclosing(self._tool_call(state, call)) as events:
                async for event in events:
                    yield event

    async def _tool_call(self, state: TurnState, call: ToolCall) -> AsyncGenerator[ChatEvent, None]:
        """One tool call: :class:`ToolStart`, its progress, :class:`ToolEnd`; a call the
        model got wrong, or past the budget, is an error the model reads."""
        state.tool_calls += 1
        arguments, problem = _parse_arguments(call)
        if problem is None and (spent := state.calls.take_tool()) is not None:
            problem = f"Error: {spent}: answer with what you have"
        yield ToolStart(call.id, call.name, arguments)
        result = ToolResult(problem or "", is_error=True)
        called = time.monotonic()
        if problem is None:
            tool = self._call_tool(state.persona, call.name, arguments, state.turn)
            async with aclosing(tool) as updates:
                async for update in updates:
                    if isinstance(update, ToolResult):
                        result = update
                    elif isinstance(update, ToolQuestion):
                        result = self._ask(state.key, state.turn, call, update, state.asked)
                        state.asked = state.asked or update
                    else:
                        yield ToolOutput(call.id, call.name, update.text, update.data)
        took = (time.monotonic() - called) * 1000
        yield ToolEnd(call.id, call.name, result.text, result.is_error, result.data, took)
        result_message: Message = {
            "role": "tool",
            "tool_call_id": call.id,
            "content": result.text[:MAX_TOOL_RESULT_CHARS],
        }
        state.messages.append(result_message)
        state.said.append(result_message)

    def _ask(
        self,
        conversation: str,
        turn: Turn,
        call: ToolCall,
        question: ToolQuestion,
        asked: ToolQuestion | None,
    ) -> ToolResult:
        """Keep the question's tool for the answer; what the model reads meanwhile. One
        question a turn: ``asked``, one already asked in it."""
        if not turn.task_id or asked is not None:  # no task for the answer, or a question
            return ToolResult(  # already waits for it
                f"Error: {call.name} asks a question that cannot be passed on now: {question.text}",
                is_error=True,
            )
        key = (conversation, turn.task_id)
        self._waiting[key] = (call.name, question.answer_argument)
        self._waiting.move_to_end(key)
        while len(self._waiting) > MAX_WAITING:
            self._waiting.popitem(last=False)
        return ToolResult(
            f"{call.name} asks the user: {question.text}\nThe question is passed on to the "
            "user; their answer goes to it with their next message.",
            data=question.data,
        )

    async def _call_tool(
        self, persona: Persona, name: str, arguments: dict[str, Any], turn: Turn
    ) -> AsyncGenerator[ToolUpdate, None]:
        """The tool's progress, then its result; a failure is a result the model reads."""
        if self.tools is None:
            yield ToolResult(f"Error: no tool named {name!r} is available", is_error=True)
            return
        try:
            async with aclosing(self.tools.call(persona, name, arguments, turn)) as updates:
                async for update in updates:
                    yield update
        except ToolError as error:
            logger.warning("tool %s failed: %s", name, error.message)
            yield ToolResult(f"Error: {error.message}", is_error=True)


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


async def _answer_with(call: ToolCall) -> AsyncGenerator[StreamItem, None]:
    """In place of the model: the call that gives the user's answer to the tool that asked."""
    yield StreamEnd(tool_calls=[call])


def _parse_arguments(call: ToolCall) -> tuple[dict[str, Any], str | None]:
    """The call's arguments as a dict, or a message for the model saying why not."""
    if not call.arguments.strip():
        return {}, None
    try:
        value = json.loads(call.arguments)
    except json.JSONDecodeError as error:
        return {}, f"Error: the arguments of {call.name} are not valid JSON ({error.msg})"
    if not isinstance(value, dict):
        return {}, f"Error: the arguments of {call.name} must be a JSON object"
    return value, None
