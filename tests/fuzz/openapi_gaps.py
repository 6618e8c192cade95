"""Answers of the hub that its OpenAPI document does not declare: known bugs of the document.

The REST fuzzer waives, for exactly these (operation, status) pairs, exactly the checks
named; ``test_openapi_declarations.py`` reproduces each one with a strict xfail, which
fails as soon as the document declares the answer (then remove the entry here).
"""

from __future__ import annotations

from dataclasses import dataclass

from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

__all__ = ["ADMIN_KEY", "KNOWN_GAPS", "Gap"]


@dataclass(frozen=True)
class Gap:
    """One undeclared answer: ``status`` to a request (``content`` with ``headers``) of
    the operation, and what the document gets wrong about it (``bug``)."""

    method: str
    path: str
    status: int
    bug: str
    waives: tuple[object, ...]
    request_path: str
    content: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()
    media_type: str | None = None
    """Set when the document declares the status but not this media type."""


ADMIN_KEY = "fuzz-admin-key-0123456789"
"""The key of the hub the gaps are reproduced on (``test_openapi_declarations.py``)."""
_ADMIN = ("x-api-key", ADMIN_KEY)
_NOT_UTF8_JSON = b'{"name": "\xff"}'
"""A JSON body that is not UTF-8: FastAPI's 400, where invalid JSON is its 422."""
_BROKEN_FORM = b"--B\r\n-1.2e+16--B--\r\n"
_FORM = ("content-type", "multipart/form-data; boundary=B")
_PARSE_BUG = (
    "declares no 400; a body FastAPI cannot parse (JSON that is not UTF-8, a broken "
    "multipart form) is its 400 'There was an error parsing the body' (api/routes/personas.py:"
    " declare 400 with the other errors)"
)

KNOWN_GAPS: list[Gap] = [
    Gap(
        "GET",
        "/.well-known/jwks.json",
        404,
        "declares only 200; answers 404 when cards are not signed (api/app.py card_keys)",
        (status_code_conformance,),
        request_path="/.well-known/jwks.json",
    ),
    Gap(
        "GET",
        "/metrics",
        200,
        "declares application/json; answers Prometheus text (api/app.py prometheus_metrics:"
        " needs response_class=Response and a text/plain 200)",
        (content_type_conformance, response_schema_conformance),
        request_path="/metrics",
        headers=(_ADMIN,),
        media_type="text/plain",
    ),
    Gap(
        "GET",
        "/metrics",
        401,
        "declares only 200; with keys it needs personas:read, so 401 and 403 (api/app.py"
        " prometheus_metrics: declare them as /api/v1 does)",
        (status_code_conformance,),
        request_path="/metrics",
    ),
    Gap(
        "POST",
        "/api/v1/personas",
        400,
        _PARSE_BUG,
        (status_code_conformance,),
        request_path="/api/v1/personas",
        content=_NOT_UTF8_JSON,
        headers=(_ADMIN, ("content-type", "application/json")),
    ),
    Gap(
        "PUT",
        "/api/v1/personas/{persona_id}",
        400,
        _PARSE_BUG,
        (status_code_conformance,),
        request_path="/api/v1/personas/socrates",
        content=_NOT_UTF8_JSON,
        headers=(_ADMIN, ("content-type", "application/json")),
    ),
    Gap(
        "POST",
        "/api/v1/personas/upload",
        400,
        _PARSE_BUG,
        (status_code_conformance,),
        request_path="/api/v1/personas/upload",
        content=_BROKEN_FORM,
        headers=(_ADMIN, _FORM),
    ),
    Gap(
        "POST",
        "/api/v1/personas/validate",
        400,
        _PARSE_BUG,
        (status_code_conformance,),
        request_path="/api/v1/personas/validate",
        content=_BROKEN_FORM,
        headers=(_ADMIN, _FORM),
    ),
]
