"""The chat engine: one persona answering one message, with tools and history.

It knows nothing of A2A: the executor maps its events to the wire.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, Protocol

from opentelemetry.trace import SpanKind

from persona_agent.chat.events import ChatEvent, Done, Token, ToolEnd, ToolStart
from persona_agent.chat.history import ConversationHistory
from persona_agent.chat.locks import KeyedLocks
from persona_agent.chat.usage import UsageLog
from persona_agent.errors import LLMError, ToolError
from persona_agent.llm.base import (
    ChatRequest,
    LLMBackend,
    Message,
    StreamEnd,
    TextDelta,
    ToolCall,
    Usage,
)
from persona_agent.metrics import HubMetrics
from persona_agent.personas.lore import select_lore
from persona_agent.personas.model import Persona
from persona_agent.personas.prompt import apply_macros, render_greeting, render_system_prompt
from persona_agent.pricing import PriceTable
from persona_agent.tracing import TRACER

__all__ = ["ChatEngine", "Toolbox"]

logger = logging.getLogger(__name__)

MAX_TOOL_RESULT_CHARS = 20_000


class Toolbox(Protocol):
    """What the engine needs of the MCP toolbox."""

    def tool_specs(self, allow: list[str] | None) -> list[dict[str, Any]]: ...

    async def call(
        self, name: str, arguments: dict[str, Any], *, allow: list[str] | None
    ) -> str: ...


class ChatEngine:
    """Answers messages as a persona.

    ``stream()`` serializes calls that share a conversation (per-context lock),
    so concurrent messages of one context never interleave their history; calls
    of different conversations run in parallel. A turn is written to the history
    only when it completes: a failed or cancelled answer leaves no trace there.

    Each model call is a span (``chat {model}``, with the GenAI conventions' attributes:
    tokens, finish reason, time to the first chunk); with ``metrics``, model calls,
    tokens and cost are counted.
    """

    def __init__(
        self,
        llm: LLMBackend,
        history: ConversationHistory,
        toolbox: Toolbox | None = None,
        *,
        max_tool_iterations: int = 10,
        locks: KeyedLocks | None = None,
        prices: PriceTable | None = None,
        usage: UsageLog | None = None,
        metrics: HubMetrics | None = None,
    ) -> None:
        """``locks``: how turns of one conversation are kept apart (this process's locks;
        replicas pass :class:`~persona_agent.cluster.locks.AdvisoryLocks`); ``prices``:
        what tokens cost, for :attr:`Done.cost_usd`; ``usage``: where each completed answer's
        tokens and cost are recorded."""
        self.prices = prices if prices is not None else PriceTable()
        self.usage = usage
        self.metrics = metrics
        self.llm = llm
        self.history = history
        self.toolbox = toolbox
        self.max_tool_iterations = max_tool_iterations
        self._locks = locks if locks is not None else KeyedLocks()

    async def stream(
        self, persona: Persona, context_id: str, user_message: str
    ) -> AsyncGenerator[ChatEvent, None]:
        """Answer ``user_message`` in the conversation ``context_id`` of ``persona`` (the
        executor's :func:`~persona_agent.a2a.executor.conversation_key`: the caller's).

        Yields :class:`Token` as text arrives, :class:`ToolStart`/:class:`ToolEnd`
        around each tool call, and a final :class:`Done`. Raises
        :class:`LLMError` when the model fails. Close the iterator (or cancel its
        consumer) to stop: the LLM stream is closed at once.
        """
        conversation = f"{persona.id}:{context_id}"
        async with self._locks.hold(conversation):
            started = time.monotonic()
            past = await self.history.load(conversation)
            turn: list[Message] = []
            greeting = None if past else render_greeting(persona)
            if greeting is not None:  # a new conversation opens with the persona's greeting
                turn.append({"role": "assistant", "content": greeting})
            turn.append({"role": "user", "content": user_message})
            messages: list[Message] = [
                {"role": "system", "content": _system_prompt(persona, [*past, *turn])},
                *past,
                *turn,
            ]
            if persona.post_history_instructions is not None:
                after = apply_macros(persona.post_history_instructions, persona.name.strip())
                messages.append({"role": "system", "content": after})
            allow = persona.tools.allow
            tools = (
                self.toolbox.tool_specs(allow)
                if self.toolbox is not None and self.llm.supports_tools
                else []
            )
            usage = Usage()
            answer: list[str] = []
            llm_calls = tool_calls = 0
            model = persona.model.name or self.llm.default_model
            for iteration in range(self.max_tool_iterations + 1):
                last_call = iteration == self.max_tool_iterations
                request = ChatRequest(
                    messages=messages,
                    model=model,
                    temperature=persona.model.temperature,
                    max_tokens=persona.model.max_tokens,
                    tools=tools or None,
                    tool_choice=("none" if last_call else "auto") if tools else None,
                    persona=persona,
                )
                text: list[str] = []
                end = StreamEnd()
                llm_calls += 1
                async with aclosing(self._model_call(request, model)) as chunks:
                    async for chunk in chunks:
                        if isinstance(chunk, StreamEnd):
                            end = chunk
                        elif chunk.text:
                            text.append(chunk.text)
                            yield Token(chunk.text)
                usage += end.usage
                answer.extend(text)
                if not end.tool_calls or last_call:
                    if end.tool_calls:
                        logger.warning(
                            "persona %s: the model asked for tools on its final call; ignored",
                            persona.id,
                        )
                    final: Message = {"role": "assistant", "content": "".join(text)}
                    turn.append(final)
                    break
                call_message: Message = {
                    "role": "assistant",
                    "content": "".join(text) or None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        }
                        for call in end.tool_calls
                    ],
                }
                messages.append(call_message)
                turn.append(call_message)
                for call in end.tool_calls:
                    tool_calls += 1
                    arguments, problem = _parse_arguments(call)
                    yield ToolStart(call.id, call.name, arguments)
                    if problem is not None:
                        result, is_error = problem, True
                    else:
                        result, is_error = await self._call_tool(call.name, arguments, allow)
                    yield ToolEnd(call.id, call.name, result, is_error)
                    result_message: Message = {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": result[:MAX_TOOL_RESULT_CHARS],
                    }
                    messages.append(result_message)
                    turn.append(result_message)

            text_answer = "".join(answer)
            if not text_answer.strip():
                raise LLMError("The language model returned an empty answer")
            cost = self.prices.cost(model, usage)
            if cost is not None and self.metrics is not None:
                self.metrics.cost.labels(persona.id, model).inc(cost)
            if self.usage is None:
                await self.history.append(conversation, turn)
            else:  # both in one group commit
                await asyncio.gather(
                    self.history.append(conversation, turn),
                    self.usage.record(persona.id, model, usage, cost),
                )
            yield Done(
                text=text_answer,
                usage=usage,
                model=model,
                duration_ms=int((time.monotonic() - started) * 1000),
                llm_calls=llm_calls,
                tool_calls=tool_calls,
                cost_usd=cost,
            )

    async def _model_call(
        self, request: ChatRequest, model: str
    ) -> AsyncGenerator[TextDelta | StreamEnd, None]:
        """The backend's stream for ``request``, in a span of the call, and counted."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.llm.name,
            "gen_ai.request.model": model,
        }
        if request.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.temperature
        if request.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_tokens
        with TRACER.start_as_current_span(
            f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            sent = time.monotonic()
            first = True
            end = StreamEnd()
            try:
                async with aclosing(self.llm.stream(request)) as chunks:
                    async for chunk in chunks:
                        if isinstance(chunk, StreamEnd):
                            end = chunk
                        elif first and chunk.text:
                            first = False
                            waited = time.monotonic() - sent
                            span.set_attribute("gen_ai.response.time_to_first_chunk", waited)
                        yield chunk
            except Exception:
                if self.metrics is not None:
                    self.metrics.llm_call(model, end.usage, failed=True)
                raise
            if self.metrics is not None:
                self.metrics.llm_call(model, end.usage, failed=False)
            if span.is_recording():
                span.set_attributes(
                    {
                        "gen_ai.usage.input_tokens": end.usage.prompt_tokens,
                        "gen_ai.usage.output_tokens": end.usage.completion_tokens,
                        "gen_ai.usage.cache_read.input_tokens": end.usage.cached_prompt_tokens,
                        "gen_ai.response.finish_reasons": [end.finish_reason or ""],
                    }
                )

    async def _call_tool(
        self, name: str, arguments: dict[str, Any], allow: list[str] | None
    ) -> tuple[str, bool]:
        if self.toolbox is None:
            return f"Error: no tool named {name!r} is available", True
        try:
            return await self.toolbox.call(name, arguments, allow=allow), False
        except ToolError as error:
            logger.warning("tool %s failed: %s", name, error.message)
            return f"Error: {error.message}", True


def _system_prompt(persona: Persona, conversation: list[Message]) -> str:
    """The persona's system prompt, with the lore entries the conversation brings up."""
    if persona.lore is None:
        return render_system_prompt(persona)
    texts = [
        message["content"]
        for message in conversation
        if message.get("role") in ("user", "assistant") and isinstance(message.get("content"), str)
    ]
    return render_system_prompt(persona, select_lore(persona.lore, texts))


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
