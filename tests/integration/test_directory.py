"""The hub's own agent: a valid card at the hub's root, and a directory at ``/a2a/`` that
answers any message with the personas, on every binding and protocol version, with the
real a2a-sdk client pointed at the hub itself."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.helpers import get_data_parts, get_message_text
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Role,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from persona_agent.personas.scan import load_persona_dir
from tests.fakes.fake_llm import FakeLLM
from tests.integration.a2a_helpers import user_message
from tests.integration.conftest import BINDINGS, BUNDLED, HERMIT, TRANSPORTS, Hub, HubFactory

BUNDLED_PERSONAS, _ = load_persona_dir(BUNDLED)
TEST_PERSONAS = {"toolsmith": "Tess the Toolsmith", "hermit": "Hal the Hermit"}
"""The conftest's two test personas, served with the bundled ones."""
KEY = "directory-key-0123456789abcdef"
SOCRATES_ONLY = "socratic-key-0123456789abcdef"
KEYS = [
    {"name": "alice", "key": KEY},
    {"name": "socratic", "key": SOCRATES_ONLY, "personas": ["socrates"]},
]


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def served(hub: Hub) -> dict[str, str]:
    """Every persona the test hub serves: id -> name."""
    return {**{p.id: p.name for p in BUNDLED_PERSONAS.values()}, **TEST_PERSONAS}


async def directory_client(
    hub: Hub,
    transport: tuple[str, str] = ("JSONRPC", "1.0"),
    *,
    streaming: bool = False,
    http: httpx.AsyncClient | None = None,
) -> Client:
    """A client of the hub's own agent, from the card at the hub's root (the SDK's card
    resolver), bound to one binding and protocol version of it."""
    binding, version = transport
    card = await A2ACardResolver(http or hub.http, hub.settings.base_url).get_agent_card()
    chosen = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding == binding and i.protocol_version == version
    ]
    assert chosen, f"the hub's card offers no {binding} {version} interface"
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(chosen)
    config = ClientConfig(
        httpx_client=http or hub.http, supported_protocol_bindings=[binding], streaming=streaming
    )
    return ClientFactory(config).create(card)


async def ask(client: Client, text: str = "Who is here?") -> Message:
    """Send a message; the one response must be an agent message (no task)."""
    responses = [r async for r in client.send_message(user_message(text))]
    assert len(responses) == 1, responses
    assert responses[0].HasField("message"), responses[0]
    message = responses[0].message
    assert message.role == Role.ROLE_AGENT
    return message


def listed(message: Message) -> dict[str, dict[str, Any]]:
    """The directory's data part: persona id -> its entry."""
    (data,) = get_data_parts(message.parts)
    assert data["kind"] == "persona-directory"
    return {entry["id"]: entry for entry in data["personas"]}


def assert_lists(hub: Hub, message: Message, personas: dict[str, str]) -> None:
    text = get_message_text(message)
    base = hub.settings.public_base_url
    entries = listed(message)
    assert set(entries) == set(personas)
    for persona_id, name in personas.items():
        card_url = f"{base}/a2a/{persona_id}/.well-known/agent-card.json"
        assert f"{name} ({persona_id})" in text
        assert card_url in text
        assert entries[persona_id]["name"] == name
        assert entries[persona_id]["cardUrl"] == card_url
        assert entries[persona_id]["url"] == f"{base}/a2a/{persona_id}/"


async def test_the_hub_card_is_a_valid_card_of_an_agent_at_a2a(hub: Hub) -> None:
    response = await hub.http.get("/.well-known/agent-card.json")
    assert response.status_code == 200
    card = parse_agent_card(response.json())  # the SDK's own parsing
    base = hub.settings.public_base_url
    interfaces = {
        (i.protocol_binding, i.protocol_version): i.url for i in card.supported_interfaces
    }
    assert interfaces == {
        ("JSONRPC", "1.0"): f"{base}/a2a/",
        ("JSONRPC", "0.3"): f"{base}/a2a/",
        ("HTTP+JSON", "1.0"): f"{base}/a2a",
        ("HTTP+JSON", "0.3"): f"{base}/a2a",
    }
    assert card.name == "persona-agent hub"
    assert card.capabilities.streaming
    assert not card.capabilities.push_notifications
    assert not card.capabilities.extended_agent_card
    (skill,) = card.skills
    assert skill.id == "directory"
    for persona_id, name in served(hub).items():
        assert f"{name} ({persona_id})" in skill.description
    assert len(skill.examples) > 1
    assert all(
        any(name in example for name in served(hub).values()) for example in skill.examples[1:]
    )
    # The same card below /a2a/, where the agent is, and in the aggregate.
    below = await hub.http.get("/a2a/.well-known/agent-card.json")
    assert below.json() == response.json()
    aggregate = (await hub.http.get("/.well-known/agent.json")).json()
    assert aggregate["hub"] == response.json()
    # Cached as the personas' cards are.
    etag = response.headers["etag"]
    assert "max-age" in response.headers["cache-control"]
    again = await hub.http.get("/.well-known/agent-card.json", headers={"If-None-Match": etag})
    assert again.status_code == 304


@pytest.mark.parametrize("binding", BINDINGS)
async def test_create_from_url_on_the_hub_root_tells_where_the_personas_are(
    hub: Hub, llm: FakeLLM, binding: str
) -> None:
    config = ClientConfig(httpx_client=hub.http, supported_protocol_bindings=[binding])
    client = await ClientFactory(config).create_from_url(hub.settings.base_url)
    message = await ask(client, "Which personas can I talk to?")
    assert_lists(hub, message, served(hub))
    assert "This directory does not answer as them" in get_message_text(message)
    assert llm.requests == []  # no model: the directory answers by itself


@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_every_binding_and_version_gets_the_directory(
    hub: Hub, transport: tuple[str, str], streaming: bool
) -> None:
    client = await directory_client(hub, transport, streaming=streaming)
    message = await ask(client)
    assert_lists(hub, message, served(hub))


async def test_a_persona_added_or_removed_shows_in_the_directory_at_once(hub: Hub) -> None:
    client = await directory_client(hub)
    created = await hub.http.post(
        "/api/v1/personas", json={**HERMIT, "id": "newton", "name": "Isaac Newton"}
    )
    assert created.status_code == 201
    assert_lists(hub, await ask(client), {**served(hub), "newton": "Isaac Newton"})
    card = parse_agent_card((await hub.http.get("/.well-known/agent-card.json")).json())
    assert "Isaac Newton (newton)" in card.skills[0].description
    assert (await hub.http.delete("/api/v1/personas/newton")).status_code == 204
    assert "newton" not in listed(await ask(client))
    card = parse_agent_card((await hub.http.get("/.well-known/agent-card.json")).json())
    assert "Isaac Newton" not in card.skills[0].description


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_directory_keeps_no_tasks(hub: Hub, transport: tuple[str, str]) -> None:
    client = await directory_client(hub, transport)
    # The SDK's v0.3 HTTP+JSON client names no error of an answer: a 404 is MethodNotFound
    # to it (test_durability.py), a 400 a bare A2AClientError; the wire test below reads them.
    v03_rest = transport == ("HTTP+JSON", "0.3")
    not_found = MethodNotFoundError if v03_rest else TaskNotFoundError
    unsupported_push = A2AClientError if v03_rest else PushNotificationNotSupportedError
    with pytest.raises(not_found):
        await client.get_task(GetTaskRequest(id="nope"))
    with pytest.raises(not_found):
        await client.cancel_task(CancelTaskRequest(id="nope"))
    with pytest.raises(unsupported_push):
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id="nope", url="https://example.org/hook")
        )
    streaming = await directory_client(hub, transport, streaming=True)
    with pytest.raises(not_found):
        async for _ in streaming.subscribe(SubscribeToTaskRequest(id="nope")):
            pass
    if transport[1] == "1.0":  # no ListTasks in 0.3
        with pytest.raises(UnsupportedOperationError):
            await client.list_tasks(ListTasksRequest())


async def test_unsupported_methods_get_the_specs_codes_on_the_wire(hub: Hub) -> None:
    headers = {"A2A-Version": "1.0"}

    async def rpc(method: str, params: dict[str, Any]) -> int:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        response = await hub.http.post("/a2a/", json=body, headers=headers)
        assert response.status_code == 200
        code: int = response.json()["error"]["code"]
        return code

    assert await rpc("GetTask", {"id": "nope"}) == -32001  # TaskNotFound
    assert await rpc("CancelTask", {"id": "nope"}) == -32001
    assert await rpc("ListTasks", {}) == -32004  # UnsupportedOperation
    push = {"taskId": "nope", "url": "https://example.org/hook"}
    assert await rpc("CreateTaskPushNotificationConfig", push) == -32003
    assert await rpc("GetExtendedAgentCard", {}) == -32004
    rest = await hub.http.get("/a2a/tasks/nope", headers=headers)
    assert rest.status_code == 404
    assert rest.json()["error"]["status"] == "NOT_FOUND"
    rest = await hub.http.get("/a2a/tasks", headers=headers)
    assert rest.status_code == 400
    assert rest.json()["error"]["status"] == "FAILED_PRECONDITION"
    v03 = await hub.http.get("/a2a/v1/tasks/nope")
    assert v03.status_code == 404
    assert "Task not found" in v03.text
    # /a2a/ takes JSON-RPC calls (POST) only, as a persona's endpoint does.
    assert (await hub.http.get("/a2a/")).status_code == 405
    # A first segment that is neither a persona nor one of the directory's paths: 404.
    missing = await hub.http.get("/a2a/nobody/tasks/123")
    assert missing.json()["error"]["code"] == "persona_not_found"


async def test_the_directory_answers_behind_a_proxy_root_path(hub: Hub) -> None:
    transport = httpx.ASGITransport(app=hub.app, root_path="/proxy")
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
        body["params"] = {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "?"}]}
        }
        answer = await http.post("/proxy/a2a/", json=body, headers={"A2A-Version": "1.0"})
    assert answer.status_code == 200
    parts = answer.json()["result"]["message"]["parts"]
    assert {entry["id"] for entry in parts[1]["data"]["personas"]} == set(served(hub))


async def test_a_persona_named_like_a_directory_path_comes_first(hub: Hub) -> None:
    """``/a2a/tasks/...`` is the directory's HTTP+JSON path until a persona takes the id."""
    assert (await hub.http.get("/a2a/tasks/x", headers={"A2A-Version": "1.0"})).status_code == 404
    created = await hub.http.post(
        "/api/v1/personas", json={**HERMIT, "id": "tasks", "name": "Tasker"}
    )
    assert created.status_code == 201
    card = await hub.http.get("/a2a/tasks/.well-known/agent-card.json")
    assert card.json()["name"] == "Tasker"
    client = await directory_client(hub)  # JSON-RPC at /a2a/ is never taken
    assert "tasks" in listed(await ask(client))


@asynccontextmanager
async def as_caller(hub: Hub, **headers: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=hub.settings.base_url, headers=headers, timeout=30
    ) as http:
        yield http


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_with_authentication_required_the_directory_requires_it_too(
    hub_factory: HubFactory, transport: tuple[str, str]
) -> None:
    """The directory follows the hub's default access (``PERSONA_AGENT_A2A_ACCESS``), as a
    persona without ``access:`` of its own; its card is public and says so."""
    async with hub_factory(api_keys=json.dumps(KEYS), a2a_access="authenticated") as hub:
        card = parse_agent_card((await hub.http.get("/.well-known/agent-card.json")).json())
        assert set(card.security_schemes) == {"apiKey", "bearer"}
        assert [set(r.schemes) for r in card.security_requirements] == [{"apiKey"}, {"bearer"}]
        assert not card.capabilities.extended_agent_card
        anonymous = await directory_client(hub, transport)
        with pytest.raises(A2AClientError, match="401"):
            await ask(anonymous)
        raw = await hub.http.post(
            "/a2a/", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}
        )
        assert raw.status_code == 401
        assert "WWW-Authenticate" in raw.headers
        # Any key with the A2A scope; one that names some personas hears of those only.
        async with as_caller(hub, **{"X-API-Key": KEY}) as http:
            message = await ask(await directory_client(hub, transport, http=http))
        assert_lists(hub, message, served(hub))
        async with as_caller(hub, **{"X-API-Key": SOCRATES_ONLY}) as http:
            message = await ask(await directory_client(hub, transport, http=http))
        assert_lists(hub, message, {"socrates": served(hub)["socrates"]})


async def test_with_keys_and_public_access_anyone_gets_the_directory(
    hub_factory: HubFactory,
) -> None:
    async with hub_factory(api_keys=json.dumps(KEYS)) as hub:
        card = parse_agent_card((await hub.http.get("/.well-known/agent-card.json")).json())
        assert set(card.security_schemes) == {"apiKey", "bearer"}
        assert list(card.security_requirements) == []
        assert_lists(hub, await ask(await directory_client(hub)), served(hub))
        async with as_caller(hub, **{"X-API-Key": "not-a-key-0123456789"}) as http:
            with pytest.raises(A2AClientError, match="401"):
                await ask(await directory_client(hub, http=http))
