"""``/api/v1/personas``: personas as files, in and out: the file as written (read and
replaced), an upload (persona file or character card), a file checked without saving, a
character card exported."""

from __future__ import annotations

import asyncio
from pathlib import PurePath
from typing import Annotated, Any, Literal

from fastapi import File, Header, HTTPException, Query, Request, Response, UploadFile, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from persona_agent.api.deps import (
    Auth,
    BaseUrl,
    CardImages,
    CharxAssets,
    FileChecker,
    PersonaData,
    PersonaLimits,
    PersonaReader,
    PersonaWriter,
    Store,
)
from persona_agent.api.rest_auth import SOURCE_MEDIA_TYPES
from persona_agent.api.routes.error_body import error_responses
from persona_agent.api.routes.persona_resource import (
    CREATES,
    audited,
    created,
    etag,
    exists,
    persona_router,
    send,
    stored,
)
from persona_agent.errors import PersonaFileError
from persona_agent.personas.formats.charx import card_charx
from persona_agent.personas.formats.tavern import CardSpec, persona_to_card
from persona_agent.personas.loader import (
    IMPORT_SUFFIXES,
    PersonaFile,
    PersonaSource,
    persona_to_data,
    read_persona,
)
from persona_agent.security.authorization import Action
from persona_agent.security.limits import Limits

__all__ = ["router"]

router = persona_router()

_V3_ONLY = "a CHARX holds a V3 card: as=charx goes with format=v3 (the default)"
CHARX_TYPE = "application/zip"
"""A CHARX's media type: the zip it is (the spec names none of its own)."""


@router.get(
    "/{persona_id}/file",
    dependencies=[PersonaReader],
    response_class=Response,
    responses={
        **error_responses(404),
        200: {
            "description": "The persona's file as written; its ETag is the persona's version",
            "content": {"application/yaml": {}, "application/json": {}},
        },
    },
)
async def get_persona_file(persona_id: str, store: Store) -> Response:
    """The persona's file byte for byte, comments and layout kept: its YAML, or the JSON
    of a character card imported as JSON or PNG (a persona kept in a database, or read
    from a PNG in the persona directory: the YAML the hub writes for it). Its ``ETag`` is
    the persona's version, for ``If-Match`` on the ``PUT`` that saves it edited."""
    source = await store.source(persona_id)
    persona = await store.get(persona_id)
    return Response(
        source.data,
        media_type=f"application/{source.fmt}",
        headers={"ETag": etag(persona)},
    )


@router.put(
    "/{persona_id}/file",
    dependencies=[PersonaWriter],
    responses=error_responses(400, 404, 412, 415),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/yaml": {}, "application/json": {}},
        }
    },
)
@audited("persona.update")
async def put_persona_file(
    persona_id: str,
    request: Request,
    response: Response,
    store: Store,
    base_url: BaseUrl,
    limits: PersonaLimits,
    if_match: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    """Replace a persona with the text of its file (``Content-Type: application/yaml``, or
    ``application/json`` for a JSON persona or character card), stored byte for byte as
    sent once it is valid; a 422 names the file, each bad field and the reason, and
    changes nothing. With ``If-Match``, only if it is still at that version (else 412)."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    fmt = SOURCE_MEDIA_TYPES.get(media)
    if fmt is None:
        raise HTTPException(
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            "The body must be a persona file: Content-Type application/yaml or application/json",
        )
    await store.get(persona_id)  # 404 before the text is read
    raw = await request.body()  # bounded (api/limits.py)
    name = f"{persona_id}.{fmt}"

    def parse() -> PersonaFile:
        return read_persona(persona_id, raw, source=name, fmt=fmt, limits=limits)

    try:
        loaded = await asyncio.to_thread(parse)
    except PersonaFileError as error:
        raise RequestValidationError(
            [
                {"loc": ("body",), "msg": f"{name}: {problem}", "type": "value_error"}
                for problem in error.problems
            ]
        ) from None
    source = PersonaSource(raw, fmt)
    kept = await stored(store.replace(loaded.persona, if_match=if_match, source=source))
    return send(response, base_url, kept)


@router.post("/upload", **CREATES)
@audited("persona.upload")
async def upload_persona(
    request: Request,
    response: Response,
    store: Store,
    auth: Auth,
    base_url: BaseUrl,
    limits: PersonaLimits,
    persona_data: PersonaData,
    assets: CharxAssets,
    file: Annotated[
        UploadFile,
        File(
            description="A persona file (.yaml, .yml, .json) or a character card "
            "(V2/V3, .json, .png or .charx)"
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
    A PNG card's picture becomes the persona's avatar; a CHARX's icon too, and its other
    assets are kept (served at ``/a2a/{id}/assets/{path}``): an upload replaces those the
    persona had."""
    loaded = await _read_upload(limits, file, persona_id)
    if not isinstance(loaded, PersonaFile):
        # Each problem names the uploaded file ("grace.yaml: ..."); the form field's name
        # ("file") in the location would only be shown before it ("file: grace.yaml: ...").
        raise RequestValidationError(
            [{"loc": ("body",), "msg": problem, "type": "value_error"} for problem in loaded]
        )
    persona = loaded.persona
    auth.authorize(request, Action.WRITE, persona.id)
    answer = await created(
        persona,
        store=store,
        persona_data=persona_data,
        response=response,
        base_url=base_url,
        collection=request.url.path.rsplit("/", 1)[0],
        image=loaded.image,
        source=loaded.source,
        replace=replace,
    )
    await assets.replace(persona.id, loaded.assets)
    return answer


@router.post("/validate", dependencies=[FileChecker], responses=error_responses(400))
async def validate_persona(
    request: Request,
    store: Store,
    auth: Auth,
    limits: PersonaLimits,
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
    loaded = await _read_upload(limits, file, persona_id)
    if not isinstance(loaded, PersonaFile):
        return {"valid": False, "problems": loaded}
    persona = loaded.persona
    return {
        "valid": True,
        "problems": [],
        "id": persona.id,
        "exists": (
            await exists(store, persona.id) if auth.visible(request, [persona.id]) else None
        ),
        "persona": {"id": persona.id, **persona_to_data(persona)},
    }


async def _read_upload(
    limits: Limits, file: UploadFile, persona_id: str | None
) -> PersonaFile | list[str]:
    """The persona in an uploaded file, or its problems (each a message naming the file):
    bounds, format and every field checked, as for a file in the persona directory."""
    name = PurePath(file.filename or "").name
    fmt = IMPORT_SUFFIXES.get(PurePath(name).suffix.lower())
    if fmt is None:
        expected = ", ".join(IMPORT_SUFFIXES)
        return [f"file name '{name}' must end with {expected}"]
    limit = limits.max_image_bytes if fmt in ("png", "charx") else limits.max_bytes
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
        **error_responses(404),
        200: {
            "description": "The card: JSON, a PNG image with the card in a text chunk, or a "
            "CHARX (a zip: card.json, a V3 card, and the avatar under assets/)",
            "content": {"application/json": {}, "image/png": {}, CHARX_TYPE: {}},
        },
    },
)
async def export_card(
    persona_id: str,
    store: Store,
    card_pngs: CardImages,
    assets: CharxAssets,
    spec: Annotated[CardSpec, Query(alias="format", description="Character card V2 or V3")] = "v3",
    container: Annotated[
        Literal["json", "png", "charx"],
        Query(
            alias="as",
            description="A JSON file, a PNG image with the card inside, or a CHARX (V3 only)",
        ),
    ] = "json",
) -> Response:
    """The persona as a Tavern character card. A persona imported from a card gives back
    that card (with any change made since); a PNG keeps the avatar's pixels, and a CHARX
    holds them as the card's ``main`` icon, with the assets kept from its import."""
    if container == "charx" and spec != "v3":
        problem = {"loc": ("query", "as"), "msg": _V3_ONLY, "type": "value_error"}
        raise RequestValidationError([problem])  # as FastAPI's own 422s: a list of errors
    persona = await store.get(persona_id)
    filename = f"{persona.id}.{container}"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    if container == "json":
        return JSONResponse(persona_to_card(persona, spec), headers=headers)
    image = await store.avatar(persona.id)
    if container == "charx":
        kept = await assets.of(persona.id)
        charx = await asyncio.to_thread(card_charx, persona, image, kept)
        return Response(charx, media_type=CHARX_TYPE, headers=headers)
    png = await card_pngs.get(persona, spec, image)  # kept; encoded in a worker thread
    return Response(png, media_type="image/png", headers=headers)
