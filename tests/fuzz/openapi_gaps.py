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

__all__ = ["ADMIN_KEY", "KNOWN_GAPS", "Gap"]


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

KNOWN_GAPS: list[Gap] = []
