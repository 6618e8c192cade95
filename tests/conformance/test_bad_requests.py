"""Hand-written bad requests: JSON-RPC's standard error codes, and HTTP+JSON's statuses.

JSON-RPC 2.0 (section 5.1) and A2A section 9.5: parse error -32700, invalid request
-32600, method not found -32601, invalid params -32602; the ``id`` is echoed when it could
be read, else ``null``. HTTP+JSON (A2A section 11.6): a ``google.rpc.Status`` body.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conformance.conftest import MODULE_LOOP, SPEC_ERRORS, Wire
from tests.fakes.fake_llm import FakeLLM
from tests.integration.conftest import Hub

RPC = "/a2a/socrates/"
REST = "/a2a/socrates"
V1 = {"A2A-Version": "1.0"}
JSON = {"content-type": "application/json"}

pytestmark = MODULE_LOOP


def rpc_error(response: httpx.Response) -> dict[str, Any]:
    """The error object of a JSON-RPC answer (HTTP 200, an error and no result)."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "result" not in body
    error = body["error"]
    assert isinstance(error, dict)
    assert isinstance(error["code"], int)
    assert isinstance(error["message"], str)
    assert error["message"]
    assert "Traceback" not in error["message"]
    error["id"] = body["id"]
    return error


def rest_error(response: httpx.Response, status: int) -> dict[str, Any]:
    """The ``google.rpc.Status`` error of an HTTP+JSON answer with ``status``."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/")
    error = response.json()["error"]
    assert error["code"] == status
    assert isinstance(error["message"], str)
    assert "Traceback" not in error["message"]
    return dict(error)


@pytest.mark.parametrize("version", ["1.0", "0.3"])
@pytest.mark.parametrize(
    "body",
    [
        b"{bad json",
        b'{"jsonrpc": "2.0", "id": 1,',
        b"\xff\xfe",
        pytest.param(b"\x00\x00\x00\x00\x00", id="looks-like-utf-32"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nested-too-deep"),
    ],
)
async def test_unparsable_json_is_parse_error(module_hub: Hub, body: bytes, version: str) -> None:
    headers = {**JSON, **({"A2A-Version": version} if version == "1.0" else {})}
    error = rpc_error(await module_hub.http.post(RPC, content=body, headers=headers))
    assert error["code"] == -32700
    assert error["id"] is None


@pytest.mark.parametrize(
    ("body", "request_id"),
    [
        pytest.param({"id": 1, "method": "GetTask", "params": {"id": "x"}}, 1, id="no-jsonrpc"),
        pytest.param(
            {"jsonrpc": "1.0", "id": 2, "method": "GetTask", "params": {"id": "x"}},
            2,
            id="jsonrpc-1.0",
        ),
        pytest.param({"jsonrpc": "2.0", "id": 3, "method": 7}, 3, id="method-not-a-string"),
        pytest.param({"jsonrpc": "2.0", "id": 4}, 4, id="no-method"),
        pytest.param(
            {"jsonrpc": "2.0", "id": {"a": 1}, "method": "GetTask", "params": {"id": "x"}},
            None,
            id="id-an-object",
        ),
        pytest.param(
            {"jsonrpc": "2.0", "id": True, "method": "GetTask", "params": {"id": "x"}},
            None,
            id="id-a-boolean",
        ),
        pytest.param([], None, id="empty-batch"),
        pytest.param([{"jsonrpc": "2.0", "id": 5, "method": "GetTask"}], None, id="batch"),
        pytest.param("GetTask", None, id="a-string"),
        pytest.param(42, None, id="a-number"),
        pytest.param(None, None, id="null"),
    ],
)
async def test_a_malformed_envelope_is_invalid_request(
    module_hub: Hub, body: object, request_id: object
) -> None:
    content = json.dumps(body).encode()
    error = rpc_error(await module_hub.http.post(RPC, content=content, headers={**V1, **JSON}))
    assert error["code"] == -32600
    assert error["id"] == request_id


@pytest.mark.parametrize(
    ("method", "headers"),
    [("tasks/list", {}), ("message/sendNow", {}), ("GetTasks", V1), ("", V1), ("sendMessage", V1)],
)
async def test_an_unknown_method_is_method_not_found(
    module_hub: Hub, method: str, headers: dict[str, str]
) -> None:
    body = {"jsonrpc": "2.0", "id": "req-1", "method": method, "params": {}}
    error = rpc_error(await module_hub.http.post(RPC, json=body, headers=headers))
    # An empty method name is not a method: invalid request is as right as method not found.
    assert error["code"] in ((-32601, -32600) if not method else (-32601,))
    assert error["id"] == "req-1"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("GetTask", {"id": 5}),
        ("GetTask", {"id": "x", "historyLength": "many"}),
        ("GetTask", {"id": "x", "historyLength": -1}),
        ("GetTask", [1, 2]),
        ("ListTasks", {"pageSize": -1}),
        ("ListTasks", {"pageSize": 1000}),
        ("ListTasks", {"pageToken": "not-a-token"}),
        ("ListTasks", {"status": {"nested": True}}),
        ("SendMessage", {"message": {"role": "ROLE_USER", "parts": 3}}),
        ("SendMessage", {"message": "hello"}),
        ("CancelTask", {"id": ["a"]}),
    ],
)
async def test_bad_params_of_a_1_0_method_are_invalid_params(
    module_hub: Hub, llm: FakeLLM, method: str, params: object
) -> None:
    body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
    error = rpc_error(await module_hub.http.post(RPC, json=body, headers=V1))
    assert error["code"] == -32602, error
    assert error["id"] == 9
    assert llm.requests == []


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tasks/get", {}),
        ("tasks/get", {"id": 5}),
        ("tasks/cancel", {"id": {"x": 1}}),
        ("message/send", {"message": "hello"}),
    ],
)
async def test_bad_params_of_a_0_3_method_are_invalid_params(
    module_hub: Hub, method: str, params: object
) -> None:
    body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
    error = rpc_error(await module_hub.http.post(RPC, json=body))
    assert error["code"] == -32602, error


async def test_a_notification_is_not_executed(module_hub: Hub, llm: FakeLLM) -> None:
    # A request without an id is a JSON-RPC notification; the server answers nothing
    # useful about it, but it must not crash, and the hub keeps answering.
    body = {"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "x"}}
    response = await module_hub.http.post(RPC, json=body, headers=V1)
    assert response.status_code < 500
    again = rpc_error(await module_hub.http.post(RPC, json={**body, "id": 1}, headers=V1))
    assert again["code"] == SPEC_ERRORS["TaskNotFound"].jsonrpc_code


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_http_json_unknown_task_is_404(module_hub: Hub, version: str) -> None:
    wire = Wire(module_hub.http, "socrates", ("HTTP+JSON", version))
    error = wire.error(await wire.get_task("no-such-task"))
    assert error.matches("HTTP+JSON", SPEC_ERRORS["TaskNotFound"])
    assert error.http_status == 404


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{bad json", "application/json"),
        (b'{"message": {"role": "ROLE_USER", "parts": 5}}', "application/json"),
        (b'{"message": "hi"}', "application/a2a+json"),
        (b"[1, 2, 3]", "application/json"),
        (b"hello there", "text/plain"),
        (b"<message>hi</message>", "application/xml"),
        (b"", "application/json"),
    ],
)
async def test_http_json_bad_body_is_400(
    module_hub: Hub, llm: FakeLLM, body: bytes, content_type: str
) -> None:
    response = await module_hub.http.post(
        f"{REST}/message:send", content=body, headers={**V1, "content-type": content_type}
    )
    # 415 would do for a body that is not JSON at all; the SDK answers 400 for all of them.
    status = response.status_code
    assert status in (400, 415)
    rest_error(response, status)
    assert llm.requests == []


@pytest.mark.parametrize(
    "query", [{"pageSize": "many"}, {"pageSize": "-1"}, {"pageToken": "bogus"}]
)
async def test_http_json_bad_list_query_is_400(module_hub: Hub, query: dict[str, str]) -> None:
    response = await module_hub.http.get(f"{REST}/tasks", params=query, headers=V1)
    rest_error(response, 400)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_an_unknown_status_filter_is_invalid_params(
    module_hub: Hub, llm: FakeLLM, binding: str
) -> None:
    wire = Wire(module_hub.http, "socrates", (binding, "1.0"))
    await wire.send_message([{"text": "Hello"}])
    if binding == "JSONRPC":
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"status": "DONE"}}
        error = rpc_error(await module_hub.http.post(RPC, json=body, headers=V1))
        assert error["code"] == -32602
    else:
        response = await module_hub.http.get(f"{REST}/tasks", params={"status": "DONE"}, headers=V1)
        rest_error(response, 400)


async def test_http_json_errors_are_the_spec_status_body(module_hub: Hub) -> None:
    response = await module_hub.http.get(f"{REST}/tasks/no-such-task", headers=V1)
    error = rest_error(response, 404)
    assert error["status"] == "NOT_FOUND"
    info = [d for d in error["details"] if d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"]
    assert info == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "TASK_NOT_FOUND",
            "domain": "a2a-protocol.org",
            "metadata": info[0]["metadata"],
        }
    ]
