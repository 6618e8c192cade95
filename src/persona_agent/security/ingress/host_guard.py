"""The hub's outer edge: which ``Host`` a request may name, which ``Origin`` may change
state. One ASGI layer in front of everything the hub serves (A2A, REST, console, cards,
metrics), so that no route can be added without it.

**Host.** A hub that listens on loopback without credentials (no API keys, no OIDC issuer)
trusts whoever can reach it, which should be this machine alone. A web page in a local
browser can reach it too, through DNS rebinding: its own name made to resolve to
``127.0.0.1``, the page then talks to the hub as its own origin and reads the answers. The
browser sends the page's name in ``Host``, so such a hub answers only requests for a
loopback host (``127.0.0.0/8``, ``[::1]``, ``localhost`` and ``*.localhost``, any port)
or a name it is told about (:attr:`allowed hosts <HostGuard>`: the host of the public base
URL and ``PERSONA_AGENT_ALLOWED_HOSTS``); others get 403. ``/healthz`` and ``/readyz``
answer any ``Host``: probes may name the machine as they like, and these answers carry
no persona, conversation or answer and start nothing a caller chooses.

**Origin.** A request that may change state (``POST``, ``PUT``, ``PATCH``, ``DELETE``)
sent by a browser carries an ``Origin``; one that is neither the hub's own origin (the
``Host`` it names, or the public base URL's) nor one of ``PERSONA_AGENT_CORS_ORIGINS`` gets
403, with or without credentials. A page of another origin can send a ``POST`` without
asking first (CORS) when its body is empty or form-like: an empty one is a whole A2A call
(``tasks/{id}:cancel``). Clients that are not browsers send no ``Origin``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urlsplit

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from persona_agent.security.audit import AuditLog, request_id_of

__all__ = ["OPEN_PATHS", "HostGuard"]

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
"""Answered whatever the ``Host``: probes."""

_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class HostGuard:
    """ASGI middleware: the ``Host`` rule (when ``check_host``) and the ``Origin`` rule.

    ``allowed_hosts``: names a loopback hub also answers to: ``name`` (any port),
    ``.example.org`` (that name and every name under it), ``*`` (any: the Host rule off).
    ``own_origins``: the hub's origins besides ``scheme://{Host}`` (its public base URL's);
    ``cors_origins``: other origins whose pages may call the hub; ``a2a_prefix``: where the
    A2A endpoints are (a refusal there has their error shape).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        check_host: bool,
        listen_host: str = "127.0.0.1",
        allowed_hosts: Iterable[str] = (),
        own_origins: Iterable[str] = (),
        cors_origins: Iterable[str] = (),
        audit: AuditLog | None = None,
        a2a_prefix: str = "/a2a",
    ) -> None:
        self.app = app
        self.a2a_prefix = a2a_prefix
        self.check_host = check_host
        self.listen_host = listen_host
        self.allowed_hosts = frozenset(host.strip().lower() for host in allowed_hosts if host)
        self.origins = frozenset(_origin(o) for o in (*own_origins, *cors_origins) if o)
        self._audit = audit if audit is not None else AuditLog()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        path = _relative_path(scope)
        problem: str | None = None
        if self.check_host and path not in OPEN_PATHS and not self.host_allowed(host):
            problem = (
                f"The Host '{host[:100]}' is not a name of this machine. The hub listens on "
                f"{self.listen_host} without API keys, so it answers only requests for "
                "127.0.0.1, [::1] or localhost (a web page could otherwise reach it by DNS "
                "rebinding): add the name you use to PERSONA_AGENT_ALLOWED_HOSTS, or set "
                "PERSONA_AGENT_API_KEYS"
            )
        elif scope.get("method") in _UNSAFE and b"origin" in headers:
            origin = headers[b"origin"].decode("latin-1")
            if not self.origin_allowed(origin, host):
                problem = (
                    f"Requests that change anything are refused from the origin "
                    f"'{origin[:100]}': it is neither the hub's own nor one of "
                    "PERSONA_AGENT_CORS_ORIGINS"
                )
        if problem is None:
            await self.app(scope, receive, send)
            return
        self._audit.record(
            "auth.refused",
            principal=None,
            outcome="403",
            request_id=request_id_of(scope["headers"]),
            path=path,
            reason=problem,
        )
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": problem[:120]})
            return
        await _refusal(path, scope.get("method", ""), problem, self.a2a_prefix)(
            scope, receive, send
        )

    def host_allowed(self, host: str) -> bool:
        name, loopback = _loopback_host(host)
        if loopback or "*" in self.allowed_hosts or name in self.allowed_hosts:
            return True
        return any(
            entry.startswith(".") and (name == entry[1:] or name.endswith(entry))
            for entry in self.allowed_hosts
        )

    def origin_allowed(self, origin: str, host: str) -> bool:
        given = _origin(origin)
        own = {f"http://{host}".lower(), f"https://{host}".lower()}
        return given in own or given in self.origins


def _relative_path(scope: Scope) -> str:
    """The path below the app's root path (a proxy's prefix)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


@lru_cache(maxsize=256)
def _loopback_host(host: str) -> tuple[str, bool]:
    """A ``Host`` header's name (:func:`_hostname`), and whether it is loopback
    (:func:`_is_loopback`); remembered for the few a hub is sent (an address parsed each
    request was ~1 % of a blocking send's CPU)."""
    name = _hostname(host)
    return name, _is_loopback(name)


def _hostname(host: str) -> str:
    """The name of a ``Host`` header, lower case, without its port or final dot
    (``[::1]:8000`` → ``::1``, ``LocalHost.:80`` → ``localhost``)."""
    if host.startswith("["):
        name = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        name = host.rpartition(":")[0]
    else:
        name = host
    return name.lower().rstrip(".")


def _is_loopback(name: str) -> bool:
    """Whether ``name`` can only be this machine: a loopback address, ``localhost``, or a
    name under ``localhost`` (RFC 6761: browsers resolve them to loopback themselves, and
    no DNS server can make them mean anything else to a browser)."""
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _origin(value: str) -> str:
    """An origin as browsers send it: lower case, without a path or final slash."""
    value = value.strip().lower()
    if "://" not in value:
        return value  # "null", and what is not an origin at all
    parts = urlsplit(value)
    return f"{parts.scheme}://{parts.netloc}"


def _refusal(path: str, method: str, message: str, prefix: str) -> JSONResponse:
    """403 in the shape of the endpoint: a JSON-RPC error on an A2A JSON-RPC endpoint
    (``POST /a2a/{id}/``, ``POST /a2a/``), an A2A HTTP+JSON error elsewhere under
    ``/a2a/``, FastAPI's ``{"detail": ...}`` anywhere else."""
    if path.startswith(f"{prefix}/") and path != f"{prefix}/personas":
        rest = path[len(prefix) + 1 :].partition("/")[2]
        if method == "POST" and (path == f"{prefix}/" or rest == ""):
            error = {"code": -32600, "message": message, "data": {"httpStatus": 403}}
            return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=403)
        body = {"error": {"code": 403, "status": "PERMISSION_DENIED", "message": message}}
        return JSONResponse(body, status_code=403)
    return JSONResponse({"detail": message}, status_code=403)
