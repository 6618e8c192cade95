"""A scripted, OpenAI-compatible chat-completions server for tests and benchmarks.

:class:`FakeLLM` is a real HTTP server (uvicorn in a background thread, with
its own event loop) on 127.0.0.1 and a free port. It speaks the OpenAI wire
format: ``POST /v1/chat/completions`` answers JSON, or SSE chunks when
``stream`` is true (a final usage chunk with ``choices: []`` when
``stream_options.include_usage`` is set, then ``data: [DONE]``), and
``GET /v1/models`` lists one model, ``fake-llm``.

Each chat request pops the next scripted answer (FIFO, see :meth:`FakeLLM.script`), or
the next of a script kept for requests whose system prompt holds a given text (see
:meth:`FakeLLM.script_for`: one script per persona, for personas asked in parallel):

- :class:`Reply`: a text answer, streamed in several chunks;
- :class:`ToolCalls`: the model asks for tool calls, streamed the way OpenAI
  does (a first delta with id, type and name and empty arguments, then the
  argument fragments);
- :class:`Fail`: an HTTP error with an OpenAI error body; with a ``Retry-After``
  (or ``retry-after-ms``) header, the same request body again before that time has
  passed (by the server's clock, from when it sent the error) is refused with another
  429 and counted in :attr:`FakeLLM.too_early`;
- :class:`Hang`: the request is accepted and never answered.

A streamed :class:`Reply` with ``hold_after=N`` writes its first N chunks, then waits for
:meth:`FakeLLM.release`: what a client gets *while* the model still writes, shown by
events, not by timing (:meth:`FakeLLM.wait_held`).

With nothing scripted, the answer is
``Reply("Hello from the fake LLM. You said: <last user message>")``.

A request for a conversation's running summary (its system message holds the hub's
:data:`~persona_agent.memory.summary.SUMMARY_REQUEST`) is kept apart: it is in
:attr:`FakeLLM.summary_requests`, not :attr:`FakeLLM.requests`, counts in no counter,
and takes nothing from the scripts above. It pops the next of :meth:`FakeLLM.script_summary`,
or is answered with the summary so far and each message that follows it, joined by
`` | `` (:func:`summary_of`): so a test sees which messages a summary was made of.

A request with ``tool_choice == "none"`` always gets a text answer: if the next
scripted item is :class:`ToolCalls`, it is popped (it counts as that request's
answer) and the text ``"Final answer without tools."`` is sent instead.

Counters (:attr:`~FakeLLM.requests`, :attr:`~FakeLLM.disconnects`,
:attr:`~FakeLLM.chunks_sent`) belong to the current test: :meth:`FakeLLM.reset`
clears them, and a request that arrived before the reset no longer counts.
``GET /health`` answers ``{"status": "ok", "requests": N, "chunks": M}`` (the content
chunks streamed so far). A text answer with
no ``token_delay`` is written in one piece (every chunk in one body write), unless it
is ``own_writes``: then, as a real model server streams, each chunk is a body write of
its own, on an event-loop turn of its own.

The benchmarks run it as a process of its own::

    python -m tests.fakes.fake_llm --port 9100 [--tokens 20] [--token-delay-ms 20] \
        [--write-each-token] [--timing-file /tmp/llm-timing.tsv]

where every answer is the first ``--tokens`` words of :data:`BENCH_SENTENCE` (with
``--write-each-token``, each token an SSE event and a write of its own even at 0 ms a
token), no request is kept (only counted), and with
``--timing-file``, an answer whose last user message holds ``[[bench:ID]]`` appends
``ID<TAB>first<TAB>last<TAB>tokens``: ``time.monotonic()`` (one clock for every
process of the machine) just before its first and last tokens were written. An answer
whose last user message holds ``[[consult:ID]]``, with tools offered, is a call of the
tool ``consult__ID`` instead (the consultation benchmark).

A *disconnect* is a chat request the client abandoned (closed its connection)
before the server finished answering: a stream closed early, or a
:class:`Hang` or a delayed answer given up. It is noticed within one
``token_delay`` of the close.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Any

import uvicorn
from starlette.types import Message, Receive, Scope, Send

from persona_agent.memory.summary import FOLLOWING, NONE_YET, SO_FAR, SUMMARY_REQUEST

__all__ = ["Fail", "FakeLLM", "Hang", "Reply", "Scripted", "Seen", "ToolCalls", "summary_of"]

MODEL = "fake-llm"
FINAL_WITHOUT_TOOLS = "Final answer without tools."
_START_TIMEOUT = 120.0
_STOP_TIMEOUT = 10.0
WAIT = 60.0
"""Seconds the ``wait_*`` methods wait by default: a safety bound against a hang, not a
timing (each returns as soon as what it waits for has happened)."""
_WORDS = re.compile(r"\s*\S+|\s+$")
_ARGUMENT_FRAGMENT = 8  # characters of tool-call arguments per streamed delta
_DROP_MESSAGE = "ASGI callable returned without completing response."
_MARKER = re.compile(r"\[\[bench:([A-Za-z0-9_.-]+)\]\]")
_CONSULT_MARKER = re.compile(r"\[\[consult:([a-z0-9-]+)\]\]")
BENCH_SENTENCE = (
    "Hello from the fake LLM. This is a deterministic reply used to measure the overhead of "
    "the agent hub, not the quality of any model."
)
"""The benchmark's reply: its first ``--tokens`` words (one word a token)."""


@dataclass
class Reply:
    """A text answer.

    ``chunks`` are the streamed content deltas (default: the words of ``text``,
    each with its leading spaces, so that ``"".join(chunks) == text``); a
    non-streaming answer sends ``text``. ``token_delay`` is slept before each
    chunk, or ``token_delay * len(chunks)`` before a non-streaming answer.
    ``usage`` is ``(prompt_tokens, completion_tokens)``, by default the word
    counts of the request's messages and of ``text``. ``break_after=N`` drops
    the connection after N content chunks, without finish or ``[DONE]``;
    ``error_after=N`` sends an error event (``{"error": {"message": ...}}``,
    as OpenAI does mid-stream) after N content chunks, then ends the stream.
    """

    text: str
    chunks: list[str] | None = None
    token_delay: float = 0.0
    usage: tuple[int, int] | None = None
    cached_tokens: int = 0
    """Of the prompt tokens, those reported read from the server's cache
    (``usage.prompt_tokens_details.cached_tokens``, as OpenAI sends it)."""
    image_tokens: int = 0
    """Of the prompt tokens, those of images (``usage.prompt_tokens_details.image_tokens``)."""
    break_after: int | None = None
    error_after: int | None = None
    error_message: str = "scripted stream error"
    own_writes: bool = False
    """With no ``token_delay``: each chunk a body write of its own, on an event-loop turn
    of its own (as a real server streams), not every chunk in one write."""
    finish: str = "stop"
    """The answer's ``finish_reason`` (``length``: as a server that stopped at the cap)."""
    hold_after: int | None = None
    """Streamed: after this many content chunks, the answer waits until the test calls
    :meth:`FakeLLM.release` (:meth:`FakeLLM.wait_held` tells when it waits), so that a test
    can see what the client gets *while* the model is still writing, on any machine."""

    def pieces(self) -> list[str]:
        return list(self.chunks) if self.chunks is not None else _WORDS.findall(self.text)


@dataclass(frozen=True)
class Seen:
    """How a chat request arrived (headers by lower-case name)."""

    path: str
    query: str
    headers: dict[str, str]
    at: float
    """``time.monotonic()`` when the server read the request."""


def _seen(scope: Scope) -> Seen:
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
    return Seen(scope["path"], scope["query_string"].decode("latin-1"), headers, time.monotonic())


@dataclass
class ToolCalls:
    """The model asks for tool calls: ``(name, arguments)``, a dict or raw (even invalid) JSON."""

    calls: list[tuple[str, dict[str, Any] | str]]
    repeat_names: bool = False
    """Repeat the id and the name in every argument fragment, as some servers do."""


@dataclass
class Fail:
    """An HTTP error answer with an OpenAI error body; ``headers`` e.g. ``{"Retry-After": "0"}``."""

    status: int = 500
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Hang:
    """Accept the request and never answer (until the client gives up or the server stops)."""


Scripted = Reply | ToolCalls | Fail | Hang


class FakeLLM:
    """A scripted OpenAI-compatible server on 127.0.0.1; see the module docstring.

    Thread-safe: tests call it from their own thread or event loop; the server
    runs in a background thread. The ``wait_*`` methods block, so call them
    from async tests through ``asyncio.to_thread``. With ``record=False`` no request
    is kept, only counted (:attr:`requests` and :attr:`seen` stay empty): for a process
    that serves a benchmark. ``default`` makes the answer when nothing is scripted;
    ``timing`` receives the benchmark's token times (see the module docstring).
    """

    def __init__(
        self,
        *,
        default: Callable[[dict[str, Any]], Scripted] | None = None,
        timing: IO[str] | None = None,
        port: int = 0,
        record: bool = True,
    ) -> None:
        self._default = default
        self._timing = timing
        self._port = port
        self._record = record
        self._changed = threading.Condition()
        self._queue: deque[Scripted] = deque()
        self._for: dict[str, deque[Scripted]] = {}
        self._requests: list[dict[str, Any]] = []
        self._summaries: list[dict[str, Any]] = []
        self._summary_queue: deque[Scripted] = deque()
        self._seen: list[Seen] = []
        self._received = 0
        self._too_early = 0
        # The requests answered with a Retry-After: their body -> monotonic() before which
        # the same body again is refused (see :attr:`too_early`).
        self._held_off: dict[str, float] = {}
        self._disconnects = 0
        self._chunks_sent = 0
        self._active = 0
        self._holding = 0
        self._released = threading.Event()
        self._generation = 0
        self._ids = itertools.count(1)
        self._base_url: str | None = None
        self._thread: threading.Thread | None = None
        self._server: uvicorn.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # Owned by the server's event loop: the "client gone" events of requests in progress.
        self._in_progress: set[asyncio.Event] = set()
        self._stopping = False
        self._log_filter = _DropFilter(self)

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Serve on a free port; returns once connections are accepted (or raises)."""
        if self._thread is not None:
            raise RuntimeError("FakeLLM is already running")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app,
            interface="asgi3",
            lifespan="off",
            log_config=None,  # leave the process's logging configuration alone
            timeout_graceful_shutdown=2,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=self._run, args=(server, sock), name=f"fake-llm-{port}", daemon=True
        )
        self._server, self._thread, self._stopping = server, thread, False
        logging.getLogger("uvicorn.error").addFilter(self._log_filter)
        thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the fake LLM server did not start")
            time.sleep(0.01)
        self._base_url = f"http://127.0.0.1:{port}/v1"

    def stop(self) -> None:
        """Release hanging requests, shut the server down and join its thread."""
        server, thread, loop = self._server, self._thread, self._loop
        if server is None or thread is None:
            return
        server.should_exit = True
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(self._release_all)
        thread.join(_STOP_TIMEOUT)
        logging.getLogger("uvicorn.error").removeFilter(self._log_filter)
        self._server = self._thread = self._loop = None
        self._base_url = None
        if thread.is_alive():
            raise RuntimeError("the fake LLM server did not stop")

    def __enter__(self) -> FakeLLM:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def serve(self, port: int) -> None:
        """Serve in this thread, as its own process (uvicorn's defaults: uvloop, httptools),
        until interrupted: the benchmarks' LLM. (:class:`Hang` is for :meth:`start` only:
        nothing here releases a hanging request.)"""
        uvicorn.run(
            self._app,
            host="127.0.0.1",
            port=port,
            interface="asgi3",
            lifespan="off",
            log_level="warning",
        )

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, for the OpenAI client's ``base_url``."""
        if self._base_url is None:
            raise RuntimeError("FakeLLM is not running: call start()")
        return self._base_url

    # -- scripting and observation ---------------------------------------------------

    def script(self, *responses: Scripted) -> None:
        """Queue answers; each chat request pops the next one (FIFO)."""
        with self._changed:
            self._queue.extend(responses)

    def script_for(self, system_text: str, *responses: Scripted) -> None:
        """Queue answers for the chat requests whose system message(s) contain
        ``system_text`` (say ``"You are Socrates."``): such a request pops the next of these
        (FIFO) before the common script of :meth:`script`; once they are used up, it takes
        from the common script again. With several such texts in one system prompt, the
        first one scripted wins."""
        with self._changed:
            self._for.setdefault(system_text, deque()).extend(responses)

    def script_summary(self, *responses: Scripted) -> None:
        """Queue answers for summarization requests (FIFO; then the default summary)."""
        with self._changed:
            self._summary_queue.extend(responses)

    @property
    def summary_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the summarization requests since the last reset (a copy)."""
        with self._changed:
            return list(self._summaries)

    def wait_summaries(self, n: int, timeout: float = WAIT) -> None:
        """Block until at least ``n`` summarization requests were received."""
        self._wait(lambda: len(self._summaries) >= n, timeout, f"{n} summary request(s)")

    def reset(self) -> None:
        """Clear the queues, the recorded requests and the counters."""
        with self._changed:
            self._generation += 1
            self._queue.clear()
            self._summaries.clear()
            self._summary_queue.clear()
            self._for.clear()
            self._requests.clear()
            self._seen.clear()
            self._held_off.clear()
            self._disconnects = self._chunks_sent = self._active = self._holding = 0
            self._received = self._too_early = 0
            self._released.clear()
            self._changed.notify_all()

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat requests since the last reset, in order (a copy)."""
        with self._changed:
            return list(self._requests)

    @property
    def seen(self) -> list[Seen]:
        """How each chat request of the current test arrived: path, query and headers."""
        with self._changed:
            return list(self._seen)

    @property
    def too_early(self) -> int:
        """Chat requests that repeated one answered with a ``Retry-After`` (or
        ``retry-after-ms``) before that time had passed, by the server's own clock from
        when it sent that answer. Each was answered 429 again and took nothing from the
        script; it is in :attr:`requests` too. A client that honours ``Retry-After``
        leaves this at 0."""
        with self._changed:
            return self._too_early

    @property
    def disconnects(self) -> int:
        """Chat requests the client abandoned before the answer was complete."""
        with self._changed:
            return self._disconnects

    @property
    def chunks_sent(self) -> int:
        """Streamed text content chunks written (tool-call deltas are not counted)."""
        with self._changed:
            return self._chunks_sent

    @property
    def active(self) -> int:
        """Chat requests still being answered."""
        with self._changed:
            return self._active

    def release(self) -> None:
        """Let every answer held by :attr:`Reply.hold_after` go on (and those held later:
        until the next :meth:`reset`)."""
        self._released.set()

    def wait_held(self, n: int = 1, timeout: float = WAIT) -> None:
        """Block until ``n`` answers have reached their :attr:`Reply.hold_after` (their
        first chunks written, the rest waiting for :meth:`release`), else AssertionError."""
        self._wait(lambda: self._holding >= n, timeout, f"{n} held answer(s)")

    def wait_requests(self, n: int, timeout: float = WAIT) -> None:
        """Block until at least ``n`` chat requests were received, else AssertionError."""
        self._wait(lambda: self._received >= n, timeout, f"{n} request(s)")

    def wait_chunks(self, n: int, timeout: float = WAIT) -> None:
        """Block until at least ``n`` text chunks were streamed, else AssertionError."""
        self._wait(lambda: self._chunks_sent >= n, timeout, f"{n} chunk(s)")

    def wait_disconnect(self, timeout: float = WAIT) -> None:
        """Block until a client abandoned a chat request, else AssertionError."""
        self._wait(lambda: self._disconnects > 0, timeout, "a client disconnect")

    def wait_idle(self, timeout: float = WAIT) -> None:
        """Block until no chat request is being answered, else AssertionError.

        After this, :attr:`chunks_sent` stops growing until the next request.
        """
        self._wait(lambda: self._active == 0, timeout, "no request in progress")

    def _wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        with self._changed:
            if not self._changed.wait_for(condition, timeout):
                raise AssertionError(
                    f"fake LLM: waited {timeout}s for {what}; requests={self._received}, "
                    f"disconnects={self._disconnects}, active={self._active}"
                )

    # -- the server (runs in the background thread) ---------------------------------------

    def _run(self, server: uvicorn.Server, sock: socket.socket) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            await server.serve(sockets=[sock])

        try:
            asyncio.run(main())
        finally:
            sock.close()

    def _release_all(self) -> None:
        self._stopping = True
        for gone in self._in_progress:
            gone.set()

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"].rstrip("/")
        method = scope["method"]
        if path.endswith("/chat/completions") and method == "POST":
            await self._chat(scope, receive, send)
        elif path == "/health":
            with self._changed:
                count, chunks = self._received, self._chunks_sent
            await _send_json(send, 200, {"status": "ok", "requests": count, "chunks": chunks})
        elif path == "/props" and method == "GET":  # llama.cpp's: a template with tools
            await _send_json(send, 200, {"chat_template_caps": {"supports_tool_calls": True}})
        elif path in ("/tokenize", "/apply-template") and method == "POST":
            await _llama_cpp(path, json.loads(await _read_body(receive)), send)
        elif path.endswith("/models") and method == "GET":
            model = {"id": MODEL, "object": "model", "created": 0, "owned_by": "fake"}
            await _send_json(send, 200, {"object": "list", "data": [model]})
        else:
            await _send_error(send, 404, f"no route {method} {path}")

    async def _chat(self, scope: Scope, receive: Receive, send: Send) -> None:
        content_type = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
        if content_type.split(";")[0].strip().lower() != "application/json":
            # As OpenAI's API: a body that does not say it is JSON is refused.
            await _send_error(send, 415, f"unsupported content type {content_type!r}")
            return
        try:
            body = json.loads(await _read_body(receive))
            if not isinstance(body, dict):
                raise ValueError("the body is not a JSON object")
        except ValueError as exc:
            await _send_error(send, 400, f"bad request: {exc}")
            return
        if SUMMARY_REQUEST in _system_text(body):
            await self._summarize(body, receive, send)
            return
        key = _key(body) if self._held_off else ""
        with self._changed:
            generation = self._generation
            self._received += 1
            if self._record:
                self._requests.append(body)
                self._seen.append(_seen(scope))
            wait = self._held_off.get(key, 0.0) - time.monotonic() if key else 0.0
            if wait > 0:
                self._too_early += 1
                item = None
            else:
                self._held_off.pop(key, None)
                self._active += 1
                item = self._next_for(body)
            self._changed.notify_all()
        if wait > 0:
            headers = {"retry-after-ms": f"{wait * 1000:.0f}"}
            await _send_error(send, 429, "retried before its Retry-After", headers)
            return
        if item is None and self._default is not None:
            item = self._default(body)
        elif item is None:
            item = Reply(f"Hello from the fake LLM. You said: {_last_user_text(body)}")
        elif isinstance(item, ToolCalls) and body.get("tool_choice") == "none":
            item = Reply(FINAL_WITHOUT_TOOLS)

        answer = _Answer(self, generation, body, next(self._ids), send)
        watcher = asyncio.create_task(answer.watch(receive))
        self._in_progress.add(answer.gone)
        try:
            await answer.give(item)
        finally:
            self._in_progress.discard(answer.gone)
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            self._count(generation, active=-1)

    async def _summarize(self, body: dict[str, Any], receive: Receive, send: Send) -> None:
        """A summarization request: recorded apart, answered from its own script (or by
        :func:`summary_of`), and counted nowhere (its answer's generation is none)."""
        with self._changed:
            if self._record:
                self._summaries.append(body)
            item = self._summary_queue.popleft() if self._summary_queue else None
            self._changed.notify_all()
        answer = _Answer(self, -1, body, next(self._ids), send)
        watcher = asyncio.create_task(answer.watch(receive))
        self._in_progress.add(answer.gone)
        try:
            await answer.give(item if item is not None else Reply(summary_of(body)))
        finally:
            self._in_progress.discard(answer.gone)
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    def _next_for(self, body: dict[str, Any]) -> Scripted | None:
        """The next scripted answer for ``body`` (under the lock): from the first script of
        :meth:`script_for` whose text its system prompt holds, else from the common one."""
        if self._for:
            system = _system_text(body)
            for text, queue in self._for.items():
                if queue and text in system:
                    return queue.popleft()
        return self._queue.popleft() if self._queue else None

    def hold_off(self, body: dict[str, Any], seconds: float) -> None:
        """Refuse ``body`` again for ``seconds`` from now (see :attr:`too_early`)."""
        with self._changed:
            self._held_off[_key(body)] = time.monotonic() + seconds

    def _log_timing(self, body: dict[str, Any], first: float, last: float, tokens: int) -> None:
        """One line ``ID<TAB>first<TAB>last<TAB>tokens`` for an answer marked ``[[bench:ID]]``."""
        marker = _MARKER.search(_last_user_text(body)) if self._timing is not None else None
        if marker is not None and self._timing is not None:
            self._timing.write(f"{marker.group(1)}\t{first:.6f}\t{last:.6f}\t{tokens}\n")
            self._timing.flush()

    def _count(
        self,
        generation: int,
        *,
        disconnects: int = 0,
        chunks: int = 0,
        active: int = 0,
        holding: int = 0,
    ) -> None:
        with self._changed:
            if generation != self._generation:
                return  # a request from before the last reset
            self._disconnects += disconnects
            self._chunks_sent += chunks
            self._active += active
            self._holding += holding
            self._changed.notify_all()


class _Answer:
    """One chat request being answered, in the server's event loop."""

    def __init__(
        self, fake: FakeLLM, generation: int, body: dict[str, Any], number: int, send: Send
    ) -> None:
        self.fake = fake
        self.generation = generation
        self.body = body
        self.send = send
        self.gone = asyncio.Event()  # the client left, or the server is stopping
        self.client_left = False
        self.id = f"chatcmpl-fake-{number}"
        self.created = int(time.time())
        self.model = str(body.get("model") or MODEL)
        self.stream = bool(body.get("stream"))
        self.include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if fake._stopping:
            self.gone.set()

    async def watch(self, receive: Receive) -> None:
        """Wait for ``http.disconnect`` (the body has been read already)."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self.client_left = True
        self.gone.set()

    async def pause(self, seconds: float) -> bool:
        """Sleep, or stop early when the client leaves; True if it left (counted once)."""
        if not self.gone.is_set() and seconds > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await self.gone.wait()
        if not self.gone.is_set():
            return False
        if self.client_left:
            self.client_left = False  # count it once
            self.fake._count(self.generation, disconnects=1)
        return True

    async def tick(self, seconds: float) -> bool:
        """:meth:`pause` between two tokens. In a process serving a benchmark (nothing
        recorded), a plain sleep, the client's leaving noticed after it: no timer to cancel
        and no exception a token, so that the fake keeps up with hundreds of streams."""
        if self.fake._record:
            return await self.pause(seconds)
        if seconds > 0:
            await asyncio.sleep(seconds)
        return await self.pause(0)

    async def held(self) -> bool:
        """Wait for :meth:`FakeLLM.release` (:attr:`Reply.hold_after`); True if the client
        left meanwhile (or the server is stopping)."""
        self.fake._count(self.generation, holding=1)
        while not self.fake._released.is_set():
            if await self.pause(0.01):
                return True
        return False

    async def give(self, item: Scripted) -> None:
        if isinstance(item, Fail):
            delay = _retry_after(item.headers)
            if delay:
                self.fake.hold_off(self.body, delay)  # from now: before the client can read it
            await _send_error(self.send, item.status, item.message, item.headers)
        elif isinstance(item, Hang):
            await self.gone.wait()
            await self.pause(0)  # counts the disconnect if the client left
            if self.fake._stopping:
                await _send_error(self.send, 503, "the fake LLM is stopping")
        elif isinstance(item, Reply):
            await (self.stream_text(item) if self.stream else self.answer_text(item))
        else:
            await (self.stream_tools(item) if self.stream else self.answer_tools(item))

    # -- non-streaming -----------------------------------------------------------------

    async def answer_text(self, reply: Reply) -> None:
        if await self.pause(reply.token_delay * len(reply.pieces())):
            return
        message = {"role": "assistant", "content": reply.text}
        await self.complete(message, reply.finish, self.usage_of(reply))

    async def answer_tools(self, item: ToolCalls) -> None:
        if await self.pause(0):
            return
        calls = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            for call_id, name, args in self.tool_calls(item)
        ]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        await self.complete(message, "tool_calls", self.tool_usage(item))

    async def complete(self, message: dict[str, Any], finish: str, usage: dict[str, Any]) -> None:
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        await _send_json(
            self.send,
            200,
            {
                "id": self.id,
                "object": "chat.completion",
                "created": self.created,
                "model": self.model,
                "choices": [choice],
                "usage": usage,
            },
        )

    # -- streaming ---------------------------------------------------------------------

    async def stream_text(self, reply: Reply) -> None:
        await self.start_stream({"role": "assistant", "content": ""})
        pieces = reply.pieces()
        one_write = not reply.token_delay and not reply.own_writes and reply.hold_after is None
        if one_write and reply.break_after is None and reply.error_after is None:
            # Every chunk in one write: the cheapest answer (what the bench measures against).
            body = b"".join(self.chunk({"content": piece}) for piece in pieces)
            await self.emit(body)
            self.fake._count(self.generation, chunks=len(pieces))
            await self.finish_stream(reply.finish, self.usage_of(reply))
            return
        first = last = 0.0
        for sent, piece in enumerate(pieces):
            if reply.break_after is not None and sent >= reply.break_after:
                return  # uvicorn closes the connection mid-stream
            if reply.error_after is not None and sent >= reply.error_after:
                error = {"error": {"message": reply.error_message, "type": "server_error"}}
                await self.send(
                    {"type": "http.response.body", "body": self.event(error), "more_body": False}
                )
                return
            if sent == reply.hold_after and await self.held():
                return
            if await self.tick(reply.token_delay):
                return
            if not reply.token_delay and sent:
                await asyncio.sleep(0)  # own_writes: the next token on a turn of its own
            last = time.monotonic()
            first = first or last
            await self.emit(self.chunk({"content": piece}))
            self.fake._count(self.generation, chunks=1)
        if reply.break_after is not None:
            return
        await self.finish_stream(reply.finish, self.usage_of(reply))
        self.fake._log_timing(self.body, first, last, len(pieces))

    async def stream_tools(self, item: ToolCalls) -> None:
        calls = self.tool_calls(item)
        await self.start_stream({"role": "assistant", "content": None})
        for index, (call_id, name, arguments) in enumerate(calls):
            first = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            await self.emit(self.chunk({"tool_calls": [first]}))
            for start in range(0, len(arguments), _ARGUMENT_FRAGMENT):
                fragment = arguments[start : start + _ARGUMENT_FRAGMENT]
                delta: dict[str, Any] = {"index": index, "function": {"arguments": fragment}}
                if item.repeat_names:
                    delta |= {"id": call_id, "type": "function"}
                    delta["function"]["name"] = name
                await self.emit(self.chunk({"tool_calls": [delta]}))
        if await self.pause(0):
            return
        await self.finish_stream("tool_calls", self.tool_usage(item))

    async def start_stream(self, delta: dict[str, Any]) -> None:
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await self.send({"type": "http.response.start", "status": 200, "headers": headers})
        await self.emit(self.chunk(delta))

    async def finish_stream(self, finish: str, usage: dict[str, Any]) -> None:
        tail = self.chunk({}, finish)
        if self.include_usage:
            tail += self.event(self.head(choices=[], usage=usage))
        await self.send(
            {"type": "http.response.body", "body": tail + b"data: [DONE]\n\n", "more_body": False}
        )

    async def emit(self, data: bytes) -> None:
        await self.send({"type": "http.response.body", "body": data, "more_body": True})

    def head(self, **fields: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            **fields,
        }

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        extra = {"usage": None} if self.include_usage else {}
        return self.event(self.head(choices=[choice], **extra))

    @staticmethod
    def event(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

    # -- helpers -----------------------------------------------------------------------

    def tool_calls(self, item: ToolCalls) -> list[tuple[str, str, str]]:
        """``(id, name, arguments text)`` of each call."""
        number = self.id.rsplit("-", 1)[-1]
        return [
            (f"call_fake_{number}_{i}", name, args if isinstance(args, str) else json.dumps(args))
            for i, (name, args) in enumerate(item.calls)
        ]

    def prompt_tokens(self) -> int:
        messages = self.body.get("messages")
        if not isinstance(messages, list):
            return 0
        return sum(len(_text(m.get("content")).split()) for m in messages if isinstance(m, dict))

    def usage_of(self, reply: Reply) -> dict[str, Any]:
        prompt, completion = reply.usage or (self.prompt_tokens(), len(reply.text.split()))
        usage = _usage(prompt, completion)
        details = {"cached_tokens": reply.cached_tokens, "image_tokens": reply.image_tokens}
        if reply.cached_tokens or reply.image_tokens:
            usage["prompt_tokens_details"] = {k: v for k, v in details.items() if v}
        return usage

    def tool_usage(self, item: ToolCalls) -> dict[str, int]:
        """Roughly a token per four characters of arguments, plus one per call."""
        completion = sum(1 + len(args) // 4 for _, _, args in self.tool_calls(item))
        return _usage(self.prompt_tokens(), completion)


class _DropFilter(logging.Filter):
    """Hide uvicorn's error line for the connections a :class:`Reply` breaks on purpose."""

    def __init__(self, fake: FakeLLM) -> None:
        super().__init__()
        self.fake = fake

    def filter(self, record: logging.LogRecord) -> bool:
        thread = self.fake._thread
        return not (
            thread is not None
            and record.thread == thread.ident
            and record.getMessage() == _DROP_MESSAGE
        )


def _key(body: dict[str, Any]) -> str:
    """A request body as a string, the same for the same body (a retry sends it again)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _retry_after(headers: dict[str, str]) -> float:
    """Seconds a client is asked to wait: ``retry-after-ms``, or ``Retry-After`` in seconds
    (0 for an HTTP date or none)."""
    by_name = {name.lower(): value for name, value in headers.items()}
    try:
        if "retry-after-ms" in by_name:
            return max(0.0, float(by_name["retry-after-ms"]) / 1000)
        return max(0.0, float(by_name.get("retry-after", "0")))
    except ValueError:
        return 0.0


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _text(content: Any) -> str:
    """Message content: a string, or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _system_text(body: dict[str, Any]) -> str:
    """The text of a request's system messages."""
    messages = body.get("messages")
    return "\n".join(
        _text(m.get("content"))
        for m in (messages if isinstance(messages, list) else [])
        if isinstance(m, dict) and m.get("role") == "system"
    )


def _last_user_text(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    users: Iterator[Any] = (
        m
        for m in reversed(messages if isinstance(messages, list) else [])
        if isinstance(m, dict) and m.get("role") == "user"
    )
    last = next(users, None)
    return _text(last.get("content")) if last is not None else ""


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(parts)


async def _llama_cpp(path: str, body: dict[str, Any], send: Send) -> None:
    """llama.cpp's server's own tokenizer and chat template, roughly: a token a word (and a
    BOS token first), and each message as ``<role>content`` on a line."""
    if path == "/tokenize":
        await _send_json(send, 200, {"tokens": list(range(len(body["content"].split()) + 1))})
        return
    lines = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, list):
            content = " ".join(part.get("text", "") for part in content)
        lines.append(f"<{message['role']}>{content}\n")
    await _send_json(send, 200, {"prompt": "".join(lines) + "<assistant>"})


async def _send_json(
    send: Send, status: int, obj: Any, headers: dict[str, str] | None = None
) -> None:
    raw = [(b"content-type", b"application/json")]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": json.dumps(obj).encode()})


async def _send_error(
    send: Send, status: int, message: str, headers: dict[str, str] | None = None
) -> None:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    error = {"message": message, "type": kind, "param": None, "code": None}
    await _send_json(send, status, {"error": error}, headers)


def summary_of(body: dict[str, Any]) -> str:
    """The default answer to a summarization request: the summary so far (unless there was
    none) and each message that follows it, joined by `` | ``."""
    asked = _last_user_text(body)
    so_far, _, following = asked.partition(f"\n\n{FOLLOWING}\n")
    old = so_far.removeprefix(f"{SO_FAR}\n").strip()
    parts = [] if old == NONE_YET else [old]
    return " | ".join([*parts, *(line for line in following.splitlines() if line.strip())])


def bench_reply(
    tokens: int, token_delay: float, own_writes: bool = False
) -> Callable[[dict[str, Any]], Scripted]:
    """Every answer: the first ``tokens`` words of :data:`BENCH_SENTENCE`, cycling (each
    token a write of its own with ``own_writes``, see :class:`Reply`); but a
    request whose last message is the user's, holding ``[[consult:ID]]``, with tools
    offered, gets a call of the tool ``consult__ID`` (the question: the rest of the text)."""
    words = itertools.islice(itertools.cycle(BENCH_SENTENCE.split()), tokens)
    pieces = [word if index == 0 else " " + word for index, word in enumerate(words)]
    reply = Reply("".join(pieces), chunks=pieces, token_delay=token_delay, own_writes=own_writes)

    def answer(body: dict[str, Any]) -> Scripted:
        messages = body.get("messages") or [{}]
        last = messages[-1] if isinstance(messages[-1], dict) else {}
        if body.get("tools") and last.get("role") == "user":
            text = _text(last.get("content"))
            found = _CONSULT_MARKER.search(text)
            if found is not None:
                question = _CONSULT_MARKER.sub("", text).strip() or "What do you think?"
                return ToolCalls([(f"consult__{found.group(1)}", {"question": question})])
        return reply

    return answer


def main() -> None:
    """Serve the fake as a process of its own (the benchmarks' LLM) until interrupted."""
    import argparse

    parser = argparse.ArgumentParser(description="A scripted OpenAI-compatible server.")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--tokens", type=int, default=20, help="words in a reply")
    parser.add_argument("--token-delay-ms", type=float, default=0.0, help="sleep before each")
    parser.add_argument("--timing-file", default=None, help="append first/last token times")
    parser.add_argument(
        "--write-each-token",
        action="store_true",
        help="each token an SSE event and a write of its own, also at 0 ms a token",
    )
    args = parser.parse_args()
    timing = open(args.timing_file, "a") if args.timing_file else None  # noqa: SIM115
    default = bench_reply(args.tokens, args.token_delay_ms / 1000, args.write_each_token)
    # Nothing recorded: a benchmark sends hundreds of thousands of requests.
    FakeLLM(default=default, timing=timing, record=False).serve(args.port)
    if timing is not None:
        timing.close()


if __name__ == "__main__":
    main()
