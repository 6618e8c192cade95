"""What the A2A router reads of a call before the SDK does, and its own answers to it.

A call's kind (a send, a stream or a subscription: what limits count), whether its body
is labelled JSON, and the answers the router gives by itself (an unknown persona's 404,
a card with its ``ETag``, 401/403/429, 413, 415), each in the shape of the call's
binding: a JSON-RPC error on the JSON-RPC endpoint (``rest`` empty), a Google-style
error on HTTP+JSON.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from persona_agent.a2a.card_forms import VARY, card_form
from persona_agent.a2a.cards import ASSETS_PATH, AVATAR_PATH, CARD_PATH
from persona_agent.a2a.sdk_fixes.jsonrpc_body import INVALID_REQUEST, jsonrpc_error

__all__ = [
    "AI_CATALOG_LINK",
    "CARD_CACHE_CONTROL",
    "PUBLIC_PATHS",
    "ParsedRequest",
    "call_kind",
    "card_response",
    "catalog_link",
    "first_segments",
    "http_error",
    "is_public",
    "labelled_json",
    "not_found_response",
    "not_json_response",
    "not_modified",
    "too_large_response",
]

CARD_CACHE_CONTROL = "public, max-age=60, must-revalidate"
AI_CATALOG_LINK = '</.well-known/ai-catalog.json>; rel="ai-catalog"'
"""Where the hub's AI Catalog is (RFC 8288 ``Link``, the AI Catalog's link relation)."""

PUBLIC_PATHS = frozenset({CARD_PATH.lstrip("/"), AVATAR_PATH.lstrip("/")})
"""Below a persona: what anyone may read, whatever its access (its card and picture)."""
_PUBLIC_PREFIX = ASSETS_PATH.lstrip("/") + "/"


def is_public(rest: str) -> bool:
    """Whether anyone may read ``rest`` below a persona, whatever its access: its card, its
    picture, and the assets of the CHARX it came in (read as its picture is)."""
    return rest in PUBLIC_PATHS or rest.startswith(_PUBLIC_PREFIX)


_SENDS = frozenset({"SendMessage", "message/send"})
_STREAMS = frozenset({"SendStreamingMessage", "message/stream"})
_SUBSCRIBES = frozenset({"SubscribeToTask", "tasks/resubscribe"})


def call_kind(rest: str, method: Any) -> str | None:
    """``send``, ``stream`` or ``subscribe`` for the calls that limits count; else None.

    ``rest``: the path below the persona (empty: the JSON-RPC endpoint); ``method``: a
    JSON-RPC call's, as the body has it (a method that is no string, say a list or an
    object, is none: the SDK answers it with Invalid Request). For HTTP+JSON the path
    says it."""
    if rest == "":
        if not isinstance(method, str):
            return None
        if method in _SENDS:
            return "send"
        if method in _STREAMS:
            return "stream"
        return "subscribe" if method in _SUBSCRIBES else None
    path = rest.removeprefix("v1/")
    if path == "message:send":
        return "send"
    if path == "message:stream":
        return "stream"
    return "subscribe" if path.startswith("tasks/") and path.endswith(":subscribe") else None


def labelled_json(scope: Scope) -> bool:
    """Whether a request's body is labelled JSON (``application/json``, or a ``+json`` type
    such as ``application/a2a+json``), or is empty (``tasks/{id}:cancel``): a web page's
    form cannot send such a body to another site without the browser asking first (CORS),
    which the hub never allows."""
    headers = dict(scope["headers"])
    content_type = headers.get(b"content-type")
    if content_type is None:
        return b"transfer-encoding" not in headers and headers.get(b"content-length", b"0") == b"0"
    media: bytes = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (
        media.startswith(b"application/") and media.endswith(b"+json")
    )


def http_error(
    rest: str,
    status: int,
    name: str,
    message: str,
    headers: dict[str, str],
    extra: dict[str, Any] | None = None,
) -> Response:
    """An error the HTTP status says (401, 403, 429), in the binding's shape: on the
    JSON-RPC endpoint (``rest`` empty) a JSON-RPC error, on HTTP+JSON a Google-style one."""
    if rest == "":
        data = {"httpStatus": status, **(extra or {})}
        error = {"code": INVALID_REQUEST, "message": message, "data": data}
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": None, "error": error}
    else:
        body = {"error": {"code": status, "status": name, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def not_json_response(rest: str) -> JSONResponse:
    """415: a body not labelled JSON."""
    message = "Content-Type must be application/json (or application/a2a+json)"
    if rest == "":  # JSON-RPC: Invalid Request, with the HTTP status that says why
        return JSONResponse(
            {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}},
            status_code=415,
        )
    return JSONResponse(
        {"error": {"code": 415, "status": "INVALID_ARGUMENT", "message": message}},
        status_code=415,
    )


def too_large_response(rest: str, message: str) -> Response:
    """A body over the message size limit: 413 on HTTP+JSON, Invalid Request on JSON-RPC."""
    if rest == "":  # the JSON-RPC endpoint: a JSON-RPC error (Invalid Request)
        return jsonrpc_error(INVALID_REQUEST, message)
    return JSONResponse(
        {"error": {"code": 413, "status": "PAYLOAD_TOO_LARGE", "message": message}},
        status_code=413,
    )


def not_found_response(persona_id: str) -> JSONResponse:
    return JSONResponse(
        {
            "error": {
                "code": "persona_not_found",
                "message": f"No persona with id '{persona_id}'",
            }
        },
        status_code=404,
    )


def catalog_link(headers: MutableHeaders | MutableMapping[str, str]) -> None:
    """Add the ``Link`` to the hub's AI Catalog to ``headers`` (on the hub's pages, cards
    and discovery lists), after any ``Link`` they already have."""
    existing = headers.get("link") or headers.get("Link")
    headers["Link"] = f"{existing}, {AI_CATALOG_LINK}" if existing else AI_CATALOG_LINK


def card_response(request: Request, card: dict[str, Any], etag: str) -> Response:
    """An agent card, with its ``ETag`` and ``Cache-Control``; ``304`` when the request's
    ``If-None-Match`` names it. A request saying ``A2A-Version: 1.0`` gets the card as
    1.0 alone defines it (:mod:`.card_forms`)."""
    card, etag = card_form(request, card, etag)
    headers = {"ETag": etag, "Cache-Control": CARD_CACHE_CONTROL, "Vary": VARY}
    catalog_link(headers)
    if not_modified(request, etag):
        return Response(status_code=304, headers=headers)
    return JSONResponse(card, headers=headers)


def not_modified(request: Request, etag: str) -> bool:
    """Whether the request's ``If-None-Match`` names ``etag`` (weakly) or is ``*``."""
    if_none_match = request.headers.get("if-none-match", "")
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag.removeprefix("W/") in tags


def first_segments(routes: list[BaseRoute]) -> frozenset[str]:
    """The first path segments of ``routes`` (``message:send``, ``tasks``, ``v1`` ...),
    without parameters (the SDK's ``/{tenant}`` mount)."""
    return frozenset(
        segment
        for route in routes
        if isinstance(route, Route)
        for segment in [route.path.split("/")[1]]
        if "{" not in segment
    )


class ParsedRequest(Request):
    """A request whose JSON body the router has already read and parsed."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, parsed: Any) -> None:
        super().__init__(scope, receive, send)
        self._parsed = parsed

    async def json(self) -> Any:
        return self._parsed
