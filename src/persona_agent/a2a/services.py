"""What serves every persona besides its own SDK handler: who may call and what they may
do, what is recorded, and the parts the whole hub shares (pictures, push notifications,
card signatures). Built once in ``create_app``; the registry hands it to the router and to
each persona's app."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from a2a.server.cluster import TaskEventStream
from a2a.types.a2a_pb2 import AgentProvider

from persona_agent.a2a.input import MAX_MESSAGE_PARTS, PartLimits
from persona_agent.a2a.tasks.image_parts import NO_INTAKE, ImageIntake
from persona_agent.a2a.tasks.push import PushParts
from persona_agent.chat.budget import BudgetLimits
from persona_agent.knowledge.sent_documents import DocumentBudget
from persona_agent.media.vision import Vision
from persona_agent.observe.metrics import NO_METRICS, HubMetrics
from persona_agent.personas.formats.charx import CharxAsset
from persona_agent.personas.formats.png import CleanImage
from persona_agent.security.audit import AuditLog
from persona_agent.security.authentication import Authenticator
from persona_agent.security.authorization import Authorization
from persona_agent.security.card_signing import CardSigner
from persona_agent.security.quotas import Quotas
from persona_agent.speech import NO_SPEECH, Speech

__all__ = ["Assets", "Avatars", "HubServices"]

Avatars = Callable[[str], Awaitable[CleanImage | None]]
"""A persona's avatar image by persona id (``None``: it has none)."""
Assets = Callable[[str, str], Awaitable[CharxAsset | None]]
"""A persona's CHARX asset by persona id and path (``None``: it has none there)."""


@dataclass(frozen=True, slots=True)
class HubServices:
    """Each part is optional: none of them is a hub that serves everyone, as it ships.
    The limits, the audit log and the metrics are always there: by default, ones that
    do nothing (no limit, no log, nothing counted)."""

    authenticator: Authenticator | None = None
    """Who calls; with no keys and no issuer, everyone is anonymous."""
    quotas: Quotas = field(default_factory=Quotas)
    """Per-caller limits (by default none: running tasks are counted, nothing refused)."""
    audit: AuditLog = field(default_factory=AuditLog)
    """Where writes, tasks and refusals are recorded (by default nowhere)."""
    signer: CardSigner | None = None
    """Signs every persona's card."""
    push: PushParts | None = None
    """Push notifications: declared on cards and served by every persona's handler."""
    avatars: Avatars | None = None
    """Where ``{id}/avatar`` finds its image (the persona store)."""
    assets: Assets | None = None
    """Where ``{id}/assets/{path}`` finds a CHARX asset (the persona assets' store)."""
    stream_idle_seconds: float = 0
    """A stream with nothing to say this long is ended (0: never)."""
    event_stream: TaskEventStream | None = None
    """Replicas: the events of tasks running on other replicas (the SDK's cluster mode)."""
    log_fields: bool = False
    """JSON logs: each A2A request's log lines carry its request id and persona."""
    metrics: HubMetrics = NO_METRICS
    """What the A2A side counts for ``/metrics`` (requests, refusals, streams, tasks;
    by default nothing)."""
    provider: AgentProvider | None = None
    """Who runs the hub, on every card (None: "persona-agent" at the hub's URL)."""
    budget: BudgetLimits = field(default_factory=BudgetLimits)
    """Calls one request may make, its whole tree together (none: no limit)."""
    vision: Vision = field(default_factory=Vision)
    """Which personas see images (by default none: image parts are refused)."""
    images: ImageIntake = NO_INTAKE
    """How image parts are read: fetched by URL, prepared."""
    max_message_parts: int = MAX_MESSAGE_PARTS
    """The most parts a sent message may have."""
    documents: DocumentBudget = field(default_factory=DocumentBudget)
    """The tokens a message's documents may show the model, and what reading one may cost."""
    speech: Speech = NO_SPEECH
    """Spoken answers for clients that accept audio (by default none: docs/media.md#voice)."""

    @property
    def parts(self) -> PartLimits:
        """What a sent message may hold: its parts, its images and their bytes."""
        return PartLimits(self.max_message_parts, self.images.limits)

    @property
    def auth(self) -> Authenticator | None:
        """The authenticator, if anyone can authenticate at all."""
        auth = self.authenticator
        return auth if auth is not None and auth.enabled else None

    @property
    def authorization(self) -> Authorization:
        """Who may do what (everyone everything, when nobody can authenticate)."""
        auth = self.authenticator
        return auth.authorization if auth is not None else _OPEN


_OPEN = Authorization()
