"""The OpenAI-compatible door: ``GET /v1/models`` and ``POST /v1/chat/completions``, each
persona and panel a model (docs/openai.md).

A chat completion is a turn of the persona: an A2A task made through the hub's forwarding
handler (:class:`~persona_agent.collab.local_calls.LocalCalls`) for the caller the
request's credentials name, admitted as an A2A call on that persona
(:class:`~persona_agent.a2a.admission.Admission`: authentication, authorization, rates,
running tasks and streams), owned, audited, counted (binding ``openai``) and traced as
any task. The client's messages are the conversation (nothing is kept between requests:
:mod:`persona_agent.chat.supplied`). A client that closes its connection cancels the task,
and with it the model's stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Coroutine
from contextlib import aclosing
from typing import Any

from a2a.utils.errors import A2AError
from starlette.types import Receive, Scope, Send

from persona_agent.a2a.admission import Admission, Refusal, admitted_context
from persona_agent.a2a.context_keys import REQUEST_ID_KEY
from persona_agent.a2a.registry import A2ARegistry
from persona_agent.api.openai import OPENAI_BINDING, OPENAI_PREFIX
from persona_agent.api.openai.completion_answers import (
    Chunks,
    completion,
    error_body,
    model_entry,
    send_json,
)
from persona_agent.api.openai.completion_request import CompletionAsk, WireError, read_request
from persona_agent.collab.local_calls import LocalCalls, LocalEnd, LocalEvent, LocalStart, LocalText
from persona_agent.errors import HTTP_STATUSES, BudgetSpentError, LLMError, PersonaAgentError
from persona_agent.personas.model import Persona
from persona_agent.security.audit import request_id_of
from persona_agent.security.limits import nests_deeper
from persona_agent.security.principal import AuthError, Principal

__all__ = ["OpenAIDoor"]

MAX_DEPTH = 64
"""How deep a request's JSON may nest (tool schemas included)."""
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


class OpenAIDoor:
    """The door, an ASGI app for the paths under ``/v1`` (see the module).
    ``max_body_bytes``: a request's bytes at most (413 above); ``max_messages``: its
    messages (400 above)."""

    def __init__(
        self, registry: A2ARegistry, *, max_body_bytes: int = 1024 * 1024, max_messages: int = 1000
    ) -> None:
        self._registry = registry
        self._admission = Admission(registry.services)
        self._calls = LocalCalls(registry.local_handler)
        self._max_body = max_body_bytes
        self._max_messages = max_messages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):  # mounted behind a proxy's root path
            path = path[len(root) :]
        path = path.removeprefix(OPENAI_PREFIX).rstrip("/")
        method = scope["method"]
        try:
            if path == "/models" and method == "GET":
                await self._models(scope, send)
            elif path.startswith("/models/") and method == "GET":
                await self._model(scope, send, path.removeprefix("/models/"))
            elif path == "/chat/completions" and method == "POST":
                await self._complete(scope, receive, send)
            else:
                raise WireError(
                    404,
                    f"No {method} {OPENAI_PREFIX}{path[:80]} here: this door serves GET "
                    f"{OPENAI_PREFIX}/models and POST {OPENAI_PREFIX}/chat/completions",
                    code="unknown_url",
                )
        except WireError as error:
            body = error_body(error.message, error.type, error.code, error.param)
            await send_json(send, error.status, body, error.headers)

    # -- who calls ---------------------------------------------------------

    async def _principal(self, scope: Scope) -> Principal | None:
        """The caller, or ``None`` (anonymous, where the hub's access lets it in).

        Raises:
            WireError: 401, a credential that is not valid or none where one is needed.
        """
        auth = self._registry.services.auth
        if auth is None:
            return None
        try:
            principal = await auth.principal(scope["headers"])
        except AuthError as error:
            raise _refused(error.status, error.message) from None
        if principal is None and auth.default_access == "authenticated":
            raise _refused(401, "Authentication required: give the hub's API key as the api_key")
        return principal

    async def _visible(self, scope: Scope) -> list[Persona]:
        """The personas and panels the caller may call."""
        return self._registry.callable_by(await self._principal(scope))

    # -- models ------------------------------------------------------------

    async def _models(self, scope: Scope, send: Send) -> None:
        models = [model_entry(persona.id) for persona in await self._visible(scope)]
        await send_json(send, 200, {"object": "list", "data": models})

    async def _model(self, scope: Scope, send: Send, model: str) -> None:
        if model not in {persona.id for persona in await self._visible(scope)}:
            raise _unknown(model)
        await send_json(send, 200, model_entry(model))

    # -- chat completions --------------------------------------------------

    async def _complete(self, scope: Scope, receive: Receive, send: Send) -> None:
        ask = read_request(await self._body(scope, receive), max_messages=self._max_messages)
        persona = self._registry.persona(ask.model)
        if persona is None:
            await self._principal(scope)  # a caller with no valid credential hears 401 first
            raise _unknown(ask.model)
        headers = scope["headers"]
        inner: dict[str, Any] = {REQUEST_ID_KEY: request_id_of(headers)}
        _raise(await self._admission.check(persona, headers, scope.get("client"), inner))
        async with self._admission.held(persona, "stream" if ask.stream else "send", inner) as no:
            _raise(no)
            events = self._calls.stream(
                persona.id,
                ask.text,
                origin=admitted_context(inner),
                whole=not ask.stream,
                binding=OPENAI_BINDING,
                supplied=ask.supplied,
            )
            async with aclosing(events):
                await _until_gone(receive, _answer(events, ask, persona, send))

    async def _body(self, scope: Scope, receive: Receive) -> Any:
        """The request's JSON, read within the bounds.

        Raises:
            WireError: 413 past ``max_body_bytes``; 400 not JSON, or nested too deep.
        """
        limit = self._max_body
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                raise _too_large(limit)
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise WireError(400, "The client left before its request was read")
            body += message.get("body", b"")
            if len(body) > limit:
                raise _too_large(limit)
            more = message.get("more_body", False)
        try:
            data = json.loads(body, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise WireError(400, "The request body is not JSON", param="body") from None
        if nests_deeper(data, MAX_DEPTH):
            raise WireError(400, f"The request body nests deeper than {MAX_DEPTH}", param="body")
        return data


async def _answer(
    events: AsyncGenerator[LocalEvent, None], ask: CompletionAsk, persona: Persona, send: Send
) -> None:
    """The task's events as a chat completion: one JSON answer, or a stream of chunks. The
    head waits for the answer's first text (or its end), so that a turn that fails before
    it is an HTTP error a client reads as such. A panel's stream is its answer whole, each
    member's turn under its name, at the end (its members speak at once: their pieces
    would interleave), after a head sent as its task starts."""
    chunks = Chunks(send, "", persona.id, include_usage=ask.include_usage)
    pieces: list[str] = []
    panel = persona.panel is not None
    end = LocalEnd("", "failed", "The persona did not answer")
    try:
        async for event in events:
            if isinstance(event, LocalStart):
                chunks = Chunks(
                    send, _completion_id(event), persona.id, include_usage=ask.include_usage
                )
                if ask.stream and panel:
                    await chunks.start()
            elif isinstance(event, LocalText):
                pieces.append(event.text)
                if ask.stream and not panel:
                    if not chunks.started:
                        await chunks.start()
                    await chunks.text(event.text)
            else:
                end = event
                break
    except A2AError as error:  # the handler refused the call before any task
        raise WireError(400, f"{persona.id}: {error.message}") from None
    status = _end_status(end)
    if status != 200:
        message = end.text or f"The turn ended {end.state}"
        if not chunks.started:
            raise WireError(status, message, type=_TYPES.get(status, "server_error"))
        await chunks.fail(message, "server_error")
        return
    text = end.text or "".join(pieces)
    if not ask.stream:
        await send_json(send, 200, completion(_completion_id(end), persona.id, end, text))
        return
    if not chunks.started:
        await chunks.start()
    if panel and text:
        await chunks.text(text)
    await chunks.finish(end)


async def _until_gone(receive: Receive, work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` until it ends or the client disconnects (then it is cancelled: the
    task's events closed, which cancels the task)."""
    answering = asyncio.ensure_future(work)

    async def gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    watching = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({answering, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watching.cancel()
        if not answering.done():
            answering.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
    if answering.cancelled():
        with contextlib.suppress(asyncio.CancelledError):
            await answering
        return
    answering.result()


def _completion_id(event: LocalStart | LocalEnd) -> str:
    return f"chatcmpl-{event.task_id}"


def _end_status(end: LocalEnd) -> int:
    """200 when the task completed (or waits for the user); else 403 when refused, 409
    canceled, the status of the hub's error it failed with, 502 when the model failed."""
    if end.state in ("completed", "input-required"):
        return 200
    if end.state == "rejected":
        return 403
    if end.state == "canceled":
        return 409
    error = end.error
    if error is None or isinstance(error, LLMError | BudgetSpentError):
        return 502
    for kind in type(error).__mro__:
        if issubclass(kind, PersonaAgentError) and kind in HTTP_STATUSES:
            return HTTP_STATUSES[kind]
    return 502


def _raise(refusal: Refusal | None) -> None:
    if refusal is not None:
        raise WireError(
            refusal.status,
            refusal.message,
            type=_TYPES.get(refusal.status, "invalid_request_error"),
            code="rate_limit_exceeded" if refusal.status == 429 else None,
            headers=refusal.headers,
        )


def _refused(status: int, message: str) -> WireError:
    code = "invalid_api_key" if status == 401 else None
    return WireError(status, message, type=_TYPES.get(status, "invalid_request_error"), code=code)


def _unknown(model: str) -> WireError:
    return WireError(
        404,
        f"The model '{model[:80]}' does not exist or you do not have access to it "
        "(GET /v1/models lists the personas and panels you may call)",
        code="model_not_found",
        param="model",
    )


def _too_large(limit: int) -> WireError:
    return WireError(
        413,
        f"The request is over {limit} bytes (PERSONA_AGENT_MAX_MESSAGE_BYTES)",
        code="request_too_large",
    )


def _no_constant(constant: str) -> None:
    raise ValueError(f"{constant} is not a JSON value")
