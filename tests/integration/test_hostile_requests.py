"""Requests the fuzzers (tests/fuzz) found answered with a 5xx or an internal error, each
now refused with the specification's error, on both bindings and both versions."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.integration.conftest import Hub

V10 = {"A2A-Version": "1.0", "Content-Type": "application/json"}
V03 = {"Content-Type": "application/json"}


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def _message_1_0(role: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": role, "parts": parts}


def _message_0_3(role: str, text: str) -> dict[str, Any]:
    parts = [{"kind": "text", "text": text}]
    return {"kind": "message", "messageId": str(uuid.uuid4()), "role": role, "parts": parts}


def _rpc(method: str, params: Any, request_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


NO_TASK_FROM = [
    ("ROLE_USER", [{"text": ""}], "Part 0 is an empty text part"),
    ("ROLE_USER", [{"text": "hi"}, {"text": ""}], "Part 1 is an empty text part"),
    ("ROLE_AGENT", [{"text": "hi"}], "message.role must be ROLE_USER"),
]
"""Messages the SDK's task builder refuses with ``ValueError`` (-32603, a 500 on HTTP+JSON)."""


async def test_a_message_no_task_can_start_from_is_invalid_params(hub: Hub) -> None:
    for role, parts, named in NO_TASK_FROM:
        await _refused(hub, _message_1_0(role, parts), named)
    for role, text in (("user", ""), ("agent", "hi")):
        message = _message_0_3(role, text)
        rpc = _rpc("message/send", {"message": message})
        reply = await hub.http.post("/a2a/socrates/", json=rpc, headers=V03)
        assert reply.json()["error"]["code"] == -32602, reply.text
        content = [{"text": text}]
        rest = {
            "messageId": message["messageId"],
            "role": f"ROLE_{role.upper()}",
            "content": content,
        }
        reply = await hub.http.post(
            "/a2a/socrates/v1/message:send", json={"message": rest}, headers=V03
        )
        assert reply.status_code == 400, reply.text


async def _refused(hub: Hub, message: dict[str, Any], named: str) -> None:
    for method in ("SendMessage", "SendStreamingMessage"):
        reply = await hub.http.post(
            "/a2a/socrates/", json=_rpc(method, {"message": message}), headers=V10
        )
        assert reply.status_code == 200, reply.text
        error = reply.json()["error"]
        assert error["code"] == -32602, reply.text
        assert named in error["message"]
    for path in ("message:send", "message:stream"):
        reply = await hub.http.post(f"/a2a/socrates/{path}", json={"message": message}, headers=V10)
        assert reply.status_code == 400, reply.text
        assert named in reply.json()["error"]["message"]


_SURROGATE_TEXT = _rpc("SendMessage", {"message": _message_1_0("ROLE_USER", [{"text": "\udc00"}])})
NOT_JSON_TEXT = {
    "an escaped lone surrogate": b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "GetTask"}',
    "the bytes of a surrogate": json.dumps(_SURROGATE_TEXT, ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    ),
    "NaN": b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": NaN}}',
    "a number past a double": b'{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", '
    b'"params": {"pageSize": 1e999}}',
}
"""JSON-RPC bodies Python's ``json`` reads and JSON has not; a lone surrogate went back
into an answer that cannot be written as UTF-8 (a 500, or a stream cut short)."""


async def test_a_body_that_is_not_json_text_is_a_parse_error(hub: Hub) -> None:
    for name, body in NOT_JSON_TEXT.items():
        for version in ("1.0", "0.3"):
            headers = {"Content-Type": "application/json", "A2A-Version": version}
            reply = await hub.http.post("/a2a/socrates/", content=body, headers=headers)
            assert reply.status_code == 200, (name, reply.text)
            answer = reply.json()
            assert answer["id"] is None, (name, answer)
            assert answer["error"]["code"] == -32700, (name, answer)
            assert answer["error"]["message"].startswith("Parse error: "), answer
    health = await hub.http.get("/healthz")
    assert health.status_code == 200


async def test_a_paired_surrogate_escape_is_the_character_it_stands_for(hub: Hub) -> None:
    message = _message_1_0("ROLE_USER", [{"text": "PLACEHOLDER"}])
    body = json.dumps(_rpc("SendMessage", {"message": message})).replace(
        "PLACEHOLDER", "\\ud83d\\ude00 hi"
    )
    reply = await hub.http.post("/a2a/socrates/", content=body.encode(), headers=V10)
    task = reply.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", reply.text
    assert "\U0001f600 hi" in json.dumps(task, ensure_ascii=False)


async def test_a_v03_history_length_that_is_not_a_count_is_a_400(hub: Hub) -> None:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "content": [{"text": "hi"}]}
    sent = await hub.http.post(
        "/a2a/socrates/v1/message:send", json={"message": message}, headers=V03
    )
    task_id = sent.json()["task"]["id"]
    for history in ("x", "1.5", "99999999999"):
        reply = await hub.http.get(
            f"/a2a/socrates/v1/tasks/{task_id}", params={"historyLength": history}
        )
        assert reply.status_code == 400, reply.text
        assert "historyLength" in reply.json()["error"]["message"]
    good = await hub.http.get(f"/a2a/socrates/v1/tasks/{task_id}", params={"historyLength": "1"})
    assert good.status_code == 200, good.text


async def test_a_v03_stream_refused_before_it_starts_is_a_400_not_a_cut_stream(hub: Hub) -> None:
    refused = ({"message": 5}, {"message": {"content": 5}}, {"metadata": [1]}, {"message": None})
    for body in refused:
        sent = await hub.http.post("/a2a/socrates/v1/message:send", json=body, headers=V03)
        streamed = await hub.http.post("/a2a/socrates/v1/message:stream", json=body, headers=V03)
        assert sent.status_code == 400, sent.text
        assert streamed.status_code == 400, streamed.text
        assert streamed.json()["error"]["message"] == sent.json()["error"]["message"]
