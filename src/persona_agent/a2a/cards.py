"""Agent cards built from personas, and the hub's own card."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    OpenIdConnectSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol

from persona_agent import __version__
from persona_agent.a2a.extensions import (
    conversation_extension,
    cost_extension,
    greeting_extension,
    user_extension,
)
from persona_agent.a2a.input import DOCUMENT_FILE_TYPES, READABLE_FILE_TYPES
from persona_agent.media.images import IMAGE_TYPES
from persona_agent.personas.model import Persona
from persona_agent.personas.panel_listing import card_description, card_tags
from persona_agent.personas.prompt import apply_macros, render_greeting
from persona_agent.security.authentication import Authenticator
from persona_agent.security.principal import SCOPE_A2A, Access

__all__ = [
    "A2A_PREFIX",
    "AVATAR_PATH",
    "CARD_PATH",
    "DIRECTORY_SKILL_ID",
    "DIRECTORY_TENANT",
    "INPUT_MODES",
    "OUTPUT_MODES",
    "SPOKEN_OUTPUT_MODES",
    "build_agent_card",
    "build_extended_card",
    "build_hub_card",
    "hub_url",
    "persona_url",
    "provider",
]

A2A_PREFIX = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"
AVATAR_PATH = "/avatar"
"""Below a persona's endpoint: its avatar image, when it has one."""
ASSETS_PATH = "/assets"
"""Below a persona's endpoint: the assets of the CHARX it came in, each at its path."""
INPUT_MODES = [*READABLE_FILE_TYPES, *DOCUMENT_FILE_TYPES]
OUTPUT_MODES = ["text/plain", "application/json"]
SPOKEN_OUTPUT_MODES = [*OUTPUT_MODES, "audio/wav"]
"""A persona that speaks (docs/media.md#voice): its answer as WAV files too."""


def provider(organization: str, url: str) -> AgentProvider:
    """Who runs the hub, as every card says (``PERSONA_AGENT_PROVIDER_ORGANIZATION`` and
    ``PERSONA_AGENT_PROVIDER_URL``; by default "persona-agent" at the hub's own URL)."""
    return AgentProvider(organization=organization, url=url)


def persona_url(base_url: str, persona_id: str) -> str:
    """The persona's endpoint: JSON-RPC is served at this URL, HTTP+JSON below it."""
    return f"{base_url}{A2A_PREFIX}/{persona_id}/"


def _interfaces(url: str, tenant: str, grpc_address: str | None = None) -> list[AgentInterface]:
    """The card's interfaces at ``url``, and at ``grpc_address`` for ``tenant``."""
    rest_url = url.rstrip("/")
    interfaces = [
        AgentInterface(
            url=url if binding == TransportProtocol.JSONRPC else rest_url,
            protocol_binding=binding,
            protocol_version=version,
        )
        for binding, version in (
            (TransportProtocol.JSONRPC, PROTOCOL_VERSION_1_0),
            (TransportProtocol.HTTP_JSON, PROTOCOL_VERSION_1_0),
            (TransportProtocol.JSONRPC, PROTOCOL_VERSION_0_3),
            (TransportProtocol.HTTP_JSON, PROTOCOL_VERSION_0_3),
        )
    ]
    if grpc_address is not None:  # after the HTTP ones: clients taking the first keep JSON-RPC
        interfaces.insert(
            2,
            AgentInterface(
                url=grpc_address,
                protocol_binding=TransportProtocol.GRPC,
                protocol_version=PROTOCOL_VERSION_1_0,
                tenant=tenant,
            ),
        )
    return interfaces


def _collaboration(persona: Persona) -> str:
    """Whom the persona works with, for orchestrators reading its card."""
    said = ""
    if persona.consult == "*":
        said += " It may consult every other persona of this hub."
    elif persona.consult:
        said += " It may consult these personas of this hub: " + ", ".join(persona.consult) + "."
    if persona.agents:
        said += " It may call these agents outside the hub: " + ", ".join(persona.agents) + "."
    return said


def _collaboration_tags(persona: Persona) -> list[str]:
    consults = ["*"] if persona.consult == "*" else persona.consult
    return [f"consults:{i}" for i in consults] + [f"calls-agent:{a}" for a in persona.agents]


def _skills(
    persona: Persona, member_names: Mapping[str, str], output_modes: list[str]
) -> list[AgentSkill]:
    """A persona's skills: its conversation, one per knowledge domain, and its card's own."""
    skills = [
        AgentSkill(
            id=f"{persona.id}-conversation",
            name=f"Conversation with {persona.name}",
            description=persona.description
            + _collaboration(persona)
            + card_description(persona, member_names),
            tags=[
                "conversation",
                "persona",
                *persona.knowledge_domains,
                *persona.tags,
                *_collaboration_tags(persona),
                *card_tags(persona),
            ],
            examples=list(persona.card.examples),
            input_modes=INPUT_MODES,
            output_modes=output_modes,
        )
    ]
    for domain, topics in persona.knowledge_domains.items():
        skills.append(
            AgentSkill(
                id=f"{persona.id}-{persona.domain_slug(domain)}",
                name=domain,
                description=f"{persona.name} on {domain}: " + ", ".join(topics),
                tags=[domain, *topics],
                input_modes=INPUT_MODES,
                output_modes=output_modes,
            )
        )
    for extra in persona.card.skills:
        skills.append(
            AgentSkill(
                id=extra.id,
                name=extra.name,
                description=extra.description,
                tags=list(extra.tags),
                examples=list(extra.examples),
                input_modes=INPUT_MODES,
                output_modes=output_modes,
            )
        )
    return skills


def _extensions(persona: Persona) -> list[AgentExtension]:
    """The card's extensions: cost, user and conversation always, the greeting when the
    persona has one (its ``{{user}}`` as "User": the card is not any one caller's)."""
    extensions = [cost_extension(), user_extension(), conversation_extension()]
    greeting = render_greeting(persona)
    if greeting is not None:
        name = persona.name.strip()
        alternates = [apply_macros(text, name) for text in persona.alternate_greetings]
        extensions.append(greeting_extension(greeting, alternates))
    return extensions


def build_agent_card(
    persona: Persona,
    base_url: str,
    auth: Authenticator | None = None,
    *,
    push: bool = False,
    provided_by: AgentProvider | None = None,
    member_names: Mapping[str, str] | None = None,
    images: bool = False,
    speaks: bool = False,
    grpc_address: str | None = None,
) -> AgentCard:
    """The persona's card: a ``conversation`` skill plus one skill per knowledge domain.

    Skill ids are stable (``{id}-conversation``, ``{id}-{domain slug}``), and the
    interface URLs are built from ``base_url`` (the public base URL when set). With
    ``auth``, the card declares how to authenticate, whether the persona requires it, and
    the extended card that authenticated callers get. ``provided_by``: the card's
    provider (default: "persona-agent" at ``base_url``). A panel's conversation skill
    says its mode and lists its members (``member_names``: id → name) and tags them.
    ``images``: the persona's model sees images: its input modes (and its skills') add
    :data:`~persona_agent.media.images.IMAGE_TYPES`.
    ``speaks``: the persona's answers can be spoken (its output modes add ``audio/wav``).
    ``grpc_address``: the hub's gRPC server (``host:port``), listed after the HTTP
    interfaces with the persona's id as its ``tenant`` (None: no gRPC interface).
    """
    url = persona_url(base_url, persona.id)
    output_modes = SPOKEN_OUTPUT_MODES if speaks else OUTPUT_MODES
    card = AgentCard(
        name=persona.name,
        description=persona.description,
        version=persona.version or __version__,
        provider=provided_by or provider("persona-agent", base_url),
        supported_interfaces=_interfaces(url, persona.id, grpc_address),
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=push,
            extended_agent_card=False,
            extensions=_extensions(persona),
        ),
        default_input_modes=INPUT_MODES,
        default_output_modes=output_modes,
        skills=_skills(persona, member_names or {}, output_modes),
    )
    if images:
        card.default_input_modes.extend(IMAGE_TYPES)
        for skill in card.skills:
            skill.input_modes.extend(IMAGE_TYPES)
    if persona.avatar is not None:  # an empty iconUrl would still be written out
        card.icon_url = url.rstrip("/") + AVATAR_PATH
    if auth is not None and auth.enabled:
        _declare_security(card, auth, persona.access or auth.default_access)
    return card


def build_extended_card(card: AgentCard, tools: list[dict[str, Any]]) -> AgentCard:
    """What authenticated callers get (``GetExtendedAgentCard``): the public card plus a
    skill for each MCP tool the persona may call, which the public card leaves out."""
    extended = AgentCard()
    extended.CopyFrom(card)
    persona_id = card.skills[0].id.removesuffix("-conversation") if card.skills else "persona"
    for spec in tools:
        function = spec.get("function", {})
        name = str(function.get("name", ""))
        if not name:
            continue
        extended.skills.append(
            AgentSkill(
                id=f"{persona_id}-tool-{name}",
                name=f"Tool {name}",
                description=str(function.get("description") or f"The MCP tool {name}"),
                tags=["tool", name.partition("__")[0]],
                input_modes=list(card.default_input_modes),
                output_modes=OUTPUT_MODES,
            )
        )
    return extended


def _declare_security(card: AgentCard, auth: Authenticator, access: Access) -> None:
    """The schemes a caller may use; required ones when the persona is not public."""
    schemes: list[str] = []
    if len(auth.keys):
        card.security_schemes["apiKey"].CopyFrom(
            SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(
                    location="header", name="X-API-Key", description="An API key of the hub"
                )
            )
        )
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="An API key, or an OpenID Connect token"
                )
            )
        )
        schemes += ["apiKey", "bearer"]
    if auth.oidc is not None:
        card.security_schemes["oidc"].CopyFrom(
            SecurityScheme(
                open_id_connect_security_scheme=OpenIdConnectSecurityScheme(
                    open_id_connect_url=auth.oidc.discovery_url,
                    description=f"A token of {auth.oidc.issuer} with the scope '{SCOPE_A2A}'",
                )
            )
        )
        schemes.append("oidc")
    card.capabilities.extended_agent_card = True
    if access == "authenticated":
        for name in schemes:
            scopes = [SCOPE_A2A] if name == "oidc" else []
            card.security_requirements.append(
                SecurityRequirement(schemes={name: StringList(list=scopes)})
            )


DIRECTORY_SKILL_ID = "directory"
"""The one skill of the hub's own agent, the directory of its personas."""
DIRECTORY_TENANT = "_directory"
"""The ``tenant`` of the directory on the hub's gRPC server (on the hub card's gRPC
interface): no persona id can be it (an id starts with a letter or digit). An empty
tenant is refused, naming it, so a client that ignored a persona's card is not answered
by the directory as if it were the persona."""
NAMED_PERSONAS = 50
"""Personas named in the directory skill's description; the others are counted."""
NAMED_EXAMPLES = 3
"""Personas named in the directory skill's examples."""


def hub_url(base_url: str) -> str:
    """The hub's own agent (its persona directory): JSON-RPC here, HTTP+JSON below it."""
    return f"{base_url}{A2A_PREFIX}/"


def build_hub_card(
    personas: list[Persona],
    base_url: str,
    provided_by: AgentProvider | None = None,
    *,
    auth: Authenticator | None = None,
    grpc_address: str | None = None,
) -> AgentCard:
    """The hub's own card: a small agent, the directory of the personas it serves.

    It answers any message with the personas (id, name, description, card URL;
    :mod:`persona_agent.a2a.discovery.directory`), at ``{base}/a2a/`` on the same bindings and
    protocol versions as a persona. Its one skill, ``directory``, names the personas. With
    ``auth``, it declares the hub's schemes and, under the hub's default access
    ``authenticated``, requires them, as for a persona without ``access:`` of its own.
    ``grpc_address``: the hub's gRPC server, where the directory is the tenant
    :data:`DIRECTORY_TENANT`.
    """
    names = [f"{persona.name} ({persona.id})" for persona in personas[:NAMED_PERSONAS]]
    more = len(personas) - len(names)
    listing = f"{base_url}{A2A_PREFIX}/personas"
    if not personas:
        served = "It serves no personas yet."
    else:
        served = "It serves: " + "; ".join(names) + (f"; and {more} more." if more else ".")
    examples = ["Which personas are here?"] + [
        f"Where do I talk to {persona.name}?" for persona in personas[:NAMED_EXAMPLES]
    ]
    card = AgentCard(
        name="persona-agent hub",
        description=(
            "A hub of AI personas, each an independent A2A agent with a card of its own at "
            f"{base_url}{A2A_PREFIX}/{{persona_id}}{CARD_PATH}. This agent is the hub's "
            "directory: send it any message and it answers with the personas and their card "
            f"URLs (also listed at {listing})."
        ),
        version=__version__,
        provider=provided_by or provider("persona-agent", base_url),
        supported_interfaces=_interfaces(hub_url(base_url), DIRECTORY_TENANT, grpc_address),
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=INPUT_MODES,
        default_output_modes=OUTPUT_MODES,
        skills=[
            AgentSkill(
                id=DIRECTORY_SKILL_ID,
                name="Persona directory",
                description=(
                    "Names the personas of this hub, each with its id, description and the "
                    f"URL of its agent card, to talk with it there. {served}"
                ),
                tags=["directory", "personas"],
                examples=examples,
                input_modes=INPUT_MODES,
                output_modes=OUTPUT_MODES,
            )
        ],
    )
    if auth is not None and auth.enabled:
        _declare_security(card, auth, auth.default_access)
        card.capabilities.extended_agent_card = False  # the directory has no other card
    return card
