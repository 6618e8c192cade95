"""A new client's first mistakes are told what to do: the missing ``A2A-Version`` header of a
1.0 call, v0.3's ``"user"`` as a 1.0 message's role (sdk_fixes/hints.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLM
from tests.integration.conftest import Hub

MESSAGE = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "What is time?"}]}


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("SendMessage", {"message": MESSAGE}),
        ("SendStreamingMessage", {"message": MESSAGE}),
        ("GetTask", {"id": "no-such-task"}),
    ],
)
async def test_a_10_call_without_the_version_header_is_told_to_add_it(
    hub: Hub, llm: FakeLLM, method: str, params: dict[str, Any]
) -> None:
    reply = await hub.http.post("/a2a/socrates/", json=rpc(method, params))
    assert reply.status_code == 200
    body = reply.json()
    assert body["id"] == 7
    assert body["error"]["code"] == -32009  # VersionNotSupported, as before
    assert "`A2A-Version: 1.0`" in body["error"]["message"]
    assert method in body["error"]["message"]
    assert llm.requests == []


async def test_a_version_asked_for_keeps_the_sdks_message(hub: Hub) -> None:
    headers = {"A2A-Version": "2.0"}
    reply = await hub.http.post(
        "/a2a/socrates/", json=rpc("SendMessage", {"message": MESSAGE}), headers=headers
    )
    error = reply.json()["error"]
    assert error["code"] == -32009
    assert "'2.0' is not supported" in error["message"]


@pytest.mark.parametrize(
    ("binding", "call"),
    [
        ("JSONRPC", "SendMessage"),
        ("JSONRPC", "SendStreamingMessage"),
        ("HTTP+JSON", "message:send"),
        ("HTTP+JSON", "message:stream"),
    ],
)
async def test_a_v03_role_in_a_10_message_is_told_the_roles(
    hub: Hub, llm: FakeLLM, binding: str, call: str
) -> None:
    message = {**MESSAGE, "role": "user"}
    headers = {"A2A-Version": "1.0"}
    if binding == "JSONRPC":
        reply = await hub.http.post(
            "/a2a/socrates/", json=rpc(call, {"message": message}), headers=headers
        )
        assert reply.status_code == 200
        assert reply.json()["id"] == 7
        error = reply.json()["error"]
        assert error["code"] == -32602  # Invalid params, as before
    else:
        reply = await hub.http.post(
            f"/a2a/socrates/{call}", json={"message": message}, headers=headers
        )
        assert reply.status_code == 400
        error = reply.json()["error"]
        assert error["status"] == "INVALID_ARGUMENT"
    assert error["message"] == "message.role: 'user' is not a role: use ROLE_USER or ROLE_AGENT"
    assert llm.requests == []
