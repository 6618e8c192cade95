"""Request bodies of the REST API, bounded before any route reads them.

A body larger than the limit is refused from its ``Content-Length``, or as soon as
more bytes than the limit have arrived (a chunked body has no length): nothing
larger is held in memory or written to disk (Starlette spools big multipart
files to a temporary file). A JSON body nested deeper than the limit is refused
before FastAPI parses it (``json`` would raise ``RecursionError`` on deep input).
"""

from __future__ import annotations

import json

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from persona_agent.security.limits import LimitExceeded, Limits, check_depth, too_deep

__all__ = ["MULTIPART_ALLOWANCE", "BodyLimit", "replay"]

MULTIPART_ALLOWANCE = 64 * 1024
"""Bytes a body may have beyond the persona limit: a multipart envelope, JSON's quoting."""

_WRITES = frozenset({"POST", "PUT", "PATCH"})


class _NotJSON(ValueError):
    """What Python's ``json`` reads but JSON has not (RFC 8259: no NaN or Infinity)."""


def _not_json(constant: str) -> None:
    raise _NotJSON(f"{constant} is not a JSON value (RFC 8259)")


class BodyLimit:
    """ASGI middleware: bodies of writes under ``prefix`` at most ``limits.max_bytes`` +
    :data:`MULTIPART_ALLOWANCE` bytes, file uploads (multipart) at most
    ``limits.max_image_bytes`` + the allowance (a PNG card) (else 413), JSON ones nested
    at most ``limits.max_depth`` deep and free of ``NaN``/``Infinity`` (else 422)."""

    def __init__(self, app: ASGIApp, *, limits: Limits, prefix: str = "/api/") -> None:
        self.app = app
        self.limits = limits
        self.prefix = prefix
        self.max_body = limits.max_bytes + MULTIPART_ALLOWANCE
        self.max_upload = max(limits.max_bytes, limits.max_image_bytes) + MULTIPART_ALLOWANCE

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in _WRITES
            or not scope["path"].startswith(self.prefix)
        ):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        limit = self.max_upload if content_type == b"multipart/form-data" else self.max_body
        length = headers.get(b"content-length", b"").strip()
        if length.isdigit() and int(length) > limit:
            await self._too_large(scope, receive, send, int(length), limit)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._too_large(scope, receive, send, None, limit)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        # What FastAPI parses as JSON: a JSON type, or no type at all.
        if content_type in (b"", b"application/json") or content_type.endswith(b"+json"):
            problem = self._json_problem(body)
            if problem is not None:
                response = JSONResponse({"detail": problem}, status_code=422)
                await response(scope, receive, send)
                return
        await self.app(scope, replay(body, receive), send)

    def _json_problem(self, body: bytes) -> str | None:
        """Why a JSON body is refused here, or None (a body that is not JSON at all is left
        to FastAPI, which says where)."""
        try:
            check_depth(json.loads(body, parse_constant=_not_json), self.limits)
        except RecursionError:
            return f"The request body: {too_deep(self.limits)}"
        except LimitExceeded as error:
            return f"The request body: {error}"
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        except _NotJSON as error:
            return f"The request body: {error}"
        except ValueError as error:  # valid JSON that Python refuses: a 5000-digit number
            reason = str(error).split("; use sys.set_int_max_str_digits()")[0]
            return f"The request body: {reason}"
        return None

    async def _too_large(
        self, scope: Scope, receive: Receive, send: Send, size: int | None, limit: int
    ) -> None:
        given = f"is {size} bytes" if size is not None else "is larger"
        if limit == self.max_body:
            what = (
                f"a persona of at most {self.limits.max_bytes} bytes: "
                "PERSONA_AGENT_MAX_PERSONA_BYTES"
            )
        else:
            what = (
                f"a card image of at most {self.limits.max_image_bytes} bytes: "
                "PERSONA_AGENT_MAX_IMAGE_BYTES"
            )
        detail = f"The request body {given}, more than the limit of {limit} bytes ({what})"
        response = JSONResponse(
            {"detail": detail}, status_code=413, headers={"Connection": "close"}
        )
        await response(scope, receive, send)


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` that gives ``body`` again, then what the client sends next (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
