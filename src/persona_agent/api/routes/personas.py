"""``/api/v1/personas``: create, read, update, upload and delete personas, live."""

from __future__ import annotations

import asyncio
from pathlib import PurePath
from typing import Annotated, Any

from fastapi import APIRouter, Body, File, Header, Query, Request, Response, UploadFile, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from persona_agent.a2a.agent_card import CARD_PATH, persona_url
from persona_agent.api.deps import Reader, Store, Writer
from persona_agent.api.persona_data import DeletedPersonaData
from persona_agent.errors import PersonaFileError
from persona_agent.personas.loader import (
    MAX_PROBLEMS,
    PERSONA_SUFFIXES,
    decode_persona_bytes,
    parse_persona_text,
)
from persona_agent.personas.model import Persona
from persona_agent.personas.parsing import Limits

__all__ = ["router"]


class ErrorDetail(BaseModel):
    """The body of every error answer: what went wrong, for a person to read."""

    detail: str | list[Any]


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error status codes."""
    reasons = {
        401: "No API key, or a wrong one",
        403: "Writes without API keys are accepted from loopback clients only",
        404: "No persona with this id",
        409: "A persona with this id exists already",
        412: "If-Match does not match the persona's current ETag",
    }
    return {code: {"model": ErrorDetail, "description": reasons[code]} for code in codes}


router = APIRouter(prefix="/personas", tags=["personas"], responses=_errors(401, 403))

PERSONA_EXAMPLE: dict[str, Any] = {
    "id": "grace-hopper",
    "name": "Grace Hopper",
    "description": "Computer scientist and US Navy rear admiral who pioneered compilers.",
    "personal_background": "Born in New York in 1906 ...",
    "language_style": {"tone": "brisk, witty, practical", "characteristics": ["uses anecdotes"]},
    "knowledge_domains": {"Programming languages": ["compilers", "COBOL"]},
    "interaction_samples": [
        {"user": "Why compilers?", "assistant": "Because people should write in English."}
    ],
}


def _resource(request: Request, persona: Persona) -> dict[str, Any]:
    base: str = request.app.state.registry.base_url
    url = persona_url(base, persona.id)
    data = persona.model_dump(mode="json")
    data["links"] = {"a2a": url, "card": url.rstrip("/") + CARD_PATH}
    return data


def _etag(persona: Persona) -> str:
    return f'"{persona.version}"'


def _validated(persona_id: str, data: dict[str, Any]) -> Persona:
    """The persona, or a 422 whose errors name each bad field."""
    try:
        return Persona.from_data(persona_id, data)
    except ValidationError as error:
        details = error.errors(include_url=False, include_input=False)  # not echoed back
        shown: list[Any] = [{**e, "loc": ("body", *e["loc"])} for e in details[:MAX_PROBLEMS]]
        if len(details) > MAX_PROBLEMS:  # a body of many unknown fields: a short answer
            more = f"and {len(details) - MAX_PROBLEMS} more problems"
            shown.append({"loc": ("body",), "msg": more, "type": "too_many_errors"})
        raise RequestValidationError(shown) from None


def _send(response: Response, request: Request, persona: Persona) -> dict[str, Any]:
    response.headers["ETag"] = _etag(persona)
    return _resource(request, persona)


@router.get("", dependencies=[Reader])
async def list_personas(
    request: Request,
    store: Store,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> dict[str, Any]:
    """Personas by id, a page at a time."""
    personas = await store.list()
    page = personas[offset : offset + limit]
    return {
        "items": [_resource(request, p) for p in page],
        "total": len(personas),
        "offset": offset,
        "limit": limit,
    }


@router.get("/{persona_id}", dependencies=[Reader], responses=_errors(404))
async def get_persona(
    persona_id: str, request: Request, response: Response, store: Store
) -> dict[str, Any]:
    """One persona; its ``ETag`` is the version to send back in ``If-Match``."""
    return _send(response, request, await store.get(persona_id))


@router.post("", status_code=status.HTTP_201_CREATED, dependencies=[Writer], responses=_errors(409))
async def create_persona(
    request: Request,
    response: Response,
    store: Store,
    body: Annotated[dict[str, Any], Body(examples=[PERSONA_EXAMPLE])],
) -> dict[str, Any]:
    """Create a persona (``id`` in the body); it answers over A2A as soon as this returns."""
    data = dict(body)
    persona_id = data.pop("id", None)
    if not isinstance(persona_id, str):
        raise RequestValidationError(
            [{"loc": ("body", "id"), "msg": "Field required (a string)", "type": "missing"}]
        )
    persona = _validated(persona_id, data)
    await _deleted_data_gone(request, persona.id)
    await store.create(persona)
    response.headers["Location"] = f"{request.url.path}/{persona.id}"
    return _send(response, request, persona)


@router.put("/{persona_id}", dependencies=[Writer], responses=_errors(404, 412))
async def update_persona(
    persona_id: str,
    request: Request,
    response: Response,
    store: Store,
    body: Annotated[dict[str, Any], Body(examples=[PERSONA_EXAMPLE])],
    if_match: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    """Replace a persona. With ``If-Match``, only if it is still at that version (else 412)."""
    data = dict(body)
    if data.get("id", persona_id) != persona_id:
        raise RequestValidationError(
            [{"loc": ("body", "id"), "msg": "must match the id in the URL", "type": "value_error"}]
        )
    data.pop("id", None)
    data.pop("version", None)
    data.pop("links", None)
    persona = _validated(persona_id, data)
    await store.replace(persona, if_match=if_match)
    return _send(response, request, persona)


@router.delete(
    "/{persona_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    dependencies=[Writer],
    responses=_errors(404, 412),
)
async def delete_persona(
    persona_id: str,
    request: Request,
    store: Store,
    if_match: Annotated[str | None, Header()] = None,
) -> Response:
    """Delete a persona: its A2A endpoints answer 404 at once, and its tasks and
    conversations are deleted before this returns."""
    await store.delete(persona_id, if_match=if_match)
    await _deleted_data_gone(request, persona_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/upload",
    status_code=status.HTTP_201_CREATED,
    dependencies=[Writer],
)
async def upload_persona(
    request: Request,
    response: Response,
    store: Store,
    file: Annotated[UploadFile, File(description="A persona file: .yaml, .yml or .json")],
    replace: Annotated[bool, Query(description="Replace an existing persona")] = False,
) -> dict[str, Any]:
    """Create (or with ``replace=true`` replace) a persona from a file; the id is its stem."""
    name = PurePath(file.filename or "").name
    path = PurePath(name)
    fmt = PERSONA_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        expected = ", ".join(PERSONA_SUFFIXES)
        raise _upload_error(f"file name '{name}' must end with {expected}")
    limits: Limits = request.app.state.persona_limits
    raw = await file.read(limits.max_bytes + 1)  # the whole body is bounded (api/limits.py)

    def parse() -> Persona:
        text = decode_persona_bytes(raw, name, limits)
        return parse_persona_text(path.stem, text, source=name, fmt=fmt, limits=limits)

    try:
        persona = await asyncio.to_thread(parse)  # up to a second for a 1 MiB file
    except PersonaFileError as error:
        raise RequestValidationError(
            [
                {"loc": ("body", "file"), "msg": f"{name}: {problem}", "type": "value_error"}
                for problem in error.problems
            ]
        ) from None
    await _deleted_data_gone(request, persona.id)
    if replace:
        await store.put(persona)
        response.status_code = status.HTTP_200_OK
    else:
        await store.create(persona)
    return _send(response, request, persona)


async def _deleted_data_gone(request: Request, persona_id: str) -> None:
    """Wait until the tasks and history of a deleted persona with this id are gone."""
    persona_data: DeletedPersonaData = request.app.state.persona_data
    await persona_data.settled(persona_id)


def _upload_error(message: str) -> RequestValidationError:
    return RequestValidationError(
        [{"loc": ("body", "file"), "msg": message, "type": "value_error"}]
    )
