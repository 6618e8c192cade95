"""The chat engine: one persona answering one message, with tools and history.

It knows nothing of A2A: the executor maps its events to the wire.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing

from persona_agent.chat.budget import TurnCalls
from persona_agent.chat.conversation_locks import KeyedLocks
from persona_agent.chat.events import ChatEvent, Done, Token
from persona_agent.chat.history import ConversationHistory
from persona_agent.chat.prompt_record import record_of
from persona_agent.chat.supplied import handed_back, offered, sampling
from persona_agent.chat.tool_calls import TurnTools
from persona_agent.chat.tools import ToolSource, Turn
from persona_agent.chat.turn_modes import Opening, open_turn
from persona_agent.chat.turn_state import TurnState
from persona_agent.chat.usage_log import UsageLog
from persona_agent.chat.user_source import NO_USERS, UserSource
from persona_agent.conversations.branches import Branches
from persona_agent.conversations.prompt_store import PromptStore
from persona_agent.errors import LLMError
from persona_agent.knowledge.turn import NO_KNOWLEDGE, FoundPassages, TurnKnowledge, numbered
from persona_agent.llm.base import (
    ChatRequest,
    LLMBackend,
    Message,
    Progress,
    StreamEnd,
    StreamItem,
)
from persona_agent.llm.observed import observed_stream
from persona_agent.media.turn_images import NO_IMAGES, TurnImages
from persona_agent.memory.scope import NO_MEMORY, MemoryScope, Recalled, TurnMemory
from persona_agent.memory.summary import NO_SUMMARY, ConversationSummary
from persona_agent.observe.metrics import NO_METRICS, HubMetrics
from persona_agent.observe.pricing import PriceTable
from persona_agent.personas.model import Persona
from persona_agent.personas.turn_prompt import assemble_prompt
from persona_agent.personas.user_identity import UserPersona

__all__ = ["ChatEngine"]

logger = logging.getLogger(__name__)


class ChatEngine:
    """Answers messages as a persona.

    ``stream()`` serializes calls that share a conversation (per-context lock),
    so concurrent messages of one context never interleave their history; calls
    of different conversations run in parallel. A turn is written to the history
    only when it completes: a failed or cancelled answer leaves no trace there.

    Each model call is a span (``chat {model}``, with the GenAI conventions' attributes:
    tokens, finish reason, time to the first chunk); with ``metrics``, model calls,
    tokens and cost are counted (metrics that are off count nothing).
    """

    def __init__(
        self,
        llm: LLMBackend,
        history: ConversationHistory,
        tools: ToolSource | None = None,
        *,
        max_tool_iterations: int = 10,
        locks: KeyedLocks | None = None,
        prices: PriceTable | None = None,
        usage: UsageLog | None = None,
        metrics: HubMetrics = NO_METRICS,
        memory: TurnMemory = NO_MEMORY,
        summary: ConversationSummary = NO_SUMMARY,
        knowledge: TurnKnowledge = NO_KNOWLEDGE,
        users: UserSource = NO_USERS,
        images: TurnImages = NO_IMAGES,
        prompts: PromptStore | None = None,
    ) -> None:
        """``locks``: how turns of one conversation are kept apart (this process's locks;
        replicas pass :class:`~persona_agent.cluster.advisory_locks.AdvisoryLocks`); ``prices``:
        what tokens cost, for :attr:`Done.cost_usd`; ``usage``: where each completed answer's
        tokens and cost are recorded; ``tools``: what the model may call (MCP servers,
        other personas, outside agents: :class:`~persona_agent.chat.tools.ToolSources`);
        ``memory``: what the persona remembers of the caller (:mod:`persona_agent.memory`:
        none by default); ``summary``: the running summary of what left a conversation's
        window (:mod:`persona_agent.memory.summary`: none by default); ``knowledge``: the
        personas' documents, searched for each turn (:mod:`persona_agent.knowledge`: none
        by default); ``users``: who each turn's user is (:mod:`persona_agent.chat.user_source`:
        by default the message's, else "User"); ``images``: who sees images, where they are kept;
        ``prompts``: where each answer's prompt record is kept (:mod:`.prompt_record`: by
        default the last 20 of each conversation, in the history's database)."""
        self.images = images
        self.users = users
        self.memory = memory
        self.summary = summary
        self.knowledge = knowledge
        self.prices = prices if prices is not None else PriceTable()
        self.usage = usage
        self.metrics = metrics
        self.llm = llm
        self.history = history
        self.turn_tools = TurnTools(tools)
        self.prompts = prompts if prompts is not None else PromptStore(history.writer)
        self.max_tool_iterations = max_tool_iterations
        self._locks = locks if locks is not None else KeyedLocks()
        self.branches = Branches(history.writer, history)
        """The conversations' branches (a regeneration's answers, a continuation's text)."""

    @property
    def tools(self) -> ToolSource | None:
        """What the model may call (``None``: nothing)."""
        return self.turn_tools.tools

    @property
    def locks(self) -> KeyedLocks:
        """The per-conversation locks its turns hold (conversation changes take them too)."""
        return self._locks

    async def stream(
        self,
        persona: Persona,
        context_id: str,
        user_message: str,
        *,
        turn: Turn | None = None,
    ) -> AsyncGenerator[ChatEvent, None]:
        """Answer ``user_message`` in the conversation ``context_id`` of ``persona`` (the
        executor's :func:`~persona_agent.conversations.keys.conversation_key`: the caller's).

        Yields :class:`Token` as text arrives, :class:`ToolStart`/:class:`ToolEnd`
        around each tool call, and a final :class:`Done`. Raises
        :class:`LLMError` when the model fails. Close the iterator (or cancel its
        consumer) to stop: the LLM stream is closed at once, a tool call abandoned.

        ``turn``: who asks and where, for the tools (the executor's; by default the
        conversation alone). A tool's progress is yielded as :class:`ToolOutput`.

        ``turn.budget``: the request's calls (:mod:`persona_agent.chat.budget`). The turn
        keeps one model call for its last answer; when the budget has no other left (or
        no tool call), that call is made without tools, as at the tool cap, and a tool
        call past the budget is an error the model reads. Raises
        :class:`~persona_agent.errors.BudgetSpentError` when not even that one call is
        left.

        A tool that asks the user a question (:class:`~persona_agent.chat.tools.ToolQuestion`)
        ends the turn: :class:`Done` carries the ``question``. The next message of the same
        task (``turn.task_id``) is the answer: it goes to that tool first, as a tool call of
        its own, and the model goes on with the tool's result.
        """
        key = f"{persona.id}:{context_id}"
        if turn is None:
            turn = Turn(persona_id=persona.id, conversation=context_id)
        async with self._locks.hold(key), TurnCalls(turn.budget) as calls:
            user = await self.users.resolve(turn.owner, key, turn.user, new=turn.new_context)
            opening = await open_turn(
                self.history, self.branches, persona, key, user_message, turn, user.name
            )
            try:
                state = await self._assemble(persona, key, opening, turn, calls, user)
                for iteration in range(self.max_tool_iterations + 1):
                    last_call = self._is_last_call(state, iteration)
                    async with aclosing(self._model_step(state, last_call)) as tokens:
                        async for token in tokens:
                            yield token
                    if not state.end.tool_calls or last_call:
                        self._final_answer(state)
                        break
                    async with aclosing(self.turn_tools.round(state)) as events:
                        async for event in events:
                            yield event
                    if state.asked is not None:  # the turn ends with the question, for the user
                        state.said.append({"role": "assistant", "content": state.asked.text})
                        break
                yield await self._finish(state)
            except BaseException:
                if opening.anchor is not None:  # a regeneration failed: the old answer back
                    await self.branches.restore_answer(key, opening.anchor)
                raise

    async def _assemble(
        self,
        persona: Persona,
        key: str,
        opening: Opening,
        turn: Turn,
        calls: TurnCalls,
        user: UserPersona,
    ) -> TurnState:
        """The turn's prompt (:func:`~persona_agent.personas.turn_prompt.assemble_prompt`): the
        system prompt with the lore brought up, the history, the greeting of a new
        conversation, the user's message (as the turn's mode opened it: ``opening``), the
        persona's post-history instructions; and its record, by section
        (:func:`~persona_agent.chat.prompt_record.record_of`)."""
        started = time.monotonic()
        past, said, user_message = opening.past, opening.said, opening.query
        scope = self.memory.scope(persona, turn.owner, turn.conversation)
        remembered, summary, found = await self._brought(persona, key, opening, turn, scope)
        prompt = await assemble_prompt(
            persona,
            past,
            [*said, *opening.extra],
            remembered=remembered,
            summary=summary,
            passages=numbered(found),
            user=user,
        )
        tools = offered(
            turn.supplied,
            self.tools.specs(persona)
            if self.tools is not None and self.llm.supports_tools and turn.mode != "continue"
            else [],
        )
        model = persona.model.name or self.llm.default_model
        sent = prompt.messages()
        record = record_of(
            persona,
            prompt,
            model=model,
            mode=turn.mode,
            window=self.history.max_messages,
            window_cut=opening.cut,
            sent=sent,
            memory_left_out=remembered.left_out,
            knowledge_left_out=found.left_out,
        )
        return TurnState(
            persona=persona,
            key=key,
            user_message=user_message,
            turn=turn,
            calls=calls,
            model=model,
            prompt=prompt,
            record=record,
            messages=await self.images.for_model(persona, key, sent, turn.images),
            said=said,
            tools=tools,
            started=started,
            memory_scope=scope,
            new_conversation=not past,
            remembered=remembered,
            # The answer to a tool's question goes to that tool, before the model is asked.
            answering=self.turn_tools.waiting(key, turn.task_id)
            if turn.mode == "message"
            else None,
            opening=opening,
            citations=tuple(passage.citation() for passage in found),
        )

    async def _brought(
        self,
        persona: Persona,
        key: str,
        opening: Opening,
        turn: Turn,
        scope: MemoryScope | None,
    ) -> tuple[Recalled, str, FoundPassages]:
        """What memory, the running summary and the documents bring to the turn's prompt:
        read side by side (a new conversation has no summary, a persona that remembers
        nothing no recall: no task for them)."""
        past, said, user_message = opening.past, opening.said, opening.query
        found = self.knowledge.for_turn(persona.id, turn.conversation, user_message, turn.files)
        if scope is None and not past:
            return Recalled(), "", await found
        in_prompt = [m["content"] for m in (*past, *said) if isinstance(m.get("content"), str)]
        return await asyncio.gather(
            self.memory.recall(scope, user_message, in_prompt, new=not past)
            if scope is not None
            else _nothing(),
            self.summary.current(key, new=not past),
            found,
        )

    def _is_last_call(self, state: TurnState, iteration: int) -> bool:
        """Whether the next call is the turn's last, made without tools: at the tool cap,
        or when the request's budget says so (a call to the model, not the answer to a
        tool's question)."""
        at_cap = iteration == self.max_tool_iterations
        return at_cap if state.answering is not None else state.calls.is_last(at_cap)

    async def _model_step(
        self, state: TurnState, last_call: bool
    ) -> AsyncGenerator[Token | Progress, None]:
        """One call to the model (or, in its place, the user's answer to the tool that
        asked): its text as :class:`Token` (the backend's :class:`Progress` before), its
        end in ``state.end``."""
        persona, model = state.persona, state.model
        if state.answering is not None:
            source, from_model = self.turn_tools.answer(state), False
        else:
            tools = state.tools
            request = ChatRequest(
                messages=state.messages,
                model=model,
                **sampling(persona, state.turn.supplied),
                tools=tools or None,
                tool_choice=("none" if last_call else "auto") if tools else None,
                whole=state.turn.whole,
                persona=persona,
                prompt=state.prompt,
            )
            state.llm_calls += 1
            source, from_model = self._model_call(request, model), True
        text: list[str] = []
        end = StreamEnd()
        async with aclosing(source) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, StreamEnd):
                    end = chunk
                elif isinstance(chunk, Progress):
                    yield chunk
                elif chunk.text:
                    text.append(chunk.text)
                    yield Token(chunk.text)
        state.usage += end.usage
        if from_model:
            state.calls.record(model, end.usage, self.prices.cost(model, end.usage))
        state.answer.extend(text)
        state.end, state.handed = handed_back(state.turn.supplied, end)
        state.text = "".join(text)

    @staticmethod
    def _final_answer(state: TurnState) -> None:
        """The last call's text is the turn's answer (tools it asked for at the cap, or
        past the budget, are ignored)."""
        if state.end.tool_calls:
            logger.warning(
                "persona %s: the model asked for tools on its final call; ignored",
                state.persona.id,
            )
        state.said.append({"role": "assistant", "content": state.text})

    async def _finish(self, state: TurnState) -> Done:
        """The turn's end: its history and usage written (in one group commit), and its
        :class:`Done`.

        Raises:
            LLMError: the model gave no answer (and no tool asked the user a question).
        """
        persona, model, usage, asked = state.persona, state.model, state.usage, state.asked
        text_answer = "".join(state.answer)
        if not text_answer.strip() and asked is None and not state.handed:
            raise LLMError("The language model returned an empty answer")
        cost = self.prices.cost(model, usage)
        if cost is not None:
            self.metrics.cost.labels(persona.id, model).inc(cost)
        scope, opening, mode = state.memory_scope, state.opening, state.turn.mode
        writes = [
            self.branches.extend_last(state.key, text_answer)
            if mode == "continue"
            else self.history.append(state.key, [] if state.turn.supplied else state.said)
        ]
        if self.usage:
            writes.append(self.usage.record(persona.id, model, usage, cost))
        if scope is not None and mode == "message":
            writes.append(self.memory.keep(scope, _from_user_on(state.said)))
        if state.turn.images and mode == "message":
            writes.append(self.images.keep(state.key, state.turn.images))
        # All in one group commit (one write alone: no task for it).
        await (writes[0] if len(writes) == 1 else asyncio.gather(*writes))
        if opening is not None and opening.anchor is not None:
            await self.branches.keep_answer(state.key, opening.anchor)
            opening.anchor = None
        if opening is not None and opening.greetings:
            await self.branches.add_greetings(state.key, opening.greetings, opening.greeting)
        record = state.record.as_json(usage, state.llm_calls)
        await self.prompts.put(state.key, record, new=state.turn.new_context)
        known = len(state.said) if state.new_conversation else 0  # a new one's messages
        if state.turn.supplied is None:  # the caller holds a supplied one: nothing stored
            self.summary.after_turn(persona, state.key, state.turn.owner, model, known)
        return Done(
            text=text_answer,
            usage=usage,
            model=model,
            duration_ms=int((time.monotonic() - state.started) * 1000),
            llm_calls=state.llm_calls,
            tool_calls=state.tool_calls,
            cost_usd=cost,
            question=asked.text if asked is not None else None,
            demo_model=self.llm.demo_model,
            remembered=state.remembered,
            citations=state.citations,
            cut=state.end.finish_reason == "length",
            handed=tuple(state.handed),
        )

    def _model_call(self, request: ChatRequest, model: str) -> AsyncGenerator[StreamItem, None]:
        """The backend's stream for ``request``, in a span of the call, and counted."""
        return observed_stream(self.llm, request, model, self.metrics)


async def _nothing() -> Recalled:  # nothing recalled (a persona that remembers nothing)
    return Recalled()


def _from_user_on(said: list[Message]) -> list[Message]:
    """A turn's messages from the user's on (not the greeting that opened a conversation)."""
    for index, message in enumerate(said):
        if message.get("role") == "user":
            return said[index:]
    return []
