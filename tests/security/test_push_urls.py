"""The push-notification URL guard (SSRF): every address form that reaches the hub's own
network is refused (IPv6 transition addresses by the IPv4 they reach), names are judged by
what they resolve to, and the allow-list is the only way to loopback. No test resolves a
real name: the resolver is the test's."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

import pytest

from persona_agent.a2a.tasks.push import PushUrlGuard, embedded_ipv4

REFUSED = [
    "http://127.0.0.1/hook",
    "http://localhost/hook",
    "http://[::1]/hook",
    "http://10.0.0.5/hook",
    "http://192.168.1.1/hook",
    "http://172.16.0.1/hook",
    "http://169.254.169.254/latest/meta-data",  # cloud metadata
    "http://[fe80::1]/hook",
    "http://224.0.0.1/hook",
    "http://0.0.0.0/hook",
    "http://100.64.0.1/hook",  # shared address space
    "http://[::ffff:127.0.0.1]/hook",  # IPv4-mapped IPv6
    "http://[::ffff:10.0.0.1]/hook",
    "http://2130706433/hook",  # 127.0.0.1 in decimal
    "http://0177.0.0.1/hook",  # in octal
    "http://0x7f.0.0.1/hook",  # in hex
    "http://017700000001/hook",  # one octal number
    "http://internal.example/hook",  # a name that resolves to a private address
    "http://mixed.example/hook",  # one public, one private address: refused
    "ftp://public.example/hook",
    "file:///etc/passwd",
    "http://user:secret@public.example/hook",
    "http:///hook",
    "http://public.example/" + "a" * 2100,
    "http://public.example\\@10.0.0.1/hook",  # parsers disagree on the host
    "http://public.example /hook",
    "http://public.example/\nhook",
]

ANSWERS = {
    "internal.example": ["10.1.2.3"],
    "public.example": ["93.184.216.34"],
    "mixed.example": ["93.184.216.34", "192.168.0.9"],
    "sixtofour.example": ["2002:7f00:1::1"],  # an AAAA record that reaches 127.0.0.1
    "public-sixtofour.example": ["2002:5db8:d822::1"],
}


@pytest.fixture(autouse=True)
def resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Names resolve as ANSWERS say; numeric forms as the system's resolver reads them
    (inet_aton: decimal, octal, hex), never over the network."""
    real = socket.getaddrinfo

    async def getaddrinfo(
        self: asyncio.AbstractEventLoop, host: Any, port: Any, *args: Any, **kwargs: Any
    ) -> list[Any]:
        if host in ANSWERS:
            return [
                (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port or 80, 0, 0))
                if ":" in address
                else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port or 80))
                for address in ANSWERS[host]
            ]
        flags = socket.AI_NUMERICHOST if host != "localhost" else 0
        return real(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, flags)

    monkeypatch.setattr(asyncio.BaseEventLoop, "getaddrinfo", getaddrinfo)


@pytest.mark.parametrize("url", REFUSED)
async def test_refused(url: str) -> None:
    assert await PushUrlGuard()(url) is False


# Teredo: server 65.54.227.120; the client's address is stored XOR 0xffffffff.
TEREDO_PRIVATE_CLIENT = "2001:0:4136:e378:8000:63bf:f5ff:fffe"  # client 10.0.0.1
TEREDO_PRIVATE_SERVER = "2001:0:a00:1:8000:63bf:a24b:2ddd"  # server 10.0.0.1, client 93.180.210.34

TRANSITION = [
    # (address, the IPv4 addresses it reaches)
    ("2002:7f00:1::1", ["127.0.0.1"]),  # 6to4
    ("2002:a9fe:a9fe::", ["169.254.169.254"]),
    ("2002:a00:1:1::5", ["10.0.0.1"]),
    (TEREDO_PRIVATE_CLIENT, ["65.54.227.120", "10.0.0.1"]),
    (TEREDO_PRIVATE_SERVER, ["10.0.0.1", "93.180.210.34"]),
    ("64:ff9b::7f00:1", ["127.0.0.1"]),  # NAT64, well-known prefix
    ("64:ff9b::a9fe:a9fe", ["169.254.169.254"]),
    ("64:ff9b:1::c0a8:101", ["192.168.1.1"]),  # NAT64, local-use prefix
    ("::7f00:1", ["127.0.0.1"]),  # IPv4-compatible
    ("::a00:1", ["10.0.0.1"]),
    ("::ffff:7f00:1", ["127.0.0.1"]),  # IPv4-mapped
]


@pytest.mark.parametrize(("address", "reached"), TRANSITION)
async def test_transition_addresses_are_judged_by_the_ipv4_they_reach(
    address: str, reached: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    assert [str(ipv4) for ipv4 in embedded_ipv4(ipaddress.ip_address(address))] == reached
    assert await PushUrlGuard()(f"http://[{address}]:8080/hook") is False
    assert f"reaches {next(r for r in reached if not ipaddress.ip_address(r).is_global)}" in (
        caplog.text
    )


async def test_a_name_whose_aaaa_record_reaches_loopback_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert await PushUrlGuard()("https://sixtofour.example/hook") is False
    assert "2002:7f00:1::1, which reaches 127.0.0.1" in caplog.text


async def test_local_use_nat64_is_refused_whatever_it_holds() -> None:
    assert await PushUrlGuard()("http://[64:ff9b:1::5db8:d822]/hook") is False  # public IPv4


@pytest.mark.parametrize(
    "address", ["::", "::1", "2606:4700:4700::1111", "fe80::1", "93.184.216.34", "10.0.0.1"]
)
def test_other_addresses_reach_no_ipv4(address: str) -> None:
    assert embedded_ipv4(ipaddress.ip_address(address)) == []


@pytest.mark.parametrize(
    "url",
    [
        "https://public.example/hook",
        "http://93.184.216.34:8080/x",
        "http://[2606:4700:4700::1111]:8443/hook",
        "http://[2002:5db8:d822::1]/hook",  # 6to4 to a public IPv4
        "https://public-sixtofour.example/hook",
        "http://[64:ff9b::5db8:d822]/hook",  # NAT64 (DNS64 networks) to a public IPv4
    ],
)
async def test_public_addresses_are_accepted(url: str) -> None:
    assert await PushUrlGuard()(url) is True


async def test_the_allow_list_lets_local_development_through() -> None:
    assert await PushUrlGuard(["127.0.0.1"])("http://127.0.0.1:9999/hook") is True
    only_port = PushUrlGuard(["127.0.0.1:9999"])
    assert await only_port("http://127.0.0.1:9999/hook") is True
    assert await only_port("http://127.0.0.1:9998/hook") is False
    assert await PushUrlGuard(["127.0.0.1"])("http://127.0.0.2/hook") is False
    assert await PushUrlGuard(["::1"])("http://[::1]:80/hook") is True
    # Credentials are refused even for an allowed host.
    assert await PushUrlGuard(["127.0.0.1"])("http://u:p@127.0.0.1/hook") is False


async def test_a_refusal_logs_no_path_query_or_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    await PushUrlGuard()("http://10.0.0.1/hook?token=s3cret-value")
    await PushUrlGuard()("http://user:pw-s3cret@public.example/x")
    assert "s3cret" not in caplog.text
    assert "http://10.0.0.1" in caplog.text
