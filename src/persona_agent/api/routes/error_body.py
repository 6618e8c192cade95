"""The body of the REST API's error answers, and their OpenAPI declarations."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["ErrorDetail", "error_responses"]


class ErrorDetail(BaseModel):
    """The body of every error answer: what went wrong, for a person to read."""

    detail: str | list[Any]


_REASONS = {
    400: "The body cannot be parsed (JSON that is not UTF-8, a broken multipart form)",
    401: "No API key, or a wrong one",
    403: "Writes without API keys are accepted from loopback clients only",
    404: "No persona with this id",
    409: "A persona with this id exists already",
    412: "If-Match does not match the persona's current ETag",
    415: "The body is not labelled with a media type the route takes",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error status codes of the persona routes."""
    return {code: {"model": ErrorDetail, "description": _REASONS[code]} for code in codes}
