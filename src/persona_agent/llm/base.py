"""The LLM backend interface: one streaming chat call, OpenAI message format."""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from persona_agent.observe.usage import Usage
from persona_agent.personas.model import Persona
from persona_agent.personas.turn_prompt import PromptSections

__all__ = [
    "TEXT_INTERVAL",
    "ChatRequest",
    "LLMBackend",
    "Pacer",
    "Progress",
    "StreamEnd",
    "StreamItem",
    "TextDelta",
    "ToolCall",
    "Usage",
    "message_text",
    "next_batch",
]

T = TypeVar("T")

TEXT_INTERVAL = 0.02
"""A backend gives out text at most every 20 ms (the first text at once): what arrives
meanwhile goes out as one piece, so a fast model's 500 tokens are not 500 events to every
client, and a token is never held longer than this."""
MAX_BATCH = 256
"""Pieces taken into one batch at most, however fast they come."""


async def next_batch(
    queue: asyncio.Queue[T], deadline: float, final: Callable[[T], bool]
) -> list[T]:
    """The queue's next item (waited for as long as it takes), then every item that arrives
    before ``deadline`` (``time.monotonic()``; passed: only those already there), up to
    :data:`MAX_BATCH`. A ``final`` item ends the batch at once."""
    batch = [await queue.get()]
    while not final(batch[-1]) and len(batch) < MAX_BATCH:
        if not queue.empty():
            batch.append(queue.get_nowait())
            continue
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            async with asyncio.timeout(remaining):
                batch.append(await queue.get())
        except TimeoutError:
            break
    return batch


class Pacer(Generic[T]):
    """Items from a producer (:meth:`put`, on the event loop) to one consumer
    (:meth:`batch`), given out as :func:`next_batch` gives a queue's, with no queue, timeout
    or exception an item: the producer wakes the consumer when a batch is due, and sets a
    timer only for an item that comes before the consumer's deadline."""

    def __init__(self, final: Callable[[T], bool]) -> None:
        self._final = final
        self._items: list[T] = []
        self._due = False
        """A final item, or :data:`MAX_BATCH` items, are there: a batch, whatever the time."""
        self._deadline = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def put(self, item: T) -> None:
        self._items.append(item)
        if self._final(item) or len(self._items) >= MAX_BATCH:
            self._due = True
        if self._waiter is not None and (self._due or self._timer is None):
            self._wake_when_due()

    async def batch(self, deadline: float) -> list[T]:
        """The next item (waited for as long as it takes), with every item that arrives
        before ``deadline`` (``time.monotonic()``; passed: only those already there), up to
        :data:`MAX_BATCH`. A final item ends the batch at once."""
        self._deadline = deadline
        while not (self._items and (self._due or time.monotonic() >= deadline)):
            self._waiter = asyncio.get_running_loop().create_future()
            if self._items:
                self._wake_when_due()
            try:
                await self._waiter
            finally:
                self._waiter = None
                self._stop_timer()
        batch, self._items = self._items[:MAX_BATCH], self._items[MAX_BATCH:]
        self._due = len(self._items) >= MAX_BATCH or any(map(self._final, self._items))
        return batch

    def _wake_when_due(self) -> None:
        """Wake the waiting consumer now if a batch is due, else at its deadline."""
        remaining = self._deadline - time.monotonic()
        if self._due or remaining <= 0:
            self._ring()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(remaining, self._ring)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()  # harmless when it is the timer that rang
            self._timer = None

    def _ring(self) -> None:
        self._stop_timer()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


Message = dict[str, Any]
"""A chat message in the OpenAI format: ``{"role": ..., "content": ..., ...}``."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call requested by the model; ``arguments`` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of answer text, as the model produces it."""

    text: str


@dataclass(frozen=True, slots=True)
class Progress:
    """What a backend is doing before its first text, when that takes a while (the embedded
    model): ``"loading"`` the model, ``"waiting"`` for earlier generations, ``"reading"``
    the prompt (``tokens``: how many it reads, what it had read before left out)."""

    phase: Literal["loading", "waiting", "reading"]
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The last item of every successful stream."""

    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None


StreamItem = TextDelta | Progress | StreamEnd
"""What a backend's stream yields (:class:`Progress` is optional: only before text)."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    messages: list[Message]
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    """Texts the answer ends before (a caller's, through the OpenAI-compatible door)."""
    tools: list[dict[str, Any]] | None = None
    """OpenAI function-tool specs: ``{"type": "function", "function": {...}}``."""
    tool_choice: str | None = None
    """``"auto"``, ``"none"`` or None (the server's default)."""
    whole: bool = False
    """Nobody watches the answer grow (a blocking send): a backend may give the text in
    fewer pieces (the first text still at once), and spare the work of every other."""
    persona: Persona | None = None
    """Who speaks. The system message in ``messages`` already says so for a chat model."""
    prompt: PromptSections | None = None
    """The turn's prompt as assembled once (``messages`` is its rendering for a chat
    model, then the turn's tool calls and results): a backend that prompts another way
    (the embedded model's transcript) renders these sections, never parses ``messages``
    back. ``None``: a request made without a persona (``messages`` alone)."""


class LLMBackend(ABC):
    """A chat model that streams.

    ``stream()`` yields :class:`TextDelta` items as the model produces them,
    then exactly one :class:`StreamEnd`; a backend that can keep a caller waiting before
    its first text may say why first (:class:`Progress`). Any failure raises
    :class:`persona_agent.errors.LLMError` with a short message fit for a client.
    Closing the iterator early (``aclose()``, or cancelling the task that
    iterates it) closes the underlying stream: no further tokens are read.
    """

    name: str = "llm"
    supports_tools: bool = True
    supports_images: bool = True
    """It can pass images on to its models (which see: :mod:`persona_agent.media.vision`)."""
    demo_model: bool = False
    """Its answers come from a model that is only there so that something answers (the
    embedded one): clients label them as such (``demoModel`` in cost-v1)."""
    prompt_tokens: int | None = None
    """Tokens a prompt may take, where the backend knows (the embedded model: its context
    less its answer's length); ``None``: the model server's to say."""

    @property
    @abstractmethod
    def default_model(self) -> str: ...

    @abstractmethod
    def stream(self, request: ChatRequest) -> AsyncGenerator[StreamItem, None]: ...

    @property
    def where(self) -> str:
        """Where the model is, for the start-up log: a server's base URL (no credentials) or
        a model file; '' when there is nothing to say."""
        return ""

    @property
    def loaded(self) -> bool:
        """Whether the backend answers at once (a backend with a model of its own to load
        says so until :meth:`load` is done)."""
        return True

    async def load(self) -> None:  # noqa: B027 - optional hook
        """Get ready to answer (load a model); later calls return at once."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections and workers."""


def message_text(message: Mapping[str, object], separator: str = " ") -> str:
    """The text of an OpenAI-shaped chat message: its ``content`` when that is a string, or
    the text of its ``{"type": "text"}`` parts joined by ``separator`` when it is a list of
    parts (images and other parts have none); empty when there is no content."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return separator.join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""
