"""An image part's URL fetched by the hub under the push URL guard's rules: every hop
(the URL and each redirect's target) is judged before it is called, so no redirect leads
inward; the bytes and the time are bounded."""

from __future__ import annotations

import asyncio
import socket
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from persona_agent.media.images import ImageError, ImageLimits
from persona_agent.security.egress.push_urls import PushUrlGuard, destination

__all__ = ["MAX_REDIRECTS", "ImageFetcher"]

MAX_REDIRECTS = 3


class ImageFetcher:
    """Fetches image URLs; ``guard`` judges each hop (its allow-list:
    ``PERSONA_AGENT_IMAGE_URL_ALLOWED_HOSTS``)."""

    def __init__(self, guard: PushUrlGuard, limits: ImageLimits) -> None:
        self.guard = guard
        self.limits = limits

    async def fetch(self, url: str, where: str, left: int | None = None) -> bytes:
        """The bytes at ``url``; ``where`` names the part in errors; ``left``: what the
        message's image bytes have left (``None``: no message budget), which stops the
        fetch as soon as it is passed, as an image's own limit does.

        Raises:
            ImageError: a hop refused by the guard, too many redirects, an HTTP error,
                more bytes than the image's limit or the message's, or slower than it.
        """
        try:
            async with asyncio.timeout(self.limits.fetch_seconds):
                async with httpx.AsyncClient(trust_env=False, follow_redirects=False) as client:
                    return await self._follow(client, url, where, left)
        except TimeoutError as error:
            raise ImageError(
                f"{where}: fetching {destination(url)} took more than "
                f"{self.limits.fetch_seconds:g} s"
            ) from error
        except httpx.HTTPError as error:
            raise ImageError(f"{where}: {destination(url)} cannot be fetched ({error})") from error

    async def _follow(
        self, client: httpx.AsyncClient, url: str, where: str, left: int | None
    ) -> bytes:
        for _hop in range(MAX_REDIRECTS + 1):
            address, headers, extensions = await self._pinned(url, where)
            request = client.build_request("GET", address, headers=headers, extensions=extensions)
            async with _streamed(client, request) as response:
                if response.is_redirect:
                    url = urllib.parse.urljoin(url, response.headers.get("location", ""))
                    continue
                if response.status_code != 200:
                    raise ImageError(
                        f"{where}: {destination(url)} answered HTTP {response.status_code}"
                    )
                return await self._body(response, where, left)
        raise ImageError(f"{where}: more than {MAX_REDIRECTS} redirects")

    async def _pinned(self, url: str, where: str) -> tuple[str, dict[str, str], dict[str, Any]]:
        """The request for ``url`` made to the address the guard judged: the URL with its
        host's address in place of its name, the name in ``Host`` (and in TLS's SNI, which
        the certificate is checked against). A name resolved again when connecting could
        answer otherwise (DNS rebinding): the address judged is the one called."""
        refused = ImageError(
            f"{where}: the URL {destination(url)} is refused: the hub fetches only public "
            "http(s) addresses (see the hub's log for why; PERSONA_AGENT_IMAGE_URL_ALLOWED_HOSTS "
            "allows others)"
        )
        if not await self.guard(url):
            raise refused
        parsed = urllib.parse.urlsplit(url)
        host = parsed.hostname or ""
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError as error:
            raise refused from error
        address = str(infos[0][4][0]).split("%", 1)[0]
        literal = f"[{address}]" if ":" in address else address
        pinned = parsed._replace(netloc=f"{literal}:{port}").geturl()
        allowed = host in self.guard.allowed or f"{host}:{port}" in self.guard.allowed
        if not allowed and not await self.guard(pinned):  # the name answers otherwise now
            raise refused
        return pinned, {"Host": parsed.netloc}, {"sni_hostname": host}

    async def _body(self, response: httpx.Response, where: str, left: int | None) -> bytes:
        limits = self.limits
        limit, setting = limits.max_bytes, "an image may have (PERSONA_AGENT_IMAGE_MAX_BYTES)"
        if left is not None and left < limit:
            limit = left
            setting = (
                "the message's images have left of the "
                f"{limits.message_bytes:,} they may have together "
                "(PERSONA_AGENT_IMAGE_MESSAGE_BYTES)"
            )
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ImageError(
                f"{where}: the image has {int(declared):,} bytes, more than the {limit:,} "
                + setting
            )
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > limit:
                raise ImageError(f"{where}: the image has more than the {limit:,} bytes " + setting)
        return bytes(body)


@asynccontextmanager
async def _streamed(
    client: httpx.AsyncClient, request: httpx.Request
) -> AsyncIterator[httpx.Response]:
    response = await client.send(request, stream=True)
    try:
        yield response
    finally:
        await response.aclose()
