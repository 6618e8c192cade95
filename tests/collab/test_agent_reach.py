"""Where an outside agent may be called, and where its credential may go: the hosts the
agents file names are trusted as written (an agent's host, a catalog's host and port), a
card's interfaces elsewhere are judged by the URL guard (the next one tried when one is
refused), and the guarded transport sends nothing to an inner address."""

from __future__ import annotations

import httpx
import pytest
from a2a.types.a2a_pb2 import AgentCard, AgentInterface

from persona_agent.collab.agent_reach import AgentReach, http_url
from persona_agent.collab.agents_file import AgentConfig, CatalogConfig
from persona_agent.security.egress.outbound import GuardedTransport, UrlRefused
from persona_agent.security.egress.push_urls import PushUrlGuard
from tests.servers.raw_http import RawHttp


def _card(*interfaces: tuple[str, str, str]) -> AgentCard:
    return AgentCard(
        name="x",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=binding, protocol_version=version)
            for binding, url, version in interfaces
        ],
    )


async def test_a_refused_interface_is_passed_over_for_the_next_the_guard_accepts() -> None:
    reach = AgentReach.of_catalog(CatalogConfig(url="http://127.0.0.1:8000/catalog.json"))
    card = _card(
        ("GRPC", "169.254.169.254:443", "1.0"),  # first in the card: refused
        ("JSONRPC", "http://127.0.0.1:8001/a2a/", "1.0"),  # loopback, another port: refused
        ("JSONRPC", "http://127.0.0.1:8000/a2a/", "0.3"),  # the catalog's origin
    )
    chosen = await reach.choose(card, None, secure=False)
    assert chosen.interface.url == "http://127.0.0.1:8000/a2a/"
    assert chosen.dial.address is None  # trusted: called as written
    assert chosen.credited
    with pytest.raises(UrlRefused, match="interfaces are refused") as refused:
        await reach.choose(card, ["GRPC"], secure=False)
    assert "http://169.254.169.254:443" in str(refused.value)
    assert "8000" not in str(refused.value)  # not a gRPC interface: never tried


async def test_the_best_version_of_a_binding_goes_first() -> None:
    reach = AgentReach.of_agent(AgentConfig(card_url="http://127.0.0.1:9/card.json"))
    card = _card(
        ("JSONRPC", "http://127.0.0.1:9/v03/", "0.3"),
        ("JSONRPC", "http://127.0.0.1:9/v10/", "1.0"),
        ("HTTP+JSON", "http://127.0.0.1:9/rest/", "1.0"),
    )
    assert (await reach.choose(card, None, secure=False)).interface.url.endswith("/v10/")
    chosen = await reach.choose(card, ["HTTP+JSON", "JSONRPC"], secure=False)
    assert chosen.interface.url.endswith("/rest/")
    with pytest.raises(UrlRefused, match="offers no binding the hub speaks"):
        await reach.choose(_card(("KAFKA", "http://127.0.0.1:9/", "1.0")), None, secure=False)


def test_the_credential_goes_to_the_hosts_it_was_configured_for() -> None:
    agent = AgentConfig.model_validate(
        {
            "card_url": "https://agents.example.com/.well-known/agent-card.json",
            "auth": {"api_key": "k", "hosts": ["api.example.com:8443"]},
        }
    )
    reach = AgentReach.of_agent(agent)
    assert reach.credits("https://agents.example.com/a2a/")
    assert reach.credits(http_url("agents.example.com:50051", secure=True))  # its gRPC port
    assert reach.credits("https://api.example.com:8443/a2a/")
    assert not reach.credits("https://api.example.com/a2a/")  # another port
    assert not reach.credits("https://evil.example.com/")
    catalog = AgentReach.of_catalog(CatalogConfig(url="http://127.0.0.1:8000/c.json"))
    assert catalog.credits("http://127.0.0.1:8000/a2a/x/")
    assert not catalog.credits("http://127.0.0.1:8001/a2a/x/")  # the catalog's origin only


@pytest.mark.parametrize(
    "host", ["localhost", "[::ffff:127.0.0.1]", "127.1", "0x7f000001", "[::1]"]
)
async def test_the_guarded_transport_sends_nothing_inward(host: str) -> None:
    async with RawHttp() as server:
        server.json("/card.json", {"name": "x"})
        guard = PushUrlGuard(what="Agent URL")
        async with httpx.AsyncClient(transport=GuardedTransport(guard)) as http:
            with pytest.raises(UrlRefused, match="is refused: not a public address"):
                await http.get(f"http://{host}:{server.port}/card.json")
        allowed = PushUrlGuard([f"127.0.0.1:{server.port}"], what="Agent URL")
        async with httpx.AsyncClient(transport=GuardedTransport(allowed)) as http:
            answer = await http.get(f"{server.base_url}/card.json")
    assert answer.json() == {"name": "x"}
    assert [request.path for request in server.requests] == ["/card.json"]  # the allowed one
