"""A persona as the REST API shows and takes it: its resource, its ETag, its validation,
its creation, and the audit of each change."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, cast

from fastapi import APIRouter, HTTPException, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from persona_agent.a2a.cards import CARD_PATH, persona_url
from persona_agent.api.deps import Writer, hub_parts
from persona_agent.api.routes.error_body import error_responses
from persona_agent.errors import PersonaAgentError, PersonaFileError, PersonaNotFoundError
from persona_agent.hub.persona_data import DeletedPersonaData
from persona_agent.personas.formats.png import CleanImage
from persona_agent.personas.loader import MAX_PROBLEMS, PersonaSource
from persona_agent.personas.model import Persona
from persona_agent.personas.stores.store import PersonaStore
from persona_agent.security.audit import request_id_of
from persona_agent.security.limits import Limits

__all__ = [
    "CREATES",
    "PERSONA_EXAMPLE",
    "audited",
    "created",
    "etag",
    "exists",
    "persona_router",
    "resource",
    "send",
    "stored",
    "validated",
]

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

CREATES: dict[str, Any] = {
    "status_code": status.HTTP_201_CREATED,
    "dependencies": [Writer],
    "responses": error_responses(400, 409),
}
"""The route arguments of a ``POST`` that creates a persona (from a body or a file)."""


def persona_router() -> APIRouter:
    """A router of ``/personas`` routes (its includer puts them under ``/api/v1``)."""
    return APIRouter(prefix="/personas", tags=["personas"], responses=error_responses(401, 403))


def resource(base_url: str, persona: Persona) -> dict[str, Any]:
    """The persona as the API shows it: its fields and links to its A2A endpoint and card."""
    url = persona_url(base_url, persona.id)
    data = persona.model_dump(mode="json")
    data["links"] = {"a2a": url, "card": url.rstrip("/") + CARD_PATH}
    return data


def etag(persona: Persona) -> str:
    return f'"{persona.version}"'


def send(response: Response, base_url: str, persona: Persona) -> dict[str, Any]:
    """The persona's resource, with its ``ETag`` on ``response``."""
    response.headers["ETag"] = etag(persona)
    return resource(base_url, persona)


def validated(limits: Limits, persona_id: str, data: dict[str, Any]) -> Persona:
    """The persona, within the hub's limits, or a 422 whose errors name each bad field."""
    try:
        return Persona.from_data(persona_id, data, limits=limits)
    except ValidationError as error:
        details = error.errors(include_url=False, include_input=False)  # not echoed back
        shown: list[Any] = [{**e, "loc": ("body", *e["loc"])} for e in details[:MAX_PROBLEMS]]
        if len(details) > MAX_PROBLEMS:  # a body of many unknown fields: a short answer
            more = f"and {len(details) - MAX_PROBLEMS} more problems"
            shown.append({"loc": ("body",), "msg": more, "type": "too_many_errors"})
        raise RequestValidationError(shown) from None


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
                principal = getattr(request.state, "principal", None)
                hub_parts(request).audit.record(
                    action,
                    principal=principal.name if principal is not None else None,
                    persona=persona_id,
                    outcome=outcome,
                    request_id=request_id_of(dict(request.headers)),
                )

        return cast(_Route, run)

    return decorate


async def exists(store: PersonaStore, persona_id: str) -> bool:
    try:
        await store.get(persona_id)
    except PersonaNotFoundError:
        return False
    return True


async def stored(change: Awaitable[Persona]) -> Persona:
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


async def created(
    persona: Persona,
    *,
    store: PersonaStore,
    persona_data: DeletedPersonaData,
    response: Response,
    base_url: str,
    collection: str,
    image: CleanImage | None = None,
    source: PersonaSource | None = None,
    replace: bool = False,
) -> dict[str, Any]:
    """Store a new persona (with ``replace``, in place of any of its id; ``source``: the
    file it was read from, kept as it is) once what a
    deleted persona of its id left is gone: its resource, with its ``ETag`` and its
    ``Location`` (``collection``/id) on ``response``, whose status is 200 for a persona
    replaced."""
    await persona_data.settled(persona.id)
    if replace:
        existed = await exists(store, persona.id)
        kept = await stored(store.put(persona, image=image, source=source))
        if existed:
            response.status_code = status.HTTP_200_OK
    else:
        kept = await stored(store.create(persona, image=image, source=source))
    response.headers["Location"] = f"{collection}/{kept.id}"
    return send(response, base_url, kept)
