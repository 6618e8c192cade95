"""The ``openai`` backend: any OpenAI-compatible chat-completions server.

OpenAI itself, LiteLLM, vLLM, Ollama, llama.cpp's server: anything that
streams ``/chat/completions`` in the OpenAI format. The wire format is spoken
over one shared ``aiohttp`` session: the hub writes the request body and reads
the SSE stream itself (docs/performance.md says why not through the ``openai``
package's client: it alone cost more CPU per message, memory and start-up time
than the hub's performance targets leave for everything the hub does).
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import random
import time
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from persona_agent import __version__
from persona_agent.errors import ConfigError, LLMError
from persona_agent.llm.base import ChatRequest, LLMBackend, StreamEnd, TextDelta, ToolCall, Usage
from persona_agent.personas.prompt import PROMPT_CACHE_SIZE

__all__ = ["OPENAI_BASE_URL", "OpenAIBackend"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
_NO_KEY = "not-needed"  # servers without auth still get a syntactically valid bearer header
_DETAIL_LIMIT = 200
_ERROR_BODY_LIMIT = 64 * 1024
_DRAIN_SECONDS = 1.0
"""How long to wait, after ``[DONE]``, for the end of the response body: a body read to
its end returns the connection to the pool (else the next call opens a new one)."""
_MAX_CONNECTIONS = 1000
"""Connections to the LLM server at once (as many as the ``openai`` client allows): a
message waits for a free one only beyond that."""
_RETRY_STATUSES = frozenset({408, 409, 429})
"""Retried like every 5xx answer (the statuses the ``openai`` client retries)."""
_FIRST_RETRY_DELAY = 0.5
_MAX_RETRY_DELAY = 8.0
_MAX_RETRY_AFTER = 60.0
"""A server's ``Retry-After`` is honoured up to this many seconds; beyond, backoff."""


_to_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
"""Compact JSON, as the ``openai`` client writes a request body."""


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

    One ``aiohttp`` session (one connection pool, kept-alive connections)
    serves every call until :meth:`aclose`. Connection errors, timeouts and
    408, 409, 429 and 5xx answers are retried ``max_retries`` times before the
    stream starts, after the server's ``Retry-After`` (or ``Retry-After-Ms``)
    when it gives one of up to a minute, else after an exponential backoff
    with jitter (0.5 s doubling, at most 8 s), as the ``openai`` client does;
    a stream that breaks later is not retried, since tokens were already given
    out. ``timeout`` bounds the connection and each read, so a server that
    stops sending in the middle of a stream times out too. A proxy set in
    ``HTTPS_PROXY``/``HTTP_PROXY`` (and not bypassed by ``NO_PROXY``) is used.

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
        self._max_retries = max_retries
        self._api_key = api_key
        url = (base_url or OPENAI_BASE_URL).rstrip("/")
        self._where = _display_url(url)
        if urlsplit(url).username is not None:
            # A key belongs in the key setting, where no log or error message shows it.
            raise ConfigError(
                f"The LLM base URL must not contain credentials ({self._where}): "
                "set PERSONA_AGENT_LLM_API_KEY instead"
            )
        self._completions_url = f"{url}/chat/completions"
        self._proxy = _env_proxy(self._completions_url)
        self._session: aiohttp.ClientSession | None = None

    @property
    def default_model(self) -> str:
        return self._model

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        """The session, made on first use (it belongs to the running event loop)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=_MAX_CONNECTIONS),
                timeout=aiohttp.ClientTimeout(
                    total=None, connect=self._timeout, sock_read=self._timeout
                ),
                headers={
                    "Authorization": f"Bearer {self._api_key or _NO_KEY}",
                    "Content-Type": "application/json",
                    "Accept": "application/json",  # what the openai client sends, streams too
                    "User-Agent": f"persona-agent/{__version__}",
                },
                trust_env=False,  # the proxy from the environment is looked up once, above
            )
        return self._session

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
        response = await self._send(_request_json(body, request.messages))
        try:
            reads = response.content.iter_any()
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
            try:
                async with asyncio.timeout(_DRAIN_SECONDS):
                    async for _ in reads:
                        pass
            except (TimeoutError, aiohttp.ClientError):
                pass  # the answer is whole; only the connection is not reused
        except LLMError:
            raise
        except TimeoutError as exc:  # aiohttp's read timeouts are TimeoutErrors too
            raise self._timed_out() from exc
        except aiohttp.ClientError as exc:
            raise LLMError("The language model stream broke off", detail=self._short(exc)) from exc
        except ValueError as exc:  # not JSON, not UTF-8
            raise LLMError(
                "The language model sent a malformed reply", detail=self._short(exc)
            ) from exc
        finally:
            if response.content.at_eof():
                response.release()  # the connection goes back to the pool
            else:
                response.close()  # stops the server's stream: nothing more is read
        if finish is None:
            raise LLMError("The language model stream broke off before the answer was complete")
        tool_calls = [
            ToolCall(id=call.id or f"call_{index}", name=call.name, arguments=call.arguments)
            for index, call in sorted(calls.items())
        ]
        yield StreamEnd(tool_calls=tool_calls, usage=usage, finish_reason=finish)

    async def _send(self, body: bytes) -> aiohttp.ClientResponse:
        """POST ``body``; the response once its status is a success, retried as the class says.

        Raises:
            LLMError: the last failure, when it is not one to retry or no retry is left.
        """
        session = self._client()
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = await session.post(self._completions_url, data=body, proxy=self._proxy)
            except TimeoutError as exc:  # before ClientError: aiohttp's timeouts are both
                error = self._timed_out()
                error.__cause__ = exc
            except aiohttp.ClientError as exc:
                error = LLMError(f"The language model server could not be reached ({self._where})")
                error.__cause__ = exc
            else:
                if response.status < 400:
                    return response
                try:
                    detail = await _error_detail(response)
                finally:
                    response.release()
                error = self._status_error(response.status, detail)
                if not _should_retry(response.status, response.headers):
                    raise error
                retry_after = _retry_after(response.headers)
            if attempt >= self._max_retries:
                raise error
            await asyncio.sleep(_retry_delay(attempt, retry_after))
            attempt += 1

    def _timed_out(self) -> LLMError:
        return LLMError(f"The language model timed out after {self._timeout:g}s")

    def _status_error(self, status: int, detail: str) -> LLMError:
        detail = self._short(detail)
        if status == 429:
            return LLMError(
                f"The language model server answered {status} (rate limited)", detail=detail
            )
        if status >= 500:
            return LLMError(f"The language model server answered {status}", detail=detail)
        return LLMError(f"The language model rejected the request ({status})", detail=detail)

    def _short(self, detail: object) -> str:
        """One line, bounded, and without the API key even if a server echoes it."""
        text = " ".join(str(detail).split()) or type(detail).__name__
        if self._api_key:
            text = text.replace(self._api_key, "***")
        if len(text) > _DETAIL_LIMIT:
            text = text[: _DETAIL_LIMIT - 1] + "…"
        return text


async def _error_detail(response: aiohttp.ClientResponse) -> str:
    """What an error answer says: its OpenAI error message, else its text, else its reason."""
    try:
        raw = await response.content.read(_ERROR_BODY_LIMIT)
    except (TimeoutError, aiohttp.ClientError):
        raw = b""
    text = raw.decode("utf-8", "replace")
    try:
        body: object = json.loads(text)
    except ValueError:
        body = text
    return _body_message(body) or response.reason or f"HTTP {response.status}"


def _should_retry(status: int, headers: Mapping[str, str]) -> bool:
    """Whether an error answer is worth sending again (a server may say so itself)."""
    said = headers.get("x-should-retry")
    if said in ("true", "false"):
        return said == "true"
    return status in _RETRY_STATUSES or status >= 500


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait that the server asked for (``Retry-After-Ms``, ``Retry-After``)."""
    try:
        return float(headers["retry-after-ms"]) / 1000
    except (KeyError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


def _retry_delay(attempt: int, retry_after: float | None) -> float:
    """Seconds before retry number ``attempt + 1``."""
    if retry_after is not None and 0 < retry_after <= _MAX_RETRY_AFTER:
        return retry_after
    delay = min(_FIRST_RETRY_DELAY * 2.0**attempt, _MAX_RETRY_DELAY)
    return delay * (1 - 0.25 * random.random())  # jitter: retries of many calls spread out


def _env_proxy(url: str) -> str | None:
    """The proxy the environment sets for ``url`` (``*_PROXY``, ``NO_PROXY``), if any."""
    parts = urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy is None or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


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
            raise LLMError(
                "The language model reported an error in its stream",
                detail=message[:_DETAIL_LIMIT],
            )
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
