"""``/api/v1/personas``: create, read, update, upload and delete personas, live."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from pathlib import PurePath
from typing import Annotated, Any, Literal, TypeVar, cast

from fastapi import (
    APIRouter,
    Body,
    File,
    Header,
    HTTPException,
    Query,
    Request,
    Response,
    UploadFile,
    status,
)
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from persona_agent.a2a.cards import CARD_PATH, persona_url
from persona_agent.api.deps import (
    Auth,
    FileChecker,
    PersonaReader,
    PersonaWriter,
    Reader,
    Store,
    Writer,
)
from persona_agent.api.persona_data import DeletedPersonaData
from persona_agent.chat.usage_log import UsageLog
from persona_agent.errors import PersonaAgentError, PersonaFileError, PersonaNotFoundError
from persona_agent.personas.formats.card_pngs import CardPngs
from persona_agent.personas.formats.tavern import CardSpec, persona_to_card
from persona_agent.personas.loader import (
    MAX_PROBLEMS,
    PERSONA_SUFFIXES,
    PersonaFile,
    dump_persona_yaml,
    persona_to_data,
    read_persona,
)
from persona_agent.personas.model import Persona
from persona_agent.personas.store import PersonaStore
from persona_agent.security.audit import AuditLog, request_id_of
from persona_agent.security.authentication import Action
from persona_agent.security.limits import Limits

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

_Route = TypeVar("_Route", bound=Callable[..., Coroutine[Any, Any, Any]])

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


def _validated(request: Request, persona_id: str, data: dict[str, Any]) -> Persona:
    """The persona, within the hub's limits, or a 422 whose errors name each bad field."""
    limits: Limits = request.app.state.persona_limits
    try:
        return Persona.from_data(persona_id, data, limits=limits)
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
    auth: Auth,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> dict[str, Any]:
    """Personas by id, a page at a time: those the caller's key lets it use."""
    every = await store.list()
    shown = set(auth.visible(request, [persona.id for persona in every]))
    personas = [persona for persona in every if persona.id in shown]
    page = personas[offset : offset + limit]
    return {
        "items": [_resource(request, p) for p in page],
        "total": len(personas),
        "offset": offset,
        "limit": limit,
    }


@router.get("/{persona_id}", dependencies=[PersonaReader], responses=_errors(404))
async def get_persona(
    persona_id: str, request: Request, response: Response, store: Store
) -> dict[str, Any]:
    """One persona; its ``ETag`` is the version to send back in ``If-Match``."""
    return _send(response, request, await store.get(persona_id))


@router.get(
    "/{persona_id}/file",
    dependencies=[PersonaReader],
    response_class=Response,
    responses={
        **_errors(404),
        200: {
            "description": "The persona file, YAML; its ETag is the persona's version",
            "content": {"application/yaml": {}},
        },
    },
)
async def get_persona_file(persona_id: str, store: Store) -> Response:
    """One persona as the YAML file the hub writes (what a person edits: no id, no
    version, no field at its default). Its ``ETag`` is the persona's version, for
    ``If-Match`` on the ``PUT`` that saves the edited file's content."""
    persona = await store.get(persona_id)
    return Response(
        dump_persona_yaml(persona),
        media_type="application/yaml",
        headers={"ETag": _etag(persona)},
    )


def audited(action: str) -> Callable[[_Route], _Route]:
    """Record the route's outcome in the audit log: who, which persona, ok or the status."""

    def decorate(route: _Route) -> _Route:
        @functools.wraps(route)
        async def run(*args: Any, **kwargs: Any) -> Any:
            request: Request = kwargs["request"]
            persona_id = kwargs.get("persona_id")
            outcome = "error"
            try:
                result = await route(*args, **kwargs)
                outcome = "ok"
                if isinstance(result, dict):
                    persona_id = result.get("id", persona_id)
                return result
            except HTTPException as error:
                outcome = str(error.status_code)
                raise
            except RequestValidationError:
                outcome = "422"
                raise
            except PersonaAgentError as error:
                outcome = type(error).__name__
                raise
            finally:
                audit: AuditLog = request.app.state.audit
                principal = getattr(request.state, "principal", None)
                audit.record(
                    action,
                    principal=principal.name if principal is not None else None,
                    persona=persona_id,
                    outcome=outcome,
                    request_id=request_id_of(dict(request.headers)),
                )

        return cast(_Route, run)

    return decorate


@router.post("", status_code=status.HTTP_201_CREATED, dependencies=[Writer], responses=_errors(409))
@audited("persona.create")
async def create_persona(
    request: Request,
    response: Response,
    store: Store,
    auth: Auth,
    body: Annotated[dict[str, Any], Body(examples=[PERSONA_EXAMPLE])],
) -> dict[str, Any]:
    """Create a persona (``id`` in the body); it answers over A2A as soon as this returns."""
    data = dict(body)
    persona_id = data.pop("id", None)
    if not isinstance(persona_id, str):
        raise RequestValidationError(
            [{"loc": ("body", "id"), "msg": "Field required (a string)", "type": "missing"}]
        )
    auth.authorize(request, Action.WRITE, persona_id)
    persona = _validated(request, persona_id, data)
    await _deleted_data_gone(request, persona.id)
    stored = await _stored(store.create(persona))
    response.headers["Location"] = f"{request.url.path}/{stored.id}"
    return _send(response, request, stored)


@router.put("/{persona_id}", dependencies=[PersonaWriter], responses=_errors(404, 412))
@audited("persona.update")
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
    persona = _validated(request, persona_id, data)
    stored = await _stored(store.replace(persona, if_match=if_match))
    return _send(response, request, stored)


@router.delete(
    "/{persona_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    dependencies=[PersonaWriter],
    responses=_errors(404, 412),
)
@audited("persona.delete")
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
    responses=_errors(409),
)
@audited("persona.upload")
async def upload_persona(
    request: Request,
    response: Response,
    store: Store,
    auth: Auth,
    file: Annotated[
        UploadFile,
        File(
            description="A persona file (.yaml, .yml, .json) or a character card "
            "(V2/V3, .json or .png)"
        ),
    ],
    replace: Annotated[bool, Query(description="Replace an existing persona")] = False,
    persona_id: Annotated[
        str | None,
        Query(
            alias="id",
            description="The persona's id. Default: a persona file's name without its "
            "extension; a character card's name as a slug",
        ),
    ] = None,
) -> dict[str, Any]:
    """Create (or with ``replace=true`` replace) a persona from a file or character card.
    A PNG card's picture becomes the persona's avatar."""
    loaded = await _read_upload(request, file, persona_id)
    if not isinstance(loaded, PersonaFile):
        # Each problem names the uploaded file ("grace.yaml: ..."); the form field's name
        # ("file") in the location would only be shown before it ("file: grace.yaml: ...").
        raise RequestValidationError(
            [{"loc": ("body",), "msg": problem, "type": "value_error"} for problem in loaded]
        )
    persona = loaded.persona
    auth.authorize(request, Action.WRITE, persona.id)
    await _deleted_data_gone(request, persona.id)
    if replace:
        existed = await _exists(store, persona.id)
        stored = await _stored(store.put(persona, image=loaded.image))
        if existed:
            response.status_code = status.HTTP_200_OK
    else:
        stored = await _stored(store.create(persona, image=loaded.image))
    response.headers["Location"] = f"{request.url.path.rsplit('/', 1)[0]}/{stored.id}"
    return _send(response, request, stored)


@router.post("/validate", dependencies=[FileChecker])
async def validate_persona(
    request: Request,
    store: Store,
    auth: Auth,
    file: Annotated[
        UploadFile,
        File(
            description="A persona file (.yaml, .yml, .json) or a character card "
            "(V2/V3, .json or .png), as for upload"
        ),
    ],
    persona_id: Annotated[
        str | None,
        Query(alias="id", description="The persona's id, as for upload"),
    ] = None,
) -> dict[str, Any]:
    """Check a file as upload would, and save nothing: ``valid``, the ``problems`` (each
    naming the file, the field and the reason), and for a valid file the ``persona`` as a
    body for ``POST /api/v1/personas`` or ``PUT``, and whether its id ``exists`` already
    (``null`` for an id the caller's key does not let it use). An editor calls it as its
    user types. Where nobody authenticates, it is accepted as a write is (from this
    machine, with the upload's header or the hub's own Origin): reading a file costs what
    an upload costs."""
    loaded = await _read_upload(request, file, persona_id)
    if not isinstance(loaded, PersonaFile):
        return {"valid": False, "problems": loaded}
    persona = loaded.persona
    return {
        "valid": True,
        "problems": [],
        "id": persona.id,
        "exists": (
            await _exists(store, persona.id) if auth.visible(request, [persona.id]) else None
        ),
        "persona": {"id": persona.id, **persona_to_data(persona)},
    }


async def _read_upload(
    request: Request, file: UploadFile, persona_id: str | None
) -> PersonaFile | list[str]:
    """The persona in an uploaded file, or its problems (each a message naming the file):
    bounds, format and every field checked, as for a file in the persona directory."""
    name = PurePath(file.filename or "").name
    fmt = PERSONA_SUFFIXES.get(PurePath(name).suffix.lower())
    if fmt is None:
        expected = ", ".join(PERSONA_SUFFIXES)
        return [f"file name '{name}' must end with {expected}"]
    limits: Limits = request.app.state.persona_limits
    limit = limits.max_image_bytes if fmt == "png" else limits.max_bytes
    raw = await file.read(limit + 1)  # the whole body is bounded (api/limits.py)

    def parse() -> PersonaFile:
        return read_persona(persona_id, raw, source=name, fmt=fmt, limits=limits)

    try:
        return await asyncio.to_thread(parse)  # up to a second for a 1 MiB file
    except PersonaFileError as error:
        return [f"{name}: {problem}" for problem in error.problems]


@router.get(
    "/{persona_id}/card",
    dependencies=[PersonaReader],
    responses={
        **_errors(404),
        200: {
            "description": "The card: JSON, or a PNG image with the card in a text chunk",
            "content": {"application/json": {}, "image/png": {}},
        },
    },
)
async def export_card(
    persona_id: str,
    request: Request,
    store: Store,
    spec: Annotated[CardSpec, Query(alias="format", description="Character card V2 or V3")] = "v3",
    container: Annotated[
        Literal["json", "png"],
        Query(alias="as", description="A JSON file, or a PNG image with the card inside"),
    ] = "json",
) -> Response:
    """The persona as a Tavern character card. A persona imported from a card gives back
    that card (with any change made since); a PNG keeps the avatar's pixels."""
    persona = await store.get(persona_id)
    filename = f"{persona.id}.{container}"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    if container == "json":
        return JSONResponse(persona_to_card(persona, spec), headers=headers)
    image = await store.avatar(persona.id)
    card_pngs: CardPngs = request.app.state.card_pngs  # kept; encoded in a worker thread
    png = await card_pngs.get(persona, spec, image)
    return Response(png, media_type="image/png", headers=headers)


async def _exists(store: PersonaStore, persona_id: str) -> bool:
    try:
        await store.get(persona_id)
    except PersonaNotFoundError:
        return False
    return True


async def _stored(change: Awaitable[Persona]) -> Persona:
    """The persona as the store kept it; an avatar the store has not is a 422."""
    try:
        return await change
    except PersonaFileError as error:
        raise RequestValidationError(
            [
                {"loc": ("body", "avatar"), "msg": problem, "type": "value_error"}
                for problem in error.problems
            ]
        ) from None


async def _deleted_data_gone(request: Request, persona_id: str) -> None:
    """Wait until the tasks and history of a deleted persona with this id are gone."""
    persona_data: DeletedPersonaData = request.app.state.persona_data
    await persona_data.settled(persona_id)


@router.get("/{persona_id}/usage", dependencies=[PersonaReader], responses=_errors(404))
async def persona_usage(
    persona_id: str,
    request: Request,
    store: Store,
    since: Annotated[
        datetime | None, Query(description="from this time on (ISO 8601; default: the start)")
    ] = None,
    until: Annotated[
        datetime | None, Query(description="before this time (ISO 8601; default: now)")
    ] = None,
) -> dict[str, Any]:
    """What the persona's completed answers used and cost in a time window: tokens, US
    dollars (for models with a price, ``PERSONA_AGENT_LLM_PRICES``), by model. The sums of
    the cost-v1 data of the same answers."""
    await store.get(persona_id)  # 404 for an unknown persona
    end = until or datetime.now(UTC)
    start = since or datetime.fromtimestamp(0, UTC)
    start, end = (_aware(moment) for moment in (start, end))
    if start >= end:
        raise HTTPException(422, "since must be before until")
    usage: UsageLog = request.app.state.usage
    totals = await usage.totals(
        persona_id, int(start.timestamp() * 1000), int(end.timestamp() * 1000)
    )
    return {
        "persona": persona_id,
        "since": start.isoformat(),
        "until": end.isoformat(),
        "answers": totals.answers,
        "promptTokens": totals.prompt_tokens,
        "completionTokens": totals.completion_tokens,
        "cachedPromptTokens": totals.cached_prompt_tokens,
        "costUsd": totals.cost_usd,
        "unpricedAnswers": totals.unpriced_answers,
        "byModel": [
            {
                "model": entry.model,
                "answers": entry.answers,
                "promptTokens": entry.prompt_tokens,
                "completionTokens": entry.completion_tokens,
                "cachedPromptTokens": entry.cached_prompt_tokens,
                "costUsd": entry.cost_usd,
            }
            for entry in totals.by_model
        ],
    }


def _aware(moment: datetime) -> datetime:
    """A time without a zone is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
