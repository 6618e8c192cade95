"""Where an outside agent may be called, and where its credential may go.

The agents file names the hosts the operator chose: an agent's ``card_url`` (its host, any
port: a card names its gRPC port beside its HTTP one), a catalog's ``url`` (its host and
port: the catalog speaks for others), an OAuth 2 ``token_url``. Those are called as written.
What a card or a catalog names beyond them (an entry's card elsewhere, a card's interfaces
on another host) is judged by the push URL guard, public addresses only unless
``PERSONA_AGENT_AGENT_URL_ALLOWED_HOSTS`` lists the host, and called on the address judged
(:mod:`persona_agent.security.egress.outbound`). Of a card's interfaces, the preferred one the guard
accepts is called. The credential goes only to the hosts it was configured for (and to the
``hosts`` its ``auth`` adds): an interface elsewhere is called without it.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

import grpc
import grpc.aio
from a2a.types.a2a_pb2 import AgentCard, AgentInterface

from persona_agent.collab.agents_file import BINDING_NAMES, AgentAuth, AgentConfig, CatalogConfig
from persona_agent.security.egress.outbound import Dial, UrlRefused, dial
from persona_agent.security.egress.push_urls import PushUrlGuard, destination

__all__ = ["AgentReach", "Chosen", "grpc_channel", "http_url"]

_GRPC_SCHEMES = ("dns:///", "grpc://", "grpcs://")


def http_url(url: str, *, secure: bool) -> str:
    """An interface's URL as the guard reads it: a gRPC target (``host:port``,
    ``grpc://host:port``, ``dns:///host:port``) as ``http(s)://host:port``."""
    for scheme in _GRPC_SCHEMES:
        if url.startswith(scheme):
            url = url.removeprefix(scheme)
            break
    else:
        if "://" in url:
            return url
    return f"{'https' if secure else 'http'}://{url}"


def _host(url: str) -> str:
    return (urllib.parse.urlsplit(url).hostname or "").lower()


def _host_port(url: str) -> str:
    parsed = urllib.parse.urlsplit(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{(parsed.hostname or '').lower()}:{port}"


def _token_hosts(auth: AgentAuth | None) -> set[str]:
    if auth is None or auth.oauth2 is None:
        return set()
    return {_host_port(auth.oauth2.token_url)}


@dataclass(frozen=True, slots=True)
class Chosen:
    """The interface a client is made for, and where to connect for it."""

    interface: AgentInterface
    dial: Dial
    credited: bool
    """Whether the credential may go to it."""


@dataclass(frozen=True, slots=True)
class AgentReach:
    """The hosts of one agent that are called as written (``trusted``), those its
    credential may go to (``credited``), and the operator's allow-list (``allowed``):
    each ``host`` (any port) or ``host:port``."""

    trusted: frozenset[str]
    credited: frozenset[str]
    allowed: tuple[str, ...] = ()

    @classmethod
    def of_agent(cls, config: AgentConfig, allowed: Iterable[str] = ()) -> AgentReach:
        """An agent the file names: its ``card_url``'s host."""
        host = _host(config.card_url)
        extra = config.auth.hosts if config.auth is not None else []
        return cls(
            frozenset({host, *_token_hosts(config.auth)}),
            frozenset({host, *extra}),
            tuple(allowed),
        )

    @classmethod
    def of_catalog(cls, catalog: CatalogConfig, allowed: Iterable[str] = ()) -> AgentReach:
        """An agent a catalog lists: the catalog's host and port."""
        origin = _host_port(catalog.url)
        extra = catalog.auth.hosts if catalog.auth is not None else []
        return cls(
            frozenset({origin, *_token_hosts(catalog.auth)}),
            frozenset({origin, *extra}),
            tuple(allowed),
        )

    def guard(self) -> PushUrlGuard:
        return PushUrlGuard([*self.allowed, *self.trusted], what="Agent URL")

    def credits(self, url: str) -> bool:
        """Whether the credential may go to ``url`` (an http(s) URL)."""
        parsed = urllib.parse.urlsplit(url)
        host = (parsed.hostname or "").lower()
        return host in self.credited or _host_port(url) in self.credited

    async def choose(self, card: AgentCard, bindings: list[str] | None, *, secure: bool) -> Chosen:
        """The interface of ``card`` to call: of the bindings in ``bindings``' order (else
        the card's), the best protocol version first, the first the guard accepts.

        Raises:
            UrlRefused: the card offers no binding the hub speaks, or the guard refuses
                every interface that has one (the message names them).
        """
        guard = self.guard()
        refused: list[str] = []
        for interface in _candidates(card, bindings):
            url = http_url(interface.url, secure=secure)
            if destination(url) in refused:  # judged already (another version, binding)
                continue
            try:
                target = await dial(guard, url)
            except UrlRefused:
                refused.append(destination(url))
                continue
            return Chosen(interface, target, self.credits(url))
        if not refused:
            raise UrlRefused("its card offers no binding the hub speaks")
        raise UrlRefused(
            f"its card's interfaces are refused: {', '.join(refused)} "
            "(not public addresses; PERSONA_AGENT_AGENT_URL_ALLOWED_HOSTS allows others)"
        )


def _candidates(card: AgentCard, bindings: list[str] | None) -> list[AgentInterface]:
    """The card's interfaces of the bindings the hub speaks, in the order they are tried."""
    spoken = list(BINDING_NAMES.values())
    listed = [i.protocol_binding for i in card.supported_interfaces]
    order = bindings or list(dict.fromkeys(b for b in listed if b in spoken))
    found: list[AgentInterface] = []
    for binding in order:
        of_binding = [i for i in card.supported_interfaces if i.protocol_binding == binding]
        found.extend(sorted(of_binding, key=_version_rank))
    return found


def _version_rank(interface: AgentInterface) -> int:
    """As the SDK prefers: 1.0, then a later version, then 0.3 or later, then none."""
    match = re.match(r"(\d+)\.(\d+)", interface.protocol_version)
    if match is None:
        return 3
    version = (int(match[1]), int(match[2]))
    if version == (1, 0):
        return 0
    return 1 if version > (1, 0) else 2 if version >= (0, 3) else 4


def grpc_channel(target: Dial, address: str, *, secure: bool) -> grpc.aio.Channel:
    """A channel to a gRPC interface: to the address judged (its name kept as the
    authority, and as the name TLS checks), or to ``address`` as written for a host called
    by its name."""
    if target.address is None:
        if secure:
            return grpc.aio.secure_channel(address, grpc.ssl_channel_credentials())
        return grpc.aio.insecure_channel(address)
    literal = f"[{target.address}]" if ":" in target.address else target.address
    authority = f"{target.host}:{target.port}"
    options = [("grpc.default_authority", authority)]
    if secure:
        options.append(("grpc.ssl_target_name_override", target.host))
        credentials = grpc.ssl_channel_credentials()
        return grpc.aio.secure_channel(f"{literal}:{target.port}", credentials, options=options)
    return grpc.aio.insecure_channel(f"{literal}:{target.port}", options=options)
