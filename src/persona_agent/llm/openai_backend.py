"""The ``openai`` backend: any OpenAI-compatible chat-completions server, through the ``openai``
package's client.

OpenAI itself, Azure OpenAI, LiteLLM, vLLM, Ollama, llama.cpp's server: anything that
streams ``/chat/completions`` in the OpenAI format. One shared ``AsyncOpenAI`` (or
``AsyncAzureOpenAI``) on the client's aiohttp transport serves every call; retries,
``Retry-After``, timeouts, proxies and the organisation/project headers are the client's.
The stream itself is read lean (the client's raw streaming response, each event parsed once
with orjson: :mod:`persona_agent.llm.sse`), not as a pydantic model per chunk.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Mapping
from contextlib import AsyncExitStack, aclosing
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import openai
import orjson

from persona_agent import __version__
from persona_agent.errors import ConfigError, LLMError
from persona_agent.llm.base import (
    TEXT_INTERVAL,
    ChatRequest,
    LLMBackend,
    Pacer,
    StreamEnd,
    TextDelta,
    Usage,
)
from persona_agent.llm.sse import events
from persona_agent.llm.stream_chunks import Chunk, PartialCall, absorb, stream_end, usage_of
from persona_agent.observe.tracing import active as tracing_active
from persona_agent.observe.tracing import trace_headers

__all__ = ["OPENAI_BASE_URL", "OpenAIBackend"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
_NO_KEY = "not-needed"  # servers without auth still get a syntactically valid bearer header
_DETAIL_LIMIT = 200

_Chunks = Pacer[Chunk | BaseException | None]


class OpenAIBackend(LLMBackend):
    """Streams chat completions from an OpenAI-compatible server.

    One client (one connection pool) serves every call until :meth:`aclose`.
    Connection errors, timeouts and 408, 409, 429 and 5xx answers are retried
    ``max_retries`` times by the client, after the server's ``Retry-After``
    when it gives one; a stream that breaks later is not retried, since tokens
    were already given out. ``timeout`` bounds the connection and each read,
    so a server that stops sending in the middle of a stream times out too.

    With ``api_version`` set, the server is Azure OpenAI: ``base_url`` is the
    resource's endpoint (``https://NAME.openai.azure.com``), ``model`` names
    the deployment and the key goes in the ``api-key`` header.

    ``extra_body`` goes into every request's body as it is (a server's own fields: the
    embedded llama.cpp server's sampling settings); ``keepalive`` is how long an idle
    connection is kept for the next request (the client's default, 5 s, unless given).

    Raises:
        ConfigError: a base URL with credentials in it.
        LLMError: from :meth:`stream`, with a short client-safe message (never
            the API key): the server could not be reached, answered an error
            status, timed out, or broke the stream off before it finished.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str,
        timeout: float = 60.0,
        max_retries: int = 2,
        api_version: str | None = None,
        extra_body: Mapping[str, object] | None = None,
        keepalive: float | None = None,
    ) -> None:
        self._model = model
        self._extra_body = dict(extra_body or {})
        self._keepalive = keepalive
        self._timeout = timeout
        self._max_retries = max_retries
        self._api_key = api_key
        self._api_version = api_version
        self._base_url = base_url.rstrip("/") if base_url else None
        self._where = _display_url(self._base_url or OPENAI_BASE_URL)
        if self._base_url and urlsplit(self._base_url).username is not None:
            # A key belongs in the key setting, where no log or error message shows it.
            raise ConfigError(
                f"The LLM base URL must not contain credentials ({self._where}): "
                "set PERSONA_AGENT_LLM_API_KEY instead"
            )
        if api_version and not self._base_url:
            raise ConfigError(
                "Azure OpenAI (PERSONA_AGENT_LLM_API_VERSION) needs the resource's endpoint "
                "in PERSONA_AGENT_LLM_BASE_URL"
            )
        # Servers that are OpenAI's own take the newer name, which reasoning models require;
        # other OpenAI-compatible servers often know only the older one.
        self._official = api_version is not None or self._base_url in (None, OPENAI_BASE_URL)
        self._client: openai.AsyncOpenAI | None = None

    @property
    def default_model(self) -> str:
        return self._model

    @property
    def where(self) -> str:
        return self._where

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def shared_client(self) -> openai.AsyncOpenAI:
        """The backend's one client (for the embeddings endpoint, as for chat)."""
        return self._shared_client()

    def _shared_client(self) -> openai.AsyncOpenAI:
        """The client, made on first use (its connections belong to the running event loop)."""
        if self._client is None:
            transport: dict[str, Any] = {"timeout": self._timeout}
            if self._keepalive is not None:
                transport["limits"] = httpx2.Limits(
                    max_connections=1000,
                    max_keepalive_connections=100,
                    keepalive_expiry=self._keepalive,
                )
            options: dict[str, Any] = {
                "api_key": self._api_key or _NO_KEY,
                "timeout": self._timeout,
                "max_retries": self._max_retries,
                "http_client": openai.DefaultAioHttpClient(**transport),
                "default_headers": {"User-Agent": f"persona-agent/{__version__}"},
            }
            if self._api_version and self._base_url:
                self._client = openai.AsyncAzureOpenAI(
                    azure_endpoint=self._base_url, api_version=self._api_version, **options
                )
            else:
                self._client = openai.AsyncOpenAI(base_url=self._base_url, **options)
        return self._client

    def stream(self, request: ChatRequest) -> AsyncGenerator[TextDelta | StreamEnd, None]:
        """Yield the answer's text as it comes, then one :class:`StreamEnd`.

        Text that arrives while the consumer is busy, or within :data:`TEXT_INTERVAL` of
        the text before it, goes on as one piece: the first text at once, and a fast
        server's tokens do not each become an A2A event. A request that is
        :attr:`~ChatRequest.whole` gets its first text at once and the rest in one piece
        at the end, read with no task, queue or timer of its own. The HTTP response is
        closed as soon as the consumer stops (``aclose()`` or cancellation): no further
        tokens are read. ``CancelledError`` is never caught.
        """
        return self.relay(self.chunks(request), whole=request.whole)

    def relay(
        self, source: AsyncGenerator[Chunk, None], *, whole: bool = False
    ) -> AsyncGenerator[TextDelta | StreamEnd, None]:
        """:meth:`stream` over ``source``: this backend's :meth:`chunks`, or chunks of the
        same form that a caller made of them (the embedded model's answer, cleaned as it
        streams). ``source`` raises only :class:`LLMError`; it is closed when the consumer
        stops."""
        return self._whole(source) if whole else self._streamed(source)

    async def _streamed(
        self, source: AsyncGenerator[Chunk, None]
    ) -> AsyncGenerator[TextDelta | StreamEnd, None]:
        """:meth:`stream` for a consumer that watches the answer grow: a reader task hands
        the chunks over (a :class:`Pacer`), and what came since the last text goes on as one
        piece."""
        chunks: _Chunks = Pacer(_ends_stream)
        reader = asyncio.create_task(self._read(source, chunks))
        calls: dict[int, PartialCall] = {}
        usage = Usage()
        finish: str | None = None
        try:
            ended = False
            failure: BaseException | None = None
            given = -TEXT_INTERVAL  # when text last went on
            while not ended:
                batch = await chunks.batch(given + TEXT_INTERVAL)
                text = ""
                for chunk in batch:
                    if chunk is None or isinstance(chunk, BaseException):
                        ended, failure = True, chunk
                        break
                    usage = usage_of(chunk) or usage
                    piece, finished = absorb(chunk, calls)
                    text += piece
                    finish = finished or finish
                if text:
                    yield TextDelta(text)  # what came before a failure is given out first
                    given = time.monotonic()
            if failure is not None:
                raise failure
        finally:
            reader.cancel()  # closes the HTTP response if it is still open
            try:
                await reader
            except asyncio.CancelledError:
                if not reader.cancelled():
                    raise
        yield stream_end(finish, calls, usage)

    async def _whole(
        self, source: AsyncGenerator[Chunk, None]
    ) -> AsyncGenerator[TextDelta | StreamEnd, None]:
        """:meth:`stream` for a consumer that takes the answer whole (a blocking send): the
        first text at once (the time to it is measured), then, read in place, each chunk's
        text collected and given as one piece at the end."""
        calls: dict[int, PartialCall] = {}
        usage = Usage()
        finish: str | None = None
        pieces: list[str] = []
        first = True
        async with aclosing(source) as chunks:
            async for chunk in chunks:
                if chunk.get("usage") is not None:
                    usage = usage_of(chunk) or usage
                piece, finished = absorb(chunk, calls)
                finish = finished or finish
                if not piece:
                    continue
                if first:
                    first = False
                    yield TextDelta(piece)
                else:
                    pieces.append(piece)
        if pieces:
            yield TextDelta("".join(pieces))
        yield stream_end(finish, calls, usage)

    async def _read(self, source: AsyncGenerator[Chunk, None], chunks: _Chunks) -> None:
        """Put the stream's chunks in ``chunks``, then None; or the error, as an :class:`LLMError`.

        A task of its own, so that what arrives while the consumer is busy is taken
        in one go; cancelling it closes the response.
        """
        try:
            async with aclosing(source):
                async for chunk in source:
                    chunks.put(chunk)
            chunks.put(None)
        except LLMError as error:
            chunks.put(error)

    async def chunks(
        self, request: ChatRequest, extra_body: Mapping[str, object] | None = None
    ) -> AsyncGenerator[Chunk, None]:
        """The stream's chunks, each event parsed once; a failure as an :class:`LLMError`.
        Closing the generator closes the response. ``extra_body`` is added to this request's
        body (after the backend's own)."""
        # The client walks every parameter it is given against its types (`transform`),
        # which changes nothing in the hub's plain OpenAI-format values and costs CPU each
        # call: ~150 µs a message (a whole conversation each turn), and ~100 µs for the
        # sampling options alone (each key's Union type hashed in a cache lookup, measured
        # on 3.11); `model` alone ~70 µs (its `Union[str, Literal[...every model...]]`
        # hashed each call). So only what the client itself reads goes through it:
        # `stream`, and `model` for an Azure client (which builds its deployment's URL from
        # it); the rest goes in `extra_body`, which the client merges into the body
        # untouched, in its places (`model` given as `omit` to the call: its value is there).
        model = request.model or self._model
        params: dict[str, Any] = {  # `omit` is no `str`: not the TypedDict of `create`
            "model": model if self._api_version else openai.omit,
            "messages": [],
            "stream": True,
        }
        untransformed: dict[str, object] = {
            **self._extra_body,
            **(extra_body or {}),
            "messages": request.messages,
            "stream_options": {"include_usage": True},
        }
        if not self._api_version:
            untransformed["model"] = model
        if request.temperature is not None:
            untransformed["temperature"] = request.temperature
        if request.max_tokens is not None:
            tokens = "max_completion_tokens" if self._official else "max_tokens"
            untransformed[tokens] = request.max_tokens
        if request.stop:
            untransformed["stop"] = request.stop
        if request.tools:
            untransformed["tools"] = request.tools
        if request.tool_choice is not None:
            untransformed["tool_choice"] = request.tool_choice
        started = False
        # Traced: the model server's request carries this call's span as its parent.
        headers = trace_headers() if tracing_active() else None
        try:
            create = self._shared_client().chat.completions.with_streaming_response.create
            async with AsyncExitStack() as stack:
                # One deadline for the answer to start, the client's retries inside it: a
                # silent server costs the timeout, not (1 + retries) times it.
                async with asyncio.timeout(self._timeout):
                    response = await stack.enter_async_context(
                        create(**params, extra_headers=headers, extra_body=untransformed)
                    )
                started = True
                done = False
                async for event in events(response.iter_bytes()):
                    if done:
                        continue  # read to the end: the connection goes back to the pool
                    if event.data.startswith(b"[DONE]"):
                        done = True
                        continue
                    chunk = orjson.loads(event.data)
                    if not isinstance(chunk, dict):
                        raise ValueError(f"a stream event that is not an object: {chunk!r:.80}")
                    if chunk.get("error"):
                        raise _stream_error(chunk["error"])
                    yield chunk
        except LLMError:
            raise
        except Exception as exc:  # every failure goes to the consumer as an LLMError
            raise self._error(exc, started=started) from exc

    def _error(self, exc: Exception, *, started: bool) -> LLMError:
        """What a failure of the client means for the hub's client."""
        if isinstance(exc, LLMError):
            return exc
        if not started and _refused(exc):
            # Before the timeout check: the aiohttp transport reports a refused connection
            # as a connect timeout.
            return LLMError(f"The language model server could not be reached ({self._where})")
        if isinstance(exc, openai.APITimeoutError | TimeoutError | httpx2.TimeoutException):
            return LLMError(
                f"The language model sent nothing for {self._timeout:g}s"
                if started
                else f"The language model did not answer within {self._timeout:g}s"
                " (retries included)"
            )
        if isinstance(exc, openai.APIStatusError):
            detail = self._short(_body_message(exc.body) or exc.response.reason_phrase)
            status = exc.status_code
            if status == 429:
                return LLMError(
                    f"The language model server answered {status} (rate limited)", detail=detail
                )
            if status >= 500:
                return LLMError(f"The language model server answered {status}", detail=detail)
            return LLMError(f"The language model rejected the request ({status})", detail=detail)
        if isinstance(exc, openai.APIConnectionError) and not started:
            return LLMError(f"The language model server could not be reached ({self._where})")
        if isinstance(exc, openai.APIError) and exc.body is not None:
            # An error event in the stream.
            detail = self._short(_body_message(exc.body) or exc.message)
            return LLMError("The language model reported an error in its stream", detail=detail)
        if isinstance(exc, ValueError):  # not JSON
            return LLMError("The language model sent a malformed reply", detail=self._short(exc))
        return LLMError("The language model stream broke off", detail=self._short(exc))

    def _short(self, detail: object) -> str:
        """One line, bounded, and without the API key even if a server echoes it."""
        text = " ".join(str(detail).split()) or type(detail).__name__
        if self._api_key:
            text = text.replace(self._api_key, "***")
        if len(text) > _DETAIL_LIMIT:
            text = text[: _DETAIL_LIMIT - 1] + "…"
        return text


def _stream_error(error: object) -> LLMError:
    """An error the server sent inside its stream (``{"error": {"message": ...}}``)."""
    message = _body_message({"error": error}) or "An error occurred during streaming"
    return LLMError(
        "The language model reported an error in its stream", detail=" ".join(message.split())
    )


def _ends_stream(chunk: Chunk | BaseException | None) -> bool:
    """The end of the stream (None) or its failure."""
    return chunk is None or isinstance(chunk, BaseException)


def _refused(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a connection that failed other than by timing out."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _body_message(body: object) -> str | None:
    """The ``message`` of an OpenAI error body (``{"error": {"message": ...}}`` or its inside)."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    if isinstance(body, str) and body.strip():
        return body
    return None


def _display_url(url: str) -> str:
    """The base URL without credentials, query or fragment, fit for an error message."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
