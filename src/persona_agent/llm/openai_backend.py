"""The ``openai`` backend: any OpenAI-compatible chat-completions server.

OpenAI itself, LiteLLM, vLLM, Ollama, llama.cpp's server: anything that
streams ``/chat/completions`` in the OpenAI format.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import httpx2
import openai
from openai import AsyncOpenAI, DefaultAioHttpClient

from persona_agent.errors import ConfigError, LLMError
from persona_agent.llm.base import ChatRequest, LLMBackend, StreamEnd, TextDelta, ToolCall, Usage
from persona_agent.personas.prompt import PROMPT_CACHE_SIZE

__all__ = ["OPENAI_BASE_URL", "OpenAIBackend"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
_NO_KEY = "not-needed"  # servers without auth still get a syntactically valid bearer header
_DETAIL_LIMIT = 200
_DRAIN_SECONDS = 1.0
"""How long to wait, after ``[DONE]``, for the end of the response body: a body read to
its end returns the connection to the pool (else the next call opens a new one)."""


_to_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
"""JSON as the ``openai`` client writes a request body (``openapi_dumps``)."""


@functools.lru_cache(maxsize=PROMPT_CACHE_SIZE)
def _system_message_json(prompt: str) -> str:
    return _to_json({"role": "system", "content": prompt})


def _request_json(body: dict[str, Any], messages: list[dict[str, Any]]) -> bytes:
    """``body`` with ``messages`` as one JSON document, UTF-8.

    A system prompt (several KB; the same string object for every message to one
    persona version) is escaped once and kept, like the prompt itself: escaping it
    again for every call was 2 % of the hub's instructions per message.
    """
    parts = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "system" and isinstance(content, str) and len(message) == 2:
            parts.append(_system_message_json(content))
        else:
            parts.append(_to_json(message))
    head = _to_json(body)
    return f'{head[:-1]},"messages":[{",".join(parts)}]}}'.encode()


@dataclass
class _PartialCall:
    """A tool call being reassembled from streamed deltas."""

    id: str = ""
    name: str = ""
    arguments: str = ""


class OpenAIBackend(LLMBackend):
    """Streams chat completions from an OpenAI-compatible server.

    One ``AsyncOpenAI`` client (one connection pool) serves every call until
    :meth:`aclose`, on the ``openai`` package's aiohttp transport (the
    ``openai[aiohttp]`` extra): a third of the CPU of its default httpx one per
    call (docs/performance.md). The client retries connection errors, 429 and 5xx answers
    ``max_retries`` times (honouring ``Retry-After``) before the stream starts;
    a stream that breaks later is not retried, since tokens were already given
    out. ``timeout`` bounds the connection and each read, so a server that
    stops sending in the middle of a stream times out too.

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
    ) -> None:
        self._model = model
        self._timeout = timeout
        self._api_key = api_key
        url = (base_url or OPENAI_BASE_URL).rstrip("/")
        self._where = _display_url(url)
        if urlsplit(url).username is not None:
            # aiohttp refuses them beside the bearer header; a key belongs in the key setting.
            raise ConfigError(
                f"The LLM base URL must not contain credentials ({self._where}): "
                "set PERSONA_AGENT_LLM_API_KEY instead"
            )
        # Explicit base URL and key: the client must not fall back to OPENAI_* variables.
        self._client = AsyncOpenAI(
            base_url=url,
            api_key=api_key or _NO_KEY,
            timeout=timeout,
            max_retries=max_retries,
            http_client=DefaultAioHttpClient(timeout=timeout),
        )
        # Absolute, so the client does not merge it with the base URL on every call.
        self._completions_url = f"{url}/chat/completions"

    @property
    def default_model(self) -> str:
        return self._model

    async def aclose(self) -> None:
        await self._client.close()

    async def stream(self, request: ChatRequest) -> AsyncGenerator[TextDelta | StreamEnd, None]:
        """Yield the answer's text as it comes, then one :class:`StreamEnd`.

        The HTTP response is closed as soon as the consumer stops (``aclose()``
        or cancellation): no further tokens are read. ``CancelledError`` is
        never caught.
        """
        body: dict[str, Any] = {
            "model": request.model or self._model,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.tools:
            body["tools"] = request.tools
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
        calls: dict[int, _PartialCall] = {}
        usage = Usage()
        finish: str | None = None
        started = False
        try:
            # The client's own request path (retries, Retry-After, timeouts, errors) with the
            # body as JSON bytes already: ``chat.completions.create`` would walk every
            # message through its type transforms, and its typed stream build a pydantic
            # model per chunk; the SSE lines are parsed here instead.
            response = await self._client.post(
                self._completions_url,
                cast_to=httpx2.Response,
                content=_request_json(body, request.messages),
                stream=True,
            )
            started = True
            try:
                reads = response.aiter_bytes()
                # What arrives in one read goes on as one piece of text: no added latency,
                # and a fast server's tokens do not each become an A2A event.
                async for chunks in _sse_reads(reads):
                    text = ""
                    for chunk in chunks:
                        if isinstance(chunk.get("usage"), dict):
                            counts = chunk["usage"]
                            usage = Usage(
                                counts.get("prompt_tokens") or 0,
                                counts.get("completion_tokens") or 0,
                            )
                        # Chunks are not validated: tolerate the gaps of less careful servers.
                        for choice in chunk.get("choices") or ():
                            if not isinstance(choice, dict) or choice.get("index"):
                                continue  # only one choice is ever asked for
                            delta = choice.get("delta")
                            if isinstance(delta, dict):
                                content = delta.get("content")
                                if isinstance(content, str):
                                    text += content
                                for part in delta.get("tool_calls") or ():
                                    if isinstance(part, dict):
                                        _merge_tool_call(calls, part)
                            if choice.get("finish_reason") is not None:
                                finish = str(choice["finish_reason"])
                    if text:
                        yield TextDelta(text)
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(_DRAIN_SECONDS):
                        async for _ in reads:
                            pass
            finally:
                await response.aclose()
        except LLMError:
            raise
        except (openai.OpenAIError, httpx2.HTTPError, ValueError) as exc:
            raise self._error(exc, streaming=started) from exc
        if finish is None:
            raise LLMError("The language model stream broke off before the answer was complete")
        tool_calls = [
            ToolCall(id=call.id or f"call_{index}", name=call.name, arguments=call.arguments)
            for index, call in sorted(calls.items())
        ]
        yield StreamEnd(tool_calls=tool_calls, usage=usage, finish_reason=finish)

    def _error(self, exc: Exception, *, streaming: bool) -> LLMError:
        """A client-safe error for a failure of the client or the server."""
        if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException) and _timed_out(exc):
            return LLMError(f"The language model timed out after {self._timeout:g}s")
        if isinstance(exc, httpx2.HTTPError):  # raised by the raw stream, mid-answer
            return LLMError(f"The language model stream broke off: {self._short(exc)}")
        if isinstance(exc, openai.APIConnectionError):  # APITimeoutError too, when not one
            if streaming:
                cause = exc.__cause__ or exc
                return LLMError(f"The language model stream broke off: {self._short(cause)}")
            return LLMError(f"The language model server could not be reached ({self._where})")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = self._short(_body_message(exc.body) or exc.message)
            if status == 429 or status >= 500:
                return LLMError(f"The language model server answered {status}: {detail}")
            return LLMError(f"The language model rejected the request ({status}): {detail}")
        if isinstance(exc, openai.APIError) and streaming:
            return LLMError(f"The language model reported an error: {self._short(exc.message)}")
        if isinstance(exc, ValueError | openai.APIError):
            return LLMError(f"The language model sent a malformed reply: {self._short(exc)}")
        return LLMError(f"The language model failed to answer: {self._short(exc)}")

    def _short(self, detail: object) -> str:
        """One line, bounded, and without the API key even if a server echoes it."""
        text = " ".join(str(detail).split()) or type(detail).__name__
        if self._api_key:
            text = text.replace(self._api_key, "***")
        if len(text) > _DETAIL_LIMIT:
            text = text[: _DETAIL_LIMIT - 1] + "…"
        return text


def _timed_out(exc: BaseException) -> bool:
    """Whether a timeout error of the client is one.

    The aiohttp transport reports every lost connection (a server that closes
    it, mid-answer too) as a connect timeout; its cause tells them apart.
    """
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, aiohttp.ClientError):
            return isinstance(cause, TimeoutError)
        cause = cause.__cause__
    return True


def _merge_tool_call(calls: dict[int, _PartialCall], part: dict[str, Any]) -> None:
    """Add one streamed tool-call fragment to the call it belongs to."""
    index = part.get("index")
    part_id = part.get("id") or ""
    if not isinstance(index, int):  # some servers leave it out: a new id starts a new call
        same = [i for i, call in calls.items() if part_id and call.id == part_id]
        if same:
            index = same[0]
        elif part_id or not calls:
            index = max(calls, default=-1) + 1
        else:
            index = max(calls)
    call = calls.setdefault(index, _PartialCall())
    # Some servers repeat the id and the name in every fragment: keep the first.
    call.id = call.id or str(part_id)
    function = part.get("function")
    if isinstance(function, dict):
        call.name = call.name or str(function.get("name") or "")
        call.arguments += str(function.get("arguments") or "")


async def _sse_reads(reads: AsyncIterator[bytes]) -> AsyncIterator[list[dict[str, Any]]]:
    """The JSON chunks of a chat-completions event stream, a list per network read.

    Ends at ``data: [DONE]`` or the end of the stream.

    Raises:
        ValueError: a chunk that is not a JSON object, or text that is not UTF-8.
        LLMError: the server sent an error event in the stream.
    """
    pending = b""
    data: list[str] = []
    async for read in reads:
        *lines, pending = (pending + read).split(b"\n")
        payloads: list[str] = []
        done = False
        for line in b"\n".join(lines).decode("utf-8").split("\n"):
            if line.startswith("data:"):
                data.append(line[5:].strip())
                continue
            if line.rstrip("\r") or not data:
                continue  # other fields (event:, id:), comments, or a blank line with no data
            payload, data = "\n".join(data), []
            if payload == "[DONE]":
                done = True
                break
            payloads.append(payload)
        if payloads:
            yield _chunks(payloads)
        if done:
            return
    last = pending.decode("utf-8").strip()
    if last.startswith("data:"):  # a last event with no blank line after it
        data.append(last[5:].strip())
    if data and data != ["[DONE]"]:
        yield _chunks(["\n".join(data)])


def _chunks(payloads: list[str]) -> list[dict[str, Any]]:
    """Stream chunks, parsed in one go (one ``json.loads`` for a whole read); an error
    event raises."""
    try:
        chunks = json.loads("[" + ",".join(payloads) + "]")
    except ValueError:
        chunks = None
    if not isinstance(chunks, list) or len(chunks) != len(payloads):
        # A payload that is not one JSON value: parse them one by one to say which.
        chunks = [json.loads(payload) for payload in payloads]
    for payload, chunk in zip(payloads, chunks, strict=True):
        if not isinstance(chunk, dict):
            raise ValueError(f"a stream chunk is not a JSON object: {payload[:80]}")
        error = chunk.get("error")
        if error is not None:
            message = _body_message(chunk) or str(error)
            raise LLMError(f"The language model reported an error: {message[:_DETAIL_LIMIT]}")
    return chunks


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
