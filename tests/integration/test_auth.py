"""Who is calling, and whose tasks they see: API keys and OIDC tokens on A2A, the cards'
security declarations, the extended card, and each caller's own tasks and conversations,
over both bindings and both protocol versions, with the real a2a-sdk client and a real
OIDC issuer of the tests' own (tests/servers/oidc_issuer.py).

The cross-caller tests fail when the owner is left out: make ``persona_owner`` (the
task store's owner resolver) or ``conversation_key`` ignore the user, and they do."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import A2AError

from persona_agent.security.api_keys import hash_key
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, send
from tests.integration.conftest import HERMIT, TRANSPORTS, Hub, HubFactory
from tests.servers.oidc_issuer import AUDIENCE, OidcIssuer

ALICE_KEY = "alice-key-0123456789abcdef"
BOB_KEY = "bob-key-0123456789abcdef00"
READER_KEY = "reader-key-0123456789abcdef"
SOCRATES_ONLY = "socratic-key-0123456789abcdef"
KEYS = [
    {"name": "alice", "key": ALICE_KEY},
    {"name": "bob", "sha256": hash_key(BOB_KEY)},  # given hashed
    {"name": "reader", "key": READER_KEY, "scopes": ["personas:read"]},
    {"name": "socratic", "key": SOCRATES_ONLY, "personas": ["socrates"]},
]
RPC = "/a2a/socrates/"
REFUSED = (A2AClientError, A2AError)
"""What the SDK client raises for another caller's task (TaskNotFound over JSON-RPC)."""


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): one
    test calls a tool, on a hub of its own with them (``mcp_servers_file``), and each stdio
    server is a process of about 1 s of CPU."""
    return None


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    with OidcIssuer() as running:
        yield running


@asynccontextmanager
async def as_caller(hub: Hub, **headers: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=hub.settings.base_url, headers=headers, timeout=30
    ) as http:
        yield http


def bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


def rpc_body(method: str = "SendMessage") -> dict[str, Any]:
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Hi"}]}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


async def test_an_authenticated_hub_refuses_without_credentials(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(api_keys=json.dumps(KEYS), a2a_access="authenticated") as hub:
        headers = {"A2A-Version": "1.0"}
        anonymous = await hub.http.post(RPC, json=rpc_body(), headers=headers)
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"] == 'Bearer realm="persona-agent"'
        assert anonymous.json()["error"]["message"].startswith("Authentication required")
        wrong = await hub.http.post(RPC, json=rpc_body(), headers={**headers, **bearer("nope")})
        assert wrong.status_code == 401
        assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
        rest = await hub.http.post(
            "/a2a/socrates/message:send",
            json={"message": rpc_body()["params"]["message"]},
            headers=headers,
        )
        assert rest.status_code == 401
        assert rest.json()["error"]["status"] == "UNAUTHENTICATED"
        # A key without the a2a scope, or not for this persona: 403.
        reader = await hub.http.post(
            RPC, json=rpc_body(), headers={**headers, "X-API-Key": READER_KEY}
        )
        assert reader.status_code == 403
        assert "lacks the scope 'a2a'" in reader.json()["error"]["message"]
        other = await hub.http.post(
            "/a2a/albert-einstein/", json=rpc_body(), headers={**headers, **bearer(SOCRATES_ONLY)}
        )
        assert other.status_code == 403
        assert "may not use persona 'albert-einstein'" in other.json()["error"]["message"]
        # Cards, pictures and discovery stay public.
        assert (await hub.http.get("/a2a/socrates/.well-known/agent-card.json")).status_code == 200
        assert (await hub.http.get("/a2a/personas")).status_code == 200
        assert (await hub.http.get("/.well-known/agent.json")).status_code == 200

        llm.script(Reply("Know thyself."), Reply("Again."))
        for key in (ALICE_KEY, BOB_KEY):  # in clear, and given hashed
            async with as_caller(hub, **bearer(key)) as http:
                task = await send(await hub.client("socrates", http=http), "Who are you?")
                assert task.status.state == TaskState.TASK_STATE_COMPLETED
        async with as_caller(hub, **{"X-API-Key": SOCRATES_ONLY}) as http:
            llm.script(Reply("Yes."))
            task = await send(await hub.client("socrates", http=http), "Via X-API-Key?")
            assert answer_text(task) == "Yes."


async def test_the_card_declares_what_to_send(hub_factory: HubFactory, issuer: OidcIssuer) -> None:
    settings = {
        "api_keys": ALICE_KEY,
        "oidc_issuer": issuer.issuer,
        "oidc_audience": AUDIENCE,
        "a2a_access": "authenticated",
    }
    async with hub_factory(**settings) as hub:
        card = (await hub.http.get("/a2a/socrates/.well-known/agent-card.json")).json()
        schemes = card["securitySchemes"]
        assert schemes["apiKey"]["apiKeySecurityScheme"] == {
            "location": "header",
            "name": "X-API-Key",
            "description": "An API key of the hub",
        }
        assert schemes["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
        assert schemes["oidc"]["openIdConnectSecurityScheme"]["openIdConnectUrl"] == (
            f"{issuer.issuer}/.well-known/openid-configuration"
        )
        required = [set(r["schemes"]) for r in card["securityRequirements"]]
        assert required == [{"apiKey"}, {"bearer"}, {"oidc"}]
        assert card["capabilities"]["extendedAgentCard"] is True


async def test_a_persona_may_require_authentication_on_a_public_hub(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(api_keys=ALICE_KEY) as hub:
        path = hub.settings.personas_dir / "socrates.yaml"
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        data["access"] = "authenticated"
        response = await hub.http.put(
            "/api/v1/personas/socrates", json=data, headers=bearer(ALICE_KEY)
        )
        assert response.status_code == 200, response.text
        headers = {"A2A-Version": "1.0"}
        assert (await hub.http.post(RPC, json=rpc_body(), headers=headers)).status_code == 401
        card = (await hub.http.get("/a2a/socrates/.well-known/agent-card.json")).json()
        assert card["securityRequirements"]
        public = (await hub.http.get("/a2a/albert-einstein/.well-known/agent-card.json")).json()
        assert "securityRequirements" not in public
        llm.script(Reply("Anyone may ask me."))
        task = await send(await hub.client("albert-einstein"), "Public?")
        assert answer_text(task) == "Anyone may ask me."


async def test_oidc_tokens(hub_factory: HubFactory, issuer: OidcIssuer, llm: FakeLLM) -> None:
    settings = {
        "oidc_issuer": issuer.issuer,
        "oidc_audience": AUDIENCE,
        "a2a_access": "authenticated",
    }
    async with hub_factory(**settings) as hub:
        llm.script(Reply("A token, then."))
        async with as_caller(hub, **bearer(issuer.token("alice", scopes=["a2a"]))) as http:
            task = await send(await hub.client("socrates", http=http), "Token?")
            assert answer_text(task) == "A token, then."

        headers = {"A2A-Version": "1.0"}

        async def refused(token: str) -> httpx.Response:
            return await hub.http.post(RPC, json=rpc_body(), headers={**headers, **bearer(token)})

        cases = {
            "has expired": issuer.token("alice", scopes=["a2a"], expires_in=-120),
            "not for this hub": issuer.token("alice", scopes=["a2a"], audience="another"),
            "not from the issuer": issuer.token("alice", scopes=["a2a"], issuer="http://evil"),
            "a key the issuer does not publish": issuer.token(
                "alice", scopes=["a2a"], foreign_key=True, kid="unknown"
            ),
            "Signature verification failed": issuer.token(  # a known kid, another key
                "alice", scopes=["a2a"], foreign_key=True
            ),
        }
        for reason, token in cases.items():
            response = await refused(token)
            assert response.status_code == 401, reason
            assert reason in response.json()["error"]["message"]
        no_scope = await refused(issuer.token("alice", scopes=["personas:read"]))
        assert no_scope.status_code == 403

        # The issuer rotates its keys: a token of the new key makes the hub fetch them again.
        before = issuer.jwks_requests
        issuer.rotate()
        llm.script(Reply("Rotated."))
        async with as_caller(hub, **bearer(issuer.token("alice", scopes=["a2a"]))) as http:
            task = await send(await hub.client("socrates", http=http), "New key?")
            assert answer_text(task) == "Rotated."
        assert issuer.jwks_requests == before + 1


async def test_the_extended_card_is_for_authenticated_callers(
    hub_factory: HubFactory, mcp_servers_file: Path
) -> None:
    async with hub_factory(api_keys=ALICE_KEY, mcp_config=mcp_servers_file) as hub:
        async with as_caller(hub, **bearer(ALICE_KEY)) as http:
            client = await hub.client("toolsmith", http=http)
            extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        tools = [skill.id for skill in extended.skills if "-tool-" in skill.id]
        assert "toolsmith-tool-local__add" in tools
        public = await hub.card("toolsmith")
        assert not [skill for skill in public.skills if "-tool-" in skill.id]
        anonymous = await hub.http.post(
            "/a2a/toolsmith/",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}},
            headers={"A2A-Version": "1.0"},
        )
        assert "authenticated callers only" in anonymous.json()["error"]["message"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_caller_sees_only_its_own_tasks_and_conversations(
    hub_factory: HubFactory, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    async with (
        hub_factory(api_keys=f"{ALICE_KEY},{BOB_KEY}", task_listing="context") as hub,
        as_caller(hub, **bearer(ALICE_KEY)) as alice_http,
        as_caller(hub, **bearer(BOB_KEY)) as bob_http,
    ):
        alice = await hub.client("socrates", transport, http=alice_http)
        bob = await hub.client("socrates", transport, http=bob_http)
        llm.script(Reply("Alice's secret answer."))
        task = await send(alice, "My secret is 4711.")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED

        with pytest.raises(REFUSED):
            await bob.get_task(GetTaskRequest(id=task.id))
        if transport[1] == "1.0":  # ListTasks is new in 1.0
            listed = await bob.list_tasks(ListTasksRequest(context_id=task.context_id))
            assert list(listed.tasks) == []
            mine = await alice.list_tasks(ListTasksRequest(context_id=task.context_id))
            assert [t.id for t in mine.tasks] == [task.id]
        with pytest.raises(REFUSED):
            await bob.cancel_task(CancelTaskRequest(id=task.id))
        bob_streaming = await hub.client("socrates", transport, streaming=True, http=bob_http)
        with pytest.raises(REFUSED):
            async for _ in bob_streaming.subscribe(SubscribeToTaskRequest(id=task.id)):
                pass
        assert (await alice.get_task(GetTaskRequest(id=task.id))).id == task.id

        # Bob reuses Alice's contextId: a conversation of his own, with none of hers.
        llm.script(Reply("Who are you?"))
        await send(bob, "What did I say?", task.context_id)
        history = json.dumps(llm.requests[-1]["messages"])
        assert "4711" not in history
        # Alice continues hers.
        llm.script(Reply("You said 4711."))
        await send(alice, "What did I say?", task.context_id)
        assert "4711" in json.dumps(llm.requests[-1]["messages"])


async def test_anonymous_callers_of_a_public_persona_keep_todays_behaviour(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(api_keys=ALICE_KEY) as hub:
        client = await hub.client("socrates")
        llm.script(Reply("One."), Reply("Two."))
        first = await send(client, "Remember 99.")
        await send(client, "What number?", first.context_id)
        assert "99" in json.dumps(llm.requests[-1]["messages"])
        # An anonymous context id shaped like a caller's key reaches nobody's conversation.
        async with as_caller(hub, **bearer(ALICE_KEY)) as http:
            llm.script(Reply("Alice."))
            alice_task = await send(await hub.client("socrates", http=http), "Alice says 1234.")
        llm.script(Reply("Nothing."))
        await send(client, "Echo?", f"@key%3A{hash_key(ALICE_KEY)[:12]}:{alice_task.context_id}")
        assert "1234" not in json.dumps(llm.requests[-1]["messages"])


async def test_cors_is_off_unless_origins_are_allowed(hub_factory: HubFactory) -> None:
    preflight = {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,authorization",
    }
    async with hub_factory(api_keys=ALICE_KEY) as hub:
        for path in (RPC, "/api/v1/personas"):
            response = await hub.http.options(path, headers=preflight)
            assert "access-control-allow-origin" not in response.headers, path
    async with hub_factory(api_keys=ALICE_KEY, cors_origins="https://app.example") as hub:
        for path in (RPC, "/api/v1/personas"):
            allowed = await hub.http.options(path, headers=preflight)
            assert allowed.status_code == 200, path
            assert allowed.headers["access-control-allow-origin"] == "https://app.example"
            assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
            other = await hub.http.options(
                path, headers={**preflight, "Origin": "https://evil.example"}
            )
            assert "access-control-allow-origin" not in other.headers, path
        card = await hub.http.get(
            "/a2a/socrates/.well-known/agent-card.json", headers={"Origin": "https://app.example"}
        )
        assert card.headers["access-control-allow-origin"] == "https://app.example"


async def test_writes_from_a_browser_of_another_origin_are_refused(hub_factory: HubFactory) -> None:
    body = {**HERMIT, "id": "hal"}
    async with hub_factory(api_keys=ALICE_KEY, cors_origins="https://app.example") as hub:
        keyed = bearer(ALICE_KEY)
        evil = await hub.http.post(
            "/api/v1/personas", json=body, headers={**keyed, "Origin": "https://evil.example"}
        )
        assert evil.status_code == 403
        assert "PERSONA_AGENT_CORS_ORIGINS" in evil.json()["detail"]
        allowed = await hub.http.post(
            "/api/v1/personas", json=body, headers={**keyed, "Origin": "https://app.example"}
        )
        assert allowed.status_code == 201
        no_browser = await hub.http.delete("/api/v1/personas/hal", headers=keyed)
        assert no_browser.status_code == 204


async def test_the_audit_log_records_writes_tasks_and_refusals(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path
) -> None:
    log = tmp_path / "audit" / "audit.jsonl"
    async with hub_factory(
        api_keys=json.dumps(KEYS), audit_log=str(log), a2a_access="authenticated"
    ) as hub:
        keyed = {**bearer(ALICE_KEY), "X-Request-Id": "req-42"}
        body = {**HERMIT, "id": "hal"}
        assert (
            await hub.http.post("/api/v1/personas", json=body, headers=keyed)
        ).status_code == 201
        assert (
            await hub.http.post("/api/v1/personas", json=body, headers=keyed)
        ).status_code == 409
        assert (
            await hub.http.get("/api/v1/personas", headers=bearer("bad-key"))
        ).status_code == 401
        assert (
            await hub.http.post(RPC, json=rpc_body(), headers={"A2A-Version": "1.0"})
        ).status_code == 401
        llm.script(Reply("Logged."))
        async with as_caller(hub, **bearer(ALICE_KEY)) as http:
            task = await send(await hub.client("socrates", http=http), "Audit me.")
        assert (await hub.http.delete("/api/v1/personas/hal", headers=keyed)).status_code == 204
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    summary = [(e["action"], e["principal"], e["persona"], e["outcome"]) for e in events]
    assert summary == [
        ("persona.create", "key:alice", "hal", "ok"),
        ("persona.create", "key:alice", None, "PersonaExistsError"),
        ("auth.refused", "anonymous", None, "401"),
        ("auth.refused", "anonymous", "socrates", "401"),
        ("task.create", "key:alice", "socrates", "ok"),
        ("persona.delete", "key:alice", "hal", "ok"),
    ]
    assert events[0]["requestId"] == "req-42"
    assert events[4]["taskId"] == task.id
    assert all(e["time"].endswith("+00:00") for e in events)
    text = log.read_text(encoding="utf-8")
    for secret in (ALICE_KEY, "bad-key"):
        assert secret not in text
