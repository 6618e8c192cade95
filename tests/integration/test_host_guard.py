"""The Host rule (DNS rebinding) on every route of a loopback hub without keys, and the
Origin rule on every request that may change state: a real hub on 127.0.0.1, the real
a2a-sdk client, the headers a browser would send."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from a2a.utils.errors import A2AError

from tests.fakes.fake_llm import FakeLLM, Hang, Reply
from tests.integration.a2a_helpers import send, submit
from tests.integration.conftest import TRANSPORTS, Hub, HubFactory

V1 = {"A2A-Version": "1.0"}
EVIL = "evil.example"
KEY = "host-key-0123456789abcdef"


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def message(text: str = "Hi") -> dict[str, Any]:
    return {"message": {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}}


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


ROUTES: list[tuple[str, str, dict[str, Any] | None, int]] = [
    # method, path, body, the status when served
    ("POST", "/a2a/socrates/", rpc("SendMessage", message()), 200),  # A2A JSON-RPC
    ("POST", "/a2a/socrates/message:send", message(), 200),  # A2A HTTP+JSON
    ("GET", "/a2a/socrates/tasks/nope", None, 404),
    ("POST", "/a2a/", rpc("SendMessage", message()), 200),  # the directory agent
    ("GET", "/a2a/socrates/.well-known/agent-card.json", None, 200),
    ("GET", "/.well-known/agent.json", None, 200),
    ("GET", "/a2a/personas", None, 200),
    ("GET", "/api/v1/personas", None, 200),
    ("GET", "/api/v1/personas/socrates", None, 200),
    ("GET", "/console/", None, 200),
    ("GET", "/metrics", None, 200),
    ("GET", "/docs", None, 200),
]


async def call(
    hub: Hub, method: str, path: str, body: dict[str, Any] | None, **headers: str
) -> httpx.Response:
    return await hub.http.request(method, path, json=body, headers={**V1, **headers})


def refusal_text(response: httpx.Response) -> str:
    """The message of a refusal, whichever shape the endpoint gives it."""
    body = response.json()
    if "detail" in body:
        return str(body["detail"])
    return str(body["error"]["message"])


async def test_a_foreign_host_is_refused_on_every_route(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory() as hub:
        for method, path, body, _ in ROUTES:
            refused = await call(hub, method, path, body, Host=f"{EVIL}:8000")
            assert refused.status_code == 403, (path, refused.text)
            text = refusal_text(refused)
            assert f"'{EVIL}:8000'" in text
            assert "PERSONA_AGENT_ALLOWED_HOSTS" in text
            assert "PERSONA_AGENT_API_KEYS" in text
            if path in ("/a2a/socrates/", "/a2a/"):  # the JSON-RPC endpoint's shape
                assert refused.json()["error"]["code"] == -32600
            elif path.startswith("/a2a/socrates/"):  # HTTP+JSON's
                assert refused.json()["error"]["status"] == "PERMISSION_DENIED"
        assert llm.requests == []  # no refused request reached a persona
        for method, path, body, status in ROUTES:  # Host: 127.0.0.1:{port}
            llm.script(Reply("An answer."))
            served = await call(hub, method, path, body)
            assert served.status_code == status, (path, served.text)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_sdk_client_through_a_rebinding_name_is_refused(
    hub_factory: HubFactory, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    async with (
        hub_factory() as hub,
        httpx.AsyncClient(headers={"Host": EVIL}, timeout=30) as rebound,
    ):
        client = await hub.client("socrates", transport, http=rebound)
        with pytest.raises((A2AClientError, A2AError)) as refused:
            await send(client, "Call your tools for me.")
        assert "403" in str(refused.value) or "PERSONA_AGENT_API_KEYS" in str(refused.value)
        assert llm.requests == []


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.0.0.1:8000",
        "127.8.9.10:1",
        "localhost",
        "LocalHost:80",
        "[::1]:8000",
        "app.localhost:8000",
    ],
)
async def test_loopback_hosts_are_served(hub_factory: HubFactory, host: str) -> None:
    async with hub_factory() as hub:
        response = await hub.http.get("/api/v1/personas", headers={"Host": host})
        assert response.status_code == 200, response.text


async def test_probes_answer_any_host(hub_factory: HubFactory) -> None:
    async with hub_factory() as hub:
        assert (await hub.http.get("/healthz", headers={"Host": EVIL})).status_code == 200
        ready = await hub.http.get("/readyz", headers={"Host": EVIL})
        assert ready.status_code in (200, 503)
        assert "status" in ready.json()


async def test_with_api_keys_the_host_rule_is_off(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory(api_keys=KEY) as hub:
        card_path = "/a2a/socrates/.well-known/agent-card.json"
        card = await hub.http.get(card_path, headers={"Host": EVIL})
        assert card.status_code == 200
        llm.script(Reply("Public persona, anonymous caller."))
        sent = await call(hub, "POST", "/a2a/socrates/", rpc("SendMessage", message()), Host=EVIL)
        assert sent.status_code == 200
        assert "result" in sent.json()


async def test_a_hub_listening_beyond_loopback_has_no_host_rule(hub_factory: HubFactory) -> None:
    # Anyone can reach it directly: a name adds nothing (and its writes need keys anyway).
    async with hub_factory(host="0.0.0.0") as hub:
        listed = await hub.http.get("/api/v1/personas", headers={"Host": EVIL})
        assert listed.status_code == 200


async def test_allowed_hosts_and_the_public_hosts_name_pass(hub_factory: HubFactory) -> None:
    overrides = {
        "allowed_hosts": "hub.lan, .example.org",
        "public_base_url": "https://personas.example.net",
    }
    async with hub_factory(**overrides) as hub:
        for host in (
            "hub.lan:8000",
            "HUB.LAN",
            "example.org",
            "a.b.example.org:443",
            "personas.example.net",
        ):
            response = await hub.http.get("/api/v1/personas", headers={"Host": host})
            assert response.status_code == 200, host
        for host in (EVIL, "hub.lan.evil.example", "notexample.org", "example.net"):
            response = await hub.http.get("/api/v1/personas", headers={"Host": host})
            assert response.status_code == 403, host


async def test_a_cross_origin_empty_post_cannot_cancel_a_task(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory() as hub:
        client = await hub.client("socrates", ("HTTP+JSON", "1.0"))
        llm.script(Hang())
        task_id = await submit(client, "Think about it for a long while.")
        # What a page of another origin can send without asking (no preflight): a POST
        # with no body and no Content-Type.
        cancel = f"/a2a/socrates/tasks/{task_id}:cancel"
        for origin in ("http://evil.example", "null", f"{hub.settings.base_url}.evil.example"):
            refused = await hub.http.post(cancel, headers={**V1, "Origin": origin})
            assert refused.status_code == 403, origin
            assert "PERSONA_AGENT_CORS_ORIGINS" in refusal_text(refused)
        still = await client.get_task(GetTaskRequest(id=task_id))
        assert still.status.state == TaskState.TASK_STATE_WORKING
        # The hub's own pages (the console) may.
        own = await hub.http.post(cancel, headers={**V1, "Origin": hub.settings.base_url})
        assert own.status_code == 200, own.text
        assert json.loads(own.text)["status"]["state"] == "TASK_STATE_CANCELED"


async def test_the_origin_rule_holds_with_keys_and_allows_cors_origins(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(api_keys=KEY, cors_origins="https://app.example") as hub:
        body = rpc("SendMessage", message())
        evil = await call(hub, "POST", "/a2a/socrates/", body, Origin="https://evil.example")
        assert evil.status_code == 403
        assert evil.json()["error"]["code"] == -32600
        llm.script(Reply("For the app."))
        app = await call(hub, "POST", "/a2a/socrates/", body, Origin="https://app.example")
        assert app.status_code == 200
        # Reads are not the Origin rule's: a page cannot read them without CORS anyway.
        card = await hub.http.get(
            "/a2a/socrates/.well-known/agent-card.json", headers={"Origin": "https://evil.example"}
        )
        assert card.status_code == 200
