"""Calls to URLs that are not the operator's own choice, on the address the URL guard judged:
an httpx transport that judges every request, and :func:`dial` for other clients (gRPC).

A name resolved once to be judged and again to connect could answer otherwise the second
time (DNS rebinding): so a URL the guard accepts is called on the address it judged, its
name kept in ``Host`` and in TLS's SNI (which the certificate is checked against). A host
the guard's allow-list names is called as written (by its name), as the guard lets it
through unjudged. No redirect is followed by the clients that use these.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import ssl
import urllib.parse
from dataclasses import dataclass

import httpx

from persona_agent.security.egress.push_urls import PushUrlGuard, destination

__all__ = ["Dial", "GuardedTransport", "UrlRefused", "allowed", "dial"]


class UrlRefused(httpx.ConnectError):
    """The guard refused a URL (or the address its name resolves to now)."""


@dataclass(frozen=True, slots=True)
class Dial:
    """Where to connect for a URL the guard accepted."""

    host: str
    """The URL's host name (for ``Host`` and SNI)."""
    port: int
    address: str | None
    """The address judged; ``None``: a host of the allow-list, connected to by its name."""


def allowed(guard: PushUrlGuard, host: str, port: int) -> bool:
    """Whether the guard's allow-list names ``host`` (or ``host:port``)."""
    host = host.lower().strip("[]")
    return host in guard.allowed or f"{host}:{port}" in guard.allowed


async def dial(guard: PushUrlGuard, url: str) -> Dial:
    """Where to connect for ``url``: judged by ``guard`` (every address its host resolves
    to), then pinned to the first of them, itself judged again.

    Raises:
        UrlRefused: the guard refuses it (its log says why), or the name answers otherwise now.
    """
    refused = UrlRefused(f"{destination(url)} is refused: not a public address")
    if not await guard(url):
        raise refused
    parsed = urllib.parse.urlsplit(url)
    host = (parsed.hostname or "").lower()
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    if allowed(guard, host, port):
        return Dial(host, port, None)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        raise refused from None
    if not infos:
        raise refused
    address = str(infos[0][4][0]).split("%", 1)[0]
    literal = f"[{address}]" if ":" in address else address
    if not await guard(f"{parsed.scheme}://{literal}:{port}/"):
        raise refused
    return Dial(host, port, address)


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every guarded transport: httpx makes one a client otherwise,
    loading the CA bundle each time (~0.2 s of CPU here: a catalog of 1,000 agents held
    the event loop for minutes)."""
    return httpx.create_ssl_context()


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport whose every request is judged by ``guard`` and sent to the
    address judged (:func:`dial`); refused, it raises :class:`UrlRefused`."""

    def __init__(self, guard: PushUrlGuard, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.guard = guard
        self._inner = inner or httpx.AsyncHTTPTransport(verify=_tls())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = await dial(self.guard, str(request.url))
        if target.address is not None:  # the Host header keeps the name
            request.url = request.url.copy_with(host=target.address)
            request.extensions = {**request.extensions, "sni_hostname": target.host}
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
