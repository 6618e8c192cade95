"""The one authorization decision, at every door that runs or shows a persona for a caller.

A matrix: each door × three callers — a key that names its personas (``limited``), a key
with the A2A scope only (``scoped``), and an anonymous caller — on a hub with keys whose
A2A access is public but for one persona (``vault``, ``access: authenticated``). Every
cell is what the door did, compared with what it must do; breaking the decision
(``persona_agent.security.authorization``), or any door's call of it (the router, the
personas' request handler that consultations and panel turns pass, the REST
dependencies), changes a cell and fails the test.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import GetExtendedAgentCardRequest, TaskState
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict

from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.a2a_helpers import send
from tests.integration.conftest import TRANSPORTS, Hub, HubFactory
from tests.integration.persona_yaml import persona

LIMITED_KEY = "limited-key-0123456789abcdef"
SCOPED_KEY = "scoped-key-0123456789abcdef0"
LIMITED = ["socrates", "alpha", "trio", "forum", "circle", "newcomer"]
KEYS = [
    {"name": "limited", "key": LIMITED_KEY, "personas": LIMITED},
    {"name": "scoped", "key": SCOPED_KEY, "scopes": ["a2a"]},
]
CALLERS = {
    "limited": {"X-API-Key": LIMITED_KEY},
    "scoped": {"Authorization": f"Bearer {SCOPED_KEY}"},
    "anonymous": {},
}


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def _persona(name: str, **extra: Any) -> dict[str, Any]:
    return persona(name, "authorization", **extra)


def _panel(name: str, **panel: Any) -> dict[str, Any]:
    return {"name": name, "description": f"{name}, a test panel.", "panel": panel}


@pytest.fixture
def doors_dir(personas_dir: Path) -> Path:
    files = {
        "alpha": _persona("Alpha", consult=["beta", "socrates", "vault"]),
        "beta": _persona("Beta"),
        "vault": _persona("Vault", access="authenticated"),
        "trio": _panel("Trio", mode="broadcast", members=["socrates", "albert-einstein", "vault"]),
        "circle": _panel("Circle", mode="round-table", members=["socrates", "albert-einstein"]),
        "forum": _panel("Forum", mode="moderated", members=["socrates"], moderator="beta"),
    }
    for persona_id, data in files.items():
        (personas_dir / f"{persona_id}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return personas_dir


Door = Callable[[Hub, httpx.AsyncClient, FakeLLM], Awaitable[str]]
"""What one door did for a caller: ``ok``, or why not (a status, or ``refused``)."""


def _refusal(text: str) -> str | None:
    """The status (401 or 403) an error's text names, as a number of its own: ids in the
    text (hex, random) may hold the digits."""
    statuses = set(re.findall(r"(?<![0-9A-Za-z])(401|403)(?![0-9A-Za-z])", text))
    return statuses.pop() if len(statuses) == 1 else None


async def _a2a(hub: Hub, http: httpx.AsyncClient, persona_id: str, transport: Any) -> str:
    client = await hub.client(persona_id, transport, http=http)
    try:
        task = await send(client, "Hello?")
    except (A2AClientError, A2AError) as error:
        return _refusal(str(error)) or f"error: {str(error)[:200]}"
    return "ok" if task.status.state == TaskState.TASK_STATE_COMPLETED else "not completed"


def _direct(persona_id: str, transport: Any) -> Door:
    async def door(hub: Hub, http: httpx.AsyncClient, _llm: FakeLLM) -> str:
        return await _a2a(hub, http, persona_id, transport)

    return door


def _raw_rpc(persona_id: str) -> Door:
    """JSON-RPC with no SDK client: the HTTP status the router answers."""

    async def door(hub: Hub, http: httpx.AsyncClient, _llm: FakeLLM) -> str:
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "Hi"}]}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        response = await http.post(f"/a2a/{persona_id}/", json=body, headers={"A2A-Version": "1.0"})
        if response.status_code != 200:
            return str(response.status_code)
        return "ok" if "result" in response.json() else f"error {response.json()['error']}"

    return door


def _extended_card(persona_id: str) -> Door:
    async def door(hub: Hub, http: httpx.AsyncClient, _llm: FakeLLM) -> str:
        client = await hub.client(persona_id, http=http)
        try:
            await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        except (A2AClientError, A2AError) as error:
            text = str(error)
            if status := _refusal(text):
                return status
            return "not offered" if "authenticated callers only" in text else text[:200]
        return "ok"

    return door


def _rest(method: str, path: str, **kwargs: Any) -> Door:
    async def door(_hub: Hub, http: httpx.AsyncClient, _llm: FakeLLM) -> str:
        response = await http.request(method, path, **kwargs)
        return "ok" if response.status_code < 300 else str(response.status_code)

    return door


def _rest_list(_hub: Hub, http: httpx.AsyncClient, _llm: FakeLLM) -> Awaitable[str]:
    async def listed() -> str:
        response = await http.get("/api/v1/personas", params={"limit": 500})
        if response.status_code != 200:
            return str(response.status_code)
        ids = {item["id"] for item in response.json()["items"]}
        return "own" if ids == set(LIMITED) - {"newcomer"} else f"{len(ids)} personas"

    return listed()


def _upload(persona_id: str) -> Door:
    async def door(_hub: Hub, http: httpx.AsyncClient, _llm: FakeLLM) -> str:
        content = yaml.safe_dump(_persona("Uploaded")).encode()
        response = await http.post(
            "/api/v1/personas/upload",
            params={"replace": "true"},
            files={"file": (f"{persona_id}.yaml", content)},
            headers={"X-Requested-With": "test"},
        )
        return "ok" if response.status_code < 300 else str(response.status_code)

    return door


def _consult(target: str) -> Door:
    """alpha asked to consult ``target`` (alpha's model calls the tool): ``ok`` when the
    target answered, else the refusal the model got as the tool's result."""

    async def door(hub: Hub, http: httpx.AsyncClient, llm: FakeLLM) -> str:
        llm.reset()
        llm.script_for(
            "Alpha", ToolCalls([(f"consult__{target}", {"question": "Hi?"})]), Reply("Done.")
        )
        verdict = await _a2a(hub, http, "alpha", ("JSONRPC", "1.0"))
        if verdict != "ok":
            return f"alpha: {verdict}"
        results = [
            str(m["content"])
            for request in llm.requests
            for m in request["messages"]
            if m["role"] == "tool"
        ]
        asked_target = any(
            _system_has(request, f"You are {target.title()}") for request in llm.requests
        )
        if results and "may not consult" in results[-1]:
            return "refused" if not asked_target else "refused, but asked"
        return "ok" if asked_target else f"not asked: {results}"

    return door


def _system_has(request: dict[str, Any], text: str) -> bool:
    return any(m["role"] == "system" and text in str(m["content"]) for m in request["messages"])


def _panel_door(panel_id: str) -> Door:
    """The panel asked: each member's (and a moderator's synthesis') state, ``id=state``."""

    async def door(hub: Hub, http: httpx.AsyncClient, llm: FakeLLM) -> str:
        llm.reset()
        client = await hub.client(panel_id, http=http)
        try:
            task = await send(client, "What is justice?")
        except (A2AClientError, A2AError) as error:
            return _refusal(str(error)) or str(error)
        states = []
        for part in task.status.message.parts:
            if part.HasField("data"):
                data = MessageToDict(part.data)
                if data.get("kind") == "panel":
                    turns = [*data["turns"], *([data["synthesis"]] if "synthesis" in data else [])]
                    states = [f"{turn['id']}={turn['state']}" for turn in turns]
        return " ".join(sorted(set(states)))

    return door


def _directory(_hub: Hub, http: httpx.AsyncClient, _llm: FakeLLM) -> Awaitable[str]:
    async def listed() -> str:
        message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Who?"}]}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        response = await http.post("/a2a/", json=body, headers={"A2A-Version": "1.0"})
        if response.status_code != 200:
            return str(response.status_code)
        parts = response.json()["result"]["message"]["parts"]
        (data,) = [part["data"] for part in parts if "data" in part]
        ids = {entry["id"] for entry in data["personas"]}
        if "socrates" in ids and ids <= set(LIMITED):
            return "own"
        return "all" if OTHER in ids else str(sorted(ids))

    return listed()


OTHER = "albert-einstein"
DOORS: dict[str, Door] = {
    **{f"a2a {t.id} own": _direct("socrates", t.values[0]) for t in TRANSPORTS},
    **{f"a2a {t.id} other": _direct(OTHER, t.values[0]) for t in TRANSPORTS},
    "a2a raw other": _raw_rpc(OTHER),
    "a2a vault": _direct("vault", ("JSONRPC", "1.0")),
    "extended card other": _extended_card(OTHER),
    "rest list": _rest_list,
    "rest get own": _rest("GET", "/api/v1/personas/socrates"),
    "rest get other": _rest("GET", f"/api/v1/personas/{OTHER}"),
    "rest file other": _rest("GET", f"/api/v1/personas/{OTHER}/file"),
    "rest card other": _rest("GET", f"/api/v1/personas/{OTHER}/card"),
    "rest png other": _rest("GET", f"/api/v1/personas/{OTHER}/card", params={"as": "png"}),
    "rest usage other": _rest("GET", f"/api/v1/personas/{OTHER}/usage"),
    "rest create other": _rest(
        "POST", "/api/v1/personas", json={"id": "intruder", **_persona("I")}
    ),
    "rest create own": _rest("POST", "/api/v1/personas", json={"id": "newcomer", **_persona("N")}),
    "rest replace other": _rest("PUT", "/api/v1/personas/beta", json=_persona("Beta 2")),
    "rest upload other": _upload("beta"),
    "rest delete other": _rest("DELETE", "/api/v1/personas/charles-darwin"),
    "metrics": _rest("GET", "/metrics"),
    "consult own": _consult("socrates"),
    "consult other": _consult("beta"),
    "consult vault": _consult("vault"),
    "panel broadcast": _panel_door("trio"),
    "panel round-table": _panel_door("circle"),
    "panel moderated": _panel_door("forum"),
    "directory": _directory,
    "rest memories own": _rest("GET", "/api/v1/personas/socrates/memories"),
    "rest memories other": _rest("GET", f"/api/v1/personas/{OTHER}/memories"),
    "rest memory delete other": _rest("DELETE", f"/api/v1/personas/{OTHER}/memories/1"),
    "rest memories of another caller": _rest(
        "GET", "/api/v1/personas/socrates/memories", params={"caller": "key:scoped"}
    ),
    "rest forget me": _rest("DELETE", "/api/v1/memories"),  # every persona: one's own data
    # A call on the persona (an A2A task): admitted as A2A, then no such conversation.
    "rest regenerate other": _rest(
        "POST", f"/api/v1/conversations/{OTHER}/none/regenerate", json={}
    ),
    "rest attached own": _rest("GET", "/api/v1/personas/socrates/conversation-documents"),
    "rest attached other": _rest("GET", f"/api/v1/personas/{OTHER}/conversation-documents"),
    "rest attached delete other": _rest(
        "DELETE", f"/api/v1/personas/{OTHER}/conversation-documents/some-id"
    ),
    "rest attached of another caller": _rest(
        "GET",
        "/api/v1/personas/socrates/conversation-documents",
        params={"caller": "key:scoped"},
    ),
}

ALL_OK = {door: "ok" for door in DOORS}
_PANELS_OK = {
    "panel broadcast": "albert-einstein=completed socrates=completed vault=completed",
    "panel round-table": "albert-einstein=completed socrates=completed",
    "panel moderated": "beta=completed socrates=completed",
}
EXPECTED: dict[str, dict[str, str]] = {
    "limited": {
        **ALL_OK,
        **{door: "403" for door in DOORS if door.startswith("a2a") and door.endswith("other")},
        "a2a vault": "403",
        "extended card other": "403",
        "rest list": "own",
        **{door: "403" for door in DOORS if door.startswith("rest") and door.endswith("other")},
        "metrics": "403",
        "rest memories of another caller": "403",
        "rest attached of another caller": "403",
        "consult other": "refused",
        "consult vault": "refused",
        "panel broadcast": "albert-einstein=rejected socrates=completed vault=rejected",
        "panel round-table": "albert-einstein=rejected socrates=completed",
        "panel moderated": "beta=rejected socrates=completed",
        "directory": "own",
    },
    "scoped": {
        **ALL_OK,
        **{door: "403" for door in DOORS if door.startswith("rest") or door == "metrics"},
        "rest list": "403",
        "rest regenerate other": "404",
        **_PANELS_OK,
        "directory": "all",
    },
    "anonymous": {
        **ALL_OK,
        "a2a vault": "401",
        "extended card other": "not offered",
        **{door: "401" for door in DOORS if door.startswith("rest") or door == "metrics"},
        "rest list": "401",
        "rest regenerate other": "404",
        "consult vault": "refused",
        **_PANELS_OK,
        "panel broadcast": "albert-einstein=completed socrates=completed vault=rejected",
        "directory": "all",
    },
}


@pytest.mark.parametrize("caller", list(CALLERS))
async def test_every_door_makes_the_one_authorization_decision(
    doors_dir: Path, hub_factory: HubFactory, llm: FakeLLM, caller: str
) -> None:
    async with (
        hub_factory(api_keys=json.dumps(KEYS)) as hub,
        httpx.AsyncClient(
            base_url=hub.settings.base_url, headers=CALLERS[caller], timeout=30
        ) as http,
    ):
        seen = {name: await door(hub, http, llm) for name, door in DOORS.items()}
    wrong = {
        door: f"did {seen[door]!r}, must {EXPECTED[caller][door]!r}"
        for door in DOORS
        if seen[door] != EXPECTED[caller][door]
    }
    assert not wrong, json.dumps(wrong, indent=1)


async def test_a_key_that_names_a_panel_only_gets_no_members_answer(
    doors_dir: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    """The panel, not its members, is what the key names: each member refuses, none is
    asked of the model, and the panel fails naming each."""
    keys = [{"name": "panelist", "key": LIMITED_KEY, "personas": ["trio"]}]
    async with (
        hub_factory(api_keys=json.dumps(keys)) as hub,
        httpx.AsyncClient(
            base_url=hub.settings.base_url, headers={"X-API-Key": LIMITED_KEY}, timeout=30
        ) as http,
    ):
        task = await send(await hub.client("trio", http=http), "Anyone?")
    assert task.status.state == TaskState.TASK_STATE_FAILED
    text = "".join(p.text for p in task.status.message.parts if p.HasField("text"))
    for member in ("socrates", "albert-einstein", "vault"):
        assert f"({member}) did not answer: rejected: 'key:panelist' may not use persona" in text
    assert llm.requests == []
