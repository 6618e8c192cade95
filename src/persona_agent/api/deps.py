"""The REST API's dependencies: the parts its routes are given, who may call, and whose
data a call is about.

Each is an ``Annotated`` alias (or a ``Depends``) a route names, so routes stay thin: the
app's parts (:class:`ApiParts`), the checks of :class:`~persona_agent.api.rest_auth.ApiAuth`
(``Reader``, ``PersonaWriter``, ``MemoryReader`` ...), and whose memory or conversations a
request is about (:func:`owner_of`: the principal's own, or ``caller=`` for a principal
with ``memory:admin``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Query, Request, status

from persona_agent.a2a.registry import A2ARegistry
from persona_agent.api.caller_data import CallerData
from persona_agent.api.rest_auth import ApiAuth
from persona_agent.chat.engine import ChatEngine
from persona_agent.chat.usage_log import UsageLog
from persona_agent.conversations.conversation_store import ConversationStore
from persona_agent.conversations.user_persona import UserPersonas
from persona_agent.hub.persona_data import DeletedPersonaData
from persona_agent.hub.readiness import Readiness
from persona_agent.knowledge.library import Knowledge
from persona_agent.observe.metrics import HubMetrics
from persona_agent.personas.formats.card_pngs import CardPngs
from persona_agent.personas.stores.asset_store import PersonaAssets
from persona_agent.personas.stores.store import PersonaStore
from persona_agent.security.audit import AuditLog, request_id_of
from persona_agent.security.authorization import Action
from persona_agent.security.card_signing import CardSigner
from persona_agent.security.limits import Limits
from persona_agent.security.principal import Principal

__all__ = [
    "ApiParts",
    "Auth",
    "BaseUrl",
    "CallerQuery",
    "CallerStore",
    "CardImages",
    "Conversations",
    "Documents",
    "FileChecker",
    "HubReader",
    "MemoryReadOwner",
    "MemoryReader",
    "MemoryWriteOwner",
    "MemoryWriter",
    "Metrics",
    "PersonaData",
    "PersonaLimits",
    "PersonaReader",
    "PersonaWriter",
    "Reader",
    "Ready",
    "Registry",
    "Signer",
    "Store",
    "TurnStarter",
    "Usage",
    "UserPersonaStore",
    "Writer",
    "api_auth",
    "audit_memory",
    "caller_owner",
    "hub_parts",
    "owner_of",
    "principal_named",
]


@dataclass(frozen=True)
class ApiParts:
    """What the routes are given: the app holds them from the start (``HubApp``), and the
    dependencies below hand each route the ones it names."""

    auth: ApiAuth
    store: PersonaStore
    registry: A2ARegistry
    limits: Limits
    audit: AuditLog
    card_pngs: CardPngs
    persona_data: DeletedPersonaData
    persona_assets: PersonaAssets
    usage: UsageLog
    signer: CardSigner | None
    metrics: HubMetrics
    readiness: Readiness
    caller_data: CallerData
    knowledge: Knowledge
    user_personas: UserPersonas
    conversations: ConversationStore
    """The stored conversations' branches (issue 37), under the engine's locks."""
    engine: ChatEngine
    """The engine (the images a conversation keeps)."""


def hub_parts(request: Request) -> ApiParts:
    """The parts of the app that serves ``request``."""
    parts: ApiParts = request.app.parts
    return parts


def api_auth(request: Request) -> ApiAuth:
    return hub_parts(request).auth


async def require_read(request: Request) -> None:
    request.state.principal = await api_auth(request).check(request, write=False)


async def require_write(request: Request) -> None:
    request.state.principal = await api_auth(request).check(request, write=True)


async def require_file_check(request: Request) -> None:
    """A file checked and not stored (``/validate``): a read where callers authenticate,
    else (anyone may call) as a write, from this machine only, since reading a file or an
    image costs what an upload costs."""
    auth = api_auth(request)
    request.state.principal = await auth.check(request, write=not auth.enabled)


async def require_persona_read(request: Request, persona_id: str) -> None:
    """A read of the persona in the path: the caller may read it (else 401/403)."""
    await require_read(request)
    api_auth(request).authorize(request, Action.READ, persona_id)


async def require_persona_write(request: Request, persona_id: str) -> None:
    """A write of the persona in the path: the caller may write it (else 401/403)."""
    await require_write(request)
    api_auth(request).authorize(request, Action.WRITE, persona_id)


async def require_memory_read(request: Request) -> None:
    """A read of a caller's memories (``memory:read``; whose: the route decides)."""
    request.state.principal = await api_auth(request).check(
        request, write=False, action=Action.MEMORY_READ
    )


async def require_memory_write(request: Request) -> None:
    """A change of a caller's memories (``memory:write``), held to the keyless write rules."""
    request.state.principal = await api_auth(request).check(
        request, write=True, action=Action.MEMORY_WRITE
    )


async def require_write_origin(request: Request) -> None:
    """A turn the REST API starts (regenerate, continue): where the write comes from; who
    calls and whether it may is the A2A admission's (a call on the persona)."""
    api_auth(request).check_write_origin(request)


async def require_hub_read(request: Request) -> None:
    """A read of what is about every persona (``/metrics``)."""
    await require_read(request)
    api_auth(request).authorize(request, Action.HUB_READ)


async def _parts(request: Request) -> ApiParts:
    return hub_parts(request)


async def _auth(request: Request) -> ApiAuth:
    return api_auth(request)


# The dependencies are coroutines, trivial as they are: FastAPI runs a plain function
# dependency in AnyIO's worker threads (a thread hop each, and up to 40 threads, each with
# its allocator's arena, under concurrent REST calls).
Parts = Annotated[ApiParts, Depends(_parts)]


async def _store(parts: Parts) -> PersonaStore:
    return parts.store


async def _base_url(parts: Parts) -> str:
    return parts.registry.base_url


async def _registry(parts: Parts) -> A2ARegistry:
    return parts.registry


async def _limits(parts: Parts) -> Limits:
    return parts.limits


async def _card_pngs(parts: Parts) -> CardPngs:
    return parts.card_pngs


async def _persona_data(parts: Parts) -> DeletedPersonaData:
    return parts.persona_data


async def _usage(parts: Parts) -> UsageLog:
    return parts.usage


async def _signer(parts: Parts) -> CardSigner | None:
    return parts.signer


async def _metrics(parts: Parts) -> HubMetrics:
    return parts.metrics


async def _readiness(parts: Parts) -> Readiness:
    return parts.readiness


async def _caller_data(parts: Parts) -> CallerData:
    return parts.caller_data


async def _knowledge(parts: Parts) -> Knowledge:
    return parts.knowledge


async def _user_personas(parts: Parts) -> UserPersonas:
    return parts.user_personas


async def _persona_assets(parts: Parts) -> PersonaAssets:
    return parts.persona_assets


Store = Annotated[PersonaStore, Depends(_store)]
Auth = Annotated[ApiAuth, Depends(_auth)]
BaseUrl = Annotated[str, Depends(_base_url)]
"""The hub's base URL (links to a persona's A2A endpoint and card)."""
Registry = Annotated[A2ARegistry, Depends(_registry)]
PersonaLimits = Annotated[Limits, Depends(_limits)]
CardImages = Annotated[CardPngs, Depends(_card_pngs)]
"""Exported PNG cards, kept."""
PersonaData = Annotated[DeletedPersonaData, Depends(_persona_data)]
"""What goes with a deleted persona (a new one with its id waits until it is gone)."""
CharxAssets = Annotated[PersonaAssets, Depends(_persona_assets)]
"""The assets of the CHARX each persona came in."""
Usage = Annotated[UsageLog, Depends(_usage)]
Signer = Annotated[CardSigner | None, Depends(_signer)]
"""The agent cards' signer (``None``: cards are not signed)."""
Metrics = Annotated[HubMetrics, Depends(_metrics)]
Ready = Annotated[Readiness, Depends(_readiness)]
CallerStore = Annotated[CallerData, Depends(_caller_data)]
"""What the hub keeps of each identified caller: memories, conversations, tasks."""
Documents = Annotated[Knowledge, Depends(_knowledge)]
"""The personas' knowledge documents."""


async def _conversations(request: Request) -> ConversationStore:
    return hub_parts(request).conversations


Conversations = Annotated[ConversationStore, Depends(_conversations)]
"""The stored conversations callers steer (docs/conversations.md)."""
UserPersonaStore = Annotated[UserPersonas, Depends(_user_personas)]
"""Who users say they are: callers' saved user personas and conversations'."""
Reader = Depends(require_read)
Writer = Depends(require_write)
PersonaReader = Depends(require_persona_read)
"""Routes on one persona (``{persona_id}`` in the path) that read it."""
PersonaWriter = Depends(require_persona_write)
"""Routes on one persona (``{persona_id}`` in the path) that change it."""
HubReader = Depends(require_hub_read)
FileChecker = Depends(require_file_check)
MemoryReader = Depends(require_memory_read)
"""Routes that read a caller's memories."""
MemoryWriter = Depends(require_memory_write)
"""Routes that change or delete a caller's memories."""
TurnStarter = Depends(require_write_origin)
"""Routes that start a turn of a persona (an A2A call, admitted as one)."""


# -- whose data: a caller's memory, conversations, documents and user persona ----------

CallerQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=200,
        description="whose memory (a principal: key:{name}, oidc:{sub}); default: the "
        "caller's own. Naming another needs the scope memory:admin",
    ),
]


def principal_named(
    request: Request, action: Action, persona_id: str | None, caller: str | None
) -> str | None:
    """Whom the request is about: ``caller``, which the principal may name (else 403), the
    principal's own name, or ``None`` on a hub that identifies nobody."""
    principal: Principal | None = api_auth(request).authorize(
        request, action, persona_id, caller=caller
    )
    if caller is not None:
        return caller
    return principal.name if principal is not None else None


def caller_owner(
    request: Request, action: Action, persona_id: str | None, caller: str | None
) -> str:
    """Whose memory the request is about: ``caller``, which the principal may name (else
    403), or the principal's own."""
    owner = principal_named(request, action, persona_id, caller)
    if owner is None:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            "This hub identifies no callers (no API keys or OIDC issuer): name whose memory "
            "with ?caller=key:{name} or ?caller=oidc:{sub}. An anonymous caller's memory "
            "lasts one conversation and is not managed here",
        )
    return owner


def owner_of(action: Action, *, anonymous: bool) -> Callable[..., Awaitable[str]]:
    """A dependency: whose data (memory, conversations) a request about the path's
    ``persona_id`` is, checked first (403), then the persona (404). ``anonymous``: on a hub
    that identifies nobody, the anonymous caller's ("", as its conversations are keyed),
    else :func:`caller_owner`'s 400."""

    async def owner(
        request: Request, persona_id: str, store: Store, caller: CallerQuery = None
    ) -> str:
        if anonymous:
            named = principal_named(request, action, persona_id, caller) or ""
        else:
            named = caller_owner(request, action, persona_id, caller)
        await store.get(persona_id)
        return named

    return owner


MemoryReadOwner = Annotated[str, Depends(owner_of(Action.MEMORY_READ, anonymous=False))]
"""Whose memory a read is about, the persona known (path ``persona_id``, query ``caller``)."""
MemoryWriteOwner = Annotated[str, Depends(owner_of(Action.MEMORY_WRITE, anonymous=False))]
"""Whose memory a change is about, the persona known."""


def audit_memory(request: Request, action: str, persona: str | None, **details: Any) -> None:
    """A change (or export) of a caller's data, in the audit log: ``action``, the request's
    principal and ``details``."""
    principal: Principal | None = getattr(request.state, "principal", None)
    hub_parts(request).audit.record(
        action,
        principal=principal.name if principal is not None else None,
        persona=persona,
        request_id=request_id_of(dict(request.headers)),
        **details,
    )
