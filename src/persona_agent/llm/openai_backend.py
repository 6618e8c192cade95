"""The ``openai`` backend: any OpenAI-compatible chat-completions server.

OpenAI itself, LiteLLM, vLLM, Ollama, llama.cpp's server: anything that
streams ``/chat/completions`` in the OpenAI format.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

from persona_agent.errors import LLMError
from persona_agent.llm.base import ChatRequest, LLMBackend, StreamEnd, TextDelta, ToolCall, Usage

__all__ = ["OPENAI_BASE_URL", "OpenAIBackend"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
_NO_KEY = "not-needed"  # servers without auth still get a syntactically valid bearer header
_DETAIL_LIMIT = 200


@dataclass
class _PartialCall:
    """A tool call being reassembled from streamed deltas."""

    id: str = ""
    name: str = ""
    arguments: str = ""


class OpenAIBackend(LLMBackend):
    """Streams chat completions from an OpenAI-compatible server.

    One ``AsyncOpenAI`` client (one connection pool) serves every call until
    :meth:`aclose`. The client retries connection errors, 429 and 5xx answers
    ``max_retries`` times (honouring ``Retry-After``) before the stream starts;
    a stream that breaks later is not retried, since tokens were already given
    out. ``timeout`` bounds the connection and each read, so a server that
    stops sending in the middle of a stream times out too.

    Raises:
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
        # Explicit base URL and key: the client must not fall back to OPENAI_* variables.
        self._client = AsyncOpenAI(
            base_url=url,
            api_key=api_key or _NO_KEY,
            timeout=timeout,
            max_retries=max_retries,
        )

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
        options: dict[str, Any] = {}
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.max_tokens is not None:
            options["max_tokens"] = request.max_tokens
        if request.tools:
            options["tools"] = request.tools
        if request.tool_choice is not None:
            options["tool_choice"] = request.tool_choice
        try:
            response = await self._client.chat.completions.create(
                model=request.model or self._model,
                messages=cast(list[ChatCompletionMessageParam], request.messages),
                stream=True,
                stream_options={"include_usage": True},
                **options,
            )
        except openai.OpenAIError as exc:
            raise self._error(exc, streaming=False) from exc

        calls: dict[int, _PartialCall] = {}
        usage = Usage()
        finish: str | None = None
        async with response:
            try:
                async for chunk in response:
                    if chunk.usage is not None:
                        usage = Usage(
                            chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0
                        )
                    # Chunks are not validated: tolerate the gaps of less careful servers.
                    for choice in chunk.choices or ():
                        if choice.index:
                            continue  # only one choice is ever asked for
                        delta = choice.delta
                        if delta is not None:
                            if isinstance(delta.content, str) and delta.content:
                                yield TextDelta(delta.content)
                            for part in delta.tool_calls or ():
                                _merge_tool_call(calls, part)
                        if choice.finish_reason is not None:
                            finish = choice.finish_reason
            except (openai.OpenAIError, ValueError) as exc:
                raise self._error(exc, streaming=True) from exc
        if finish is None:
            raise LLMError("The language model stream broke off before the answer was complete")
        tool_calls = [
            ToolCall(id=call.id or f"call_{index}", name=call.name, arguments=call.arguments)
            for index, call in sorted(calls.items())
        ]
        yield StreamEnd(tool_calls=tool_calls, usage=usage, finish_reason=finish)

    def _error(self, exc: Exception, *, streaming: bool) -> LLMError:
        """A client-safe error for a failure of the client or the server."""
        if isinstance(exc, openai.APITimeoutError):
            return LLMError(f"The language model timed out after {self._timeout:g}s")
        if isinstance(exc, openai.APIConnectionError):
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


def _merge_tool_call(calls: dict[int, _PartialCall], part: ChoiceDeltaToolCall) -> None:
    """Add one streamed tool-call fragment to the call it belongs to."""
    index = part.index
    if index is None:  # some servers leave it out: a new id starts a new call
        same = [i for i, call in calls.items() if part.id and call.id == part.id]
        if same:
            index = same[0]
        elif part.id or not calls:
            index = max(calls, default=-1) + 1
        else:
            index = max(calls)
    call = calls.setdefault(index, _PartialCall())
    # Some servers repeat the id and the name in every fragment: keep the first.
    call.id = call.id or part.id or ""
    if part.function is not None:
        call.name = call.name or part.function.name or ""
        call.arguments += part.function.arguments or ""


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
