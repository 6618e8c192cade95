"""Whether a webhook URL may be called: the SDK's SSRF policy, plus what it does not see.

:class:`PushUrlGuard` is an async ``push_url_validator`` (the SDK's handler checks each new
config with it; the sender checks each delivery attempt, since a name's DNS answer may
change). It refuses credentials in the URL, over-long URLs and URLs parsers disagree on,
lets through the hosts of ``PERSONA_AGENT_PUSH_ALLOWED_HOSTS`` (local development), then
resolves the host once and judges every address it resolves to:

- by the SDK's ``validate_push_notification_url`` (loopback, private, link-local, shared,
  multicast, reserved and unspecified addresses refused; an IPv4-mapped IPv6 address as
  the IPv4 in it), given the address itself, so the name is resolved only once;
- and by the IPv4 addresses an IPv6 transition address reaches (:func:`embedded_ipv4`):
  6to4, Teredo (server and client), NAT64 and IPv4-compatible addresses. Any of them not
  public: refused. The well-known NAT64 prefix (``64:ff9b::/96``, globally reachable; on
  an IPv6-only network DNS64 gives every public name such an address) is judged by its
  IPv4 alone; the local-use prefix (``64:ff9b:1::/48``, RFC 8215) is not globally
  reachable and is refused whatever it holds.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import urllib.parse
from collections.abc import Iterable

from a2a.utils.errors import InvalidParamsError
from a2a.utils.push_url_validator import validate_push_notification_url

__all__ = ["MAX_URL_LENGTH", "PushUrlGuard", "destination", "embedded_ipv4"]

logger = logging.getLogger(__name__)

MAX_URL_LENGTH = 2048

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address

NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
"""RFC 6052: the IPv4 address is the last 32 bits."""
NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")
"""RFC 8215: for one network's own translators; not globally reachable."""
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
"""RFC 4291 (deprecated): ``::a.b.c.d``; ``::`` and ``::1`` are not IPv4 addresses."""


def destination(url: str) -> str:
    """``scheme://host:port`` of a URL (the port always written): where it is delivered,
    and how logs name it (never its path, query or credentials)."""
    try:
        parsed = urllib.parse.urlsplit(url)
        port = parsed.port or {"http": 80, "https": 443}.get(parsed.scheme, 0)
        host = (parsed.hostname or "").lower()
    except ValueError:
        return "(unparseable URL)"
    host = f"[{host}]" if ":" in host else host
    return f"{parsed.scheme}://{host}:{port}"


def embedded_ipv4(address: _Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 transition address reaches (none for another address):
    IPv4-mapped, 6to4 (``2002::/16``), Teredo (``2001::/32``: its server, and its client
    with the obfuscation undone), NAT64 (``64:ff9b::/96``, and the ``/96`` position of
    ``64:ff9b:1::/48``) and IPv4-compatible (``::a.b.c.d``)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)  # (server, client): Python undoes the client's XOR
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in NAT64_WELL_KNOWN or address in NAT64_LOCAL_USE:
        found.append(low32)
    if address in IPV4_COMPATIBLE and int(address) > 1:
        found.append(low32)
    return found


def _literal_url(scheme: str, address: _Address, port: int) -> str:
    host = f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address)
    return f"{scheme}://{host}:{port}/"


async def _sdk_accepts(scheme: str, address: _Address, port: int) -> bool:
    """The SDK's policy for one address (a numeric host: no DNS query)."""
    return await validate_push_notification_url(_literal_url(scheme, address, port))


class PushUrlGuard:
    """Whether a webhook URL may be called (see the module docstring)."""

    def __init__(self, allowed_hosts: Iterable[str] = (), *, what: str = "Push URL") -> None:
        """``what``: how the log names the URLs it judges (``Push URL``, ``Agent URL``)."""
        self.allowed = {host.strip().lower().strip("[]") for host in allowed_hosts if host.strip()}
        self.what = what

    async def __call__(self, url: str) -> bool:
        reason = await self.refusal(url)
        if reason is not None:
            logger.warning("%s refused: %s", self.what, reason)
        return reason is None

    async def validate(self, url: str) -> bool:
        """The SDK's ``push_url_validator``: ``True``, or InvalidParams with the reason (the
        SDK's own refusal says only "Invalid push notification URL").

        Raises:
            InvalidParamsError: the URL may not be called, and why.
        """
        reason = await self.refusal(url)
        if reason is not None:
            logger.warning("%s refused: %s", self.what, reason)
            raise InvalidParamsError(message=f"Invalid push notification URL: {reason}")
        return True

    async def refusal(self, url: str) -> str | None:
        """Why ``url`` may not be called (naming its destination, never its path or query),
        or ``None``."""
        try:
            parsed = urllib.parse.urlsplit(url)
            port = parsed.port
        except ValueError:
            return "it cannot be parsed"
        if any(c.isspace() or ord(c) < 32 or c == "\\" for c in url):
            # parsers disagree on such URLs: the one checked might not be the one called
            return "it has whitespace, a control character or a backslash"
        where = destination(url)
        if len(url) > MAX_URL_LENGTH or parsed.scheme not in ("http", "https"):
            return f"not http(s), or longer than {MAX_URL_LENGTH} characters ({where})"
        host = (parsed.hostname or "").lower()
        if not host or parsed.username is not None or parsed.password is not None:
            return f"no host, or credentials in it ({where})"
        port = port or (443 if parsed.scheme == "https" else 80)
        if host in self.allowed or f"{host}:{port}" in self.allowed:
            return None
        reason = await self._refusal(parsed.scheme, host, port)
        return None if reason is None else f"{where} {reason}"

    async def _refusal(self, scheme: str, host: str, port: int) -> str | None:
        """Why ``host`` may not be called, or ``None``."""
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError:
            return "cannot be resolved"
        if not infos:
            return "cannot be resolved"
        for info in infos:
            try:
                address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
            except ValueError:
                return "resolves to something that is not an IP address"
            reason = await self._address_refusal(scheme, address, port)
            if reason is not None:
                return reason
        return None

    async def _address_refusal(self, scheme: str, address: _Address, port: int) -> str | None:
        for ipv4 in embedded_ipv4(address):
            if not await _sdk_accepts(scheme, ipv4, port):
                return f"resolves to {address}, which reaches {ipv4}: not a public address"
        if address in NAT64_LOCAL_USE:
            return f"resolves to {address}, a local-use NAT64 address (64:ff9b:1::/48)"
        if address in NAT64_WELL_KNOWN:
            return None  # judged by the IPv4 it reaches (Python calls ::/8 reserved)
        if not await _sdk_accepts(scheme, address, port):
            return f"resolves to {address}: not a public address"
        return None
