"""Answers of the hub that its OpenAPI document does not declare: known bugs of the document
(or of the answer), each to be fixed in the route that gives it.

The REST fuzzer waives, for exactly these (operation, status) pairs, and only when the
answer holds ``marker``, exactly the checks named; ``test_openapi_declarations.py``
reproduces each one and runs those checks on it as a strict xfail, which fails as soon as
the answer is as declared (then remove the entry here).
"""

from __future__ import annotations

from dataclasses import dataclass

from schemathesis import CheckFunction
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)

__all__ = ["ADMIN_KEY", "FIXED_GAPS", "KNOWN_GAPS", "Gap"]


@dataclass(frozen=True)
class Gap:
    """One undeclared answer: ``status`` to a request (``request_path`` with ``content``
    and ``headers``) of the operation, and what is wrong with it (``bug``): the checks it
    fails (``waives``)."""

    method: str
    path: str
    status: int
    bug: str
    waives: tuple[CheckFunction, ...]
    request_path: str
    content: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()
    marker: str | None = None
    """Text only this bug's answers hold (``None``: any answer of the status)."""

    def applies(self, method: str, path: str, status: int, body: bytes) -> bool:
        """Whether an answer of the fuzzer is this bug's."""
        if (method, path, status) != (self.method, self.path, self.status):
            return False
        return self.marker is None or self.marker.encode() in body


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

KNOWN_GAPS: list[Gap] = []
"""The answers still undeclared (none today): the fuzzer waives them, and
``test_openapi_declarations.py`` runs each as a strict xfail."""

FIXED_GAPS: list[Gap] = [
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
    Gap(
        "GET",
        "/api/v1/personas/{persona_id}/usage",
        422,
        "answers since >= until with {'detail': 'since must be before until'}, where the "
        "document's 422 is a list of errors (api/routes/personas.py persona_usage: raise "
        "RequestValidationError with loc ('query', 'since') as the other 422s do)",
        (response_schema_conformance,),
        request_path="/api/v1/personas/socrates/usage?since=2030-01-01T00:00:00Z"
        "&until=2020-01-01T00:00:00Z",
        headers=(_ADMIN,),
        marker="since must be before until",
    ),
]
"""Gaps the fuzzer found and the routes have since fixed: each is replayed, and must now
pass the checks it once failed."""
