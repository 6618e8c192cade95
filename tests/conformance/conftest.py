"""Fixtures and hand-written wire requests for the A2A conformance suite.

The hub, the fake LLM and the MCP servers are the integration suite's
(tests/integration/conftest.py). Here ``hub`` is a hub without MCP servers,
which starts four times faster; tests of tools start their own with
``hub_factory()``. ``module_hub`` is one such hub shared by a whole module
(whose tests then run in the module's event loop: ``MODULE_LOOP``), for
modules of many short tests that only make tasks of their own. The persona
directory adds ``tinkerer``, a test persona that may use the crashing and
sleeping tools of the test MCP server.

:class:`Wire` speaks each binding and protocol version by hand (httpx, no SDK
client), so tests see exactly what a client of that version gets: the status
code, the JSON-RPC error code, the ``google.rpc.ErrorInfo`` reason.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml
from a2a.types.a2a_pb2 import TaskState

from persona_agent.api.app import create_app
from tests.fakes.fake_llm import FakeLLM
from tests.integration.conftest import (  # noqa: F401
    BUNDLED,
    HERMIT,
    TOOLSMITH,
    TRANSPORTS,
    Hub,
    HubFactory,
    fake_llm_server,
    hub_factory,
    llm,
    loopback_socket,
    mcp_config_file,
    mcp_http_url,
    mcp_servers_file,
    serving,
    settings_of,
)

__all__ = [
    "ALL_TRANSPORTS",
    "ALL_V1_TRANSPORTS",
    "GRPC",
    "MODULE_LOOP",
    "SPEC_ERRORS",
    "TERMINAL_NAMES",
    "TERMINAL_STATES",
    "V03_REST",
    "V1_TRANSPORTS",
    "SpecError",
    "Wire",
    "WireError",
    "data_part",
    "file_part",
    "text_part",
    "wait_until",
]

TINKERER = {
    "name": "Tim the Tinkerer",
    "description": "A test persona whose tools misbehave.",
    "personal_background": "Tim breaks things to see how they fail.",
    "language_style": {"tone": "curious"},
    "knowledge_domains": {"Failure": ["crashes", "timeouts"]},
    "tools": {"allow": ["local__crash", "local__pid", "local__sleep", "local__add"]},
}

MODULE_LOOP = pytest.mark.asyncio(loop_scope="module")
"""``pytestmark`` of a module whose tests use ``module_hub``."""

V03_REST = ("HTTP+JSON", "0.3")
GRPC = pytest.param(("GRPC", "1.0"), id="GRPC-1.0")  # no 0.3 gRPC: docs/a2a.md#grpc
ALL_TRANSPORTS = [*TRANSPORTS, GRPC]
V1_TRANSPORTS = [p for p in TRANSPORTS if p.values[0] == ("JSONRPC", "1.0")] + [
    p for p in TRANSPORTS if p.values[0] == ("HTTP+JSON", "1.0")
]
"""The HTTP transports of A2A 1.0 (ListTasks is new in 1.0)."""
ALL_V1_TRANSPORTS = [*V1_TRANSPORTS, GRPC]

TERMINAL_NAMES = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
}
TERMINAL_STATES = {TaskState.Value(name) for name in TERMINAL_NAMES}


@dataclass(frozen=True)
class SpecError:
    """One row of the specification's error table (A2A 1.0, section 5.4)."""

    jsonrpc_code: int
    http_status: int
    reason: str
    grpc_status: str  # A2A 1.0.1's (1.0.0 said UNIMPLEMENTED for push, operation, version)


SPEC_ERRORS = {
    "TaskNotFound": SpecError(-32001, 404, "TASK_NOT_FOUND", "NOT_FOUND"),
    "TaskNotCancelable": SpecError(-32002, 400, "TASK_NOT_CANCELABLE", "FAILED_PRECONDITION"),
    "PushNotificationNotSupported": SpecError(
        -32003, 400, "PUSH_NOTIFICATION_NOT_SUPPORTED", "FAILED_PRECONDITION"
    ),
    "UnsupportedOperation": SpecError(-32004, 400, "UNSUPPORTED_OPERATION", "FAILED_PRECONDITION"),
    "ContentTypeNotSupported": SpecError(
        -32005, 400, "CONTENT_TYPE_NOT_SUPPORTED", "INVALID_ARGUMENT"
    ),
    "ExtendedAgentCardNotConfigured": SpecError(
        -32007, 400, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", "FAILED_PRECONDITION"
    ),
    "VersionNotSupported": SpecError(-32009, 400, "VERSION_NOT_SUPPORTED", "FAILED_PRECONDITION"),
}


def _fill_personas_dir(directory: Path) -> Path:
    shutil.copytree(BUNDLED, directory)
    for persona_id, data in (("toolsmith", TOOLSMITH), ("hermit", HERMIT), ("tinkerer", TINKERER)):
        (directory / f"{persona_id}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return directory


@pytest.fixture
def personas_dir(tmp_path: Path) -> Path:
    """The bundled personas, the integration suite's test personas, and ``tinkerer``."""
    return _fill_personas_dir(tmp_path / "personas")


@pytest.fixture
async def hub(hub_factory: HubFactory) -> AsyncIterator[Hub]:  # noqa: F811
    """A hub without MCP servers (tests of tools use ``hub_factory()``)."""
    async with hub_factory(mcp_config=None, grpc_port=0) as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_hub(
    tmp_path_factory: pytest.TempPathFactory,
    fake_llm_server: FakeLLM,  # noqa: F811
) -> AsyncIterator[Hub]:
    """One hub without MCP servers for a whole module (see ``MODULE_LOOP``)."""
    root = tmp_path_factory.mktemp("module-hub")
    sock, base_url = loopback_socket()
    settings = settings_of(
        personas_dir=_fill_personas_dir(root / "personas"),
        data_dir=root / "data",
        public_base_url=base_url,
        llm_base_url=fake_llm_server.base_url,
        llm_api_key="test-key",
        llm_max_retries=0,
        llm_timeout=10,
        mcp_config=None,
        watch_personas=False,
        # The protocol's ListTasks (filters, pages) over every task of a persona; the
        # default, which lists only a named context's tasks, is tests/security's.
        task_listing="all",
        # The methods of a hub without push notifications (the errors the spec gives
        # them); push notifications on are tested in tests/integration/test_push.py.
        push_notifications=False,
        grpc_port=0,  # the third binding (tests/conformance/grpc_wire.py), on a free port
    )
    app = create_app(settings)
    async with (
        serving(app, sock),
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield Hub(app, http, settings)


async def wait_until(
    what: str, condition: Callable[[], Awaitable[bool]], *, seconds: float = 60.0
) -> None:
    """Poll ``await condition()`` (a public API) until it is true, at most ``seconds`` (a
    safety bound against a hang, not a timing)."""
    try:
        async with asyncio.timeout(seconds):
            while True:
                if await condition():
                    return
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"waited {seconds}s for {what}") from None


@dataclass(frozen=True)
class WireError:
    """An error as the wire shows it: the HTTP status and, by binding, the
    JSON-RPC code or the ErrorInfo reason of a google.rpc.Status body."""

    http_status: int
    code: int | None
    reason: str | None
    message: str
    grpc_status: str | None = None
    """gRPC: the status code's name (``http_status`` is then 0)."""

    def matches(self, binding: str, expected: SpecError) -> bool:
        if binding == "GRPC":
            return self.grpc_status == expected.grpc_status and self.reason == expected.reason
        if binding == "JSONRPC":
            return self.http_status == 200 and self.code == expected.jsonrpc_code
        return self.http_status == expected.http_status and self.reason == expected.reason


class Wire:
    """Hand-written A2A requests to one persona, in one binding and protocol version.

    Message parts are given in the 1.0 JSON form (``{"text": ...}``,
    ``{"data": ...}``, ``{"raw": <base64>, "mediaType": ...}``,
    ``{"url": ..., "mediaType": ...}``) and translated for 0.3.
    """

    def __init__(self, http: httpx.AsyncClient, persona_id: str, transport: tuple[str, str]):
        self.http = http
        self.persona_id = persona_id
        self.binding, self.version = transport
        self.root = f"/a2a/{persona_id}"
        self.headers = {"A2A-Version": "1.0"} if self.version == "1.0" else {}

    # -- operations ----------------------------------------------------------------

    async def send_message(
        self,
        parts: list[dict[str, Any]],
        *,
        task_id: str | None = None,
        context_id: str | None = None,
        return_immediately: bool = False,
    ) -> httpx.Response:
        message = self._message(parts, task_id, context_id)
        params: dict[str, Any] = {"message": message}
        if return_immediately:
            key = "returnImmediately" if self.version == "1.0" else "blocking"
            params["configuration"] = {key: self.version == "1.0"}
        return await self._call("SendMessage", params, "POST", "/message:send", body=params)

    async def send_streaming_message(
        self, parts: list[dict[str, Any]], *, context_id: str | None = None
    ) -> httpx.Response:
        """The whole SSE answer (see :meth:`events`), or an error."""
        params = {"message": self._message(parts, None, context_id)}
        return await self._call(
            "SendStreamingMessage", params, "POST", "/message:stream", body=params
        )

    async def get_task(self, task_id: str, history_length: int | None = None) -> httpx.Response:
        params: dict[str, Any] = {"id": task_id}
        query = {}
        if history_length is not None:
            params["historyLength"] = history_length
            query["historyLength"] = str(history_length)
        return await self._call("GetTask", params, "GET", f"/tasks/{task_id}", query=query)

    async def cancel_task(self, task_id: str) -> httpx.Response:
        return await self._call("CancelTask", {"id": task_id}, "POST", f"/tasks/{task_id}:cancel")

    async def subscribe(self, task_id: str) -> httpx.Response:
        """The answer to a subscription: an error, or an SSE stream read to its end."""
        return await self._call(
            "SubscribeToTask", {"id": task_id}, "POST", f"/tasks/{task_id}:subscribe"
        )

    async def extended_card(self) -> httpx.Response:
        path = "/extendedAgentCard" if self.version == "1.0" else "/card"
        return await self._call("GetExtendedAgentCard", {}, "GET", path)

    async def push_config(self, operation: str, task_id: str) -> httpx.Response:
        """``operation``: Create, Get, List or Delete."""
        url = "https://client.example.com/hook"
        base = f"/tasks/{task_id}/pushNotificationConfigs"
        if operation == "Create":
            if self.version == "1.0":
                params: dict[str, Any] = {"taskId": task_id, "url": url}
                body: dict[str, Any] = {"url": url}
            else:
                params = {"taskId": task_id, "pushNotificationConfig": {"url": url}}
                body = {
                    "parent": f"tasks/{task_id}",
                    "configId": "config-1",
                    "config": {
                        "name": f"tasks/{task_id}/pushNotificationConfigs/config-1",
                        "pushNotificationConfig": {"url": url},
                    },
                }
            return await self._call(
                "CreateTaskPushNotificationConfig", params, "POST", base, body=body
            )
        if operation == "Get":
            params = (
                {"taskId": task_id, "id": "config-1"}
                if self.version == "1.0"
                else {"id": task_id, "pushNotificationConfigId": "config-1"}
            )
            return await self._call(
                "GetTaskPushNotificationConfig", params, "GET", f"{base}/config-1"
            )
        if operation == "List":
            params = {"taskId": task_id} if self.version == "1.0" else {"id": task_id}
            return await self._call("ListTaskPushNotificationConfigs", params, "GET", base)
        params = (
            {"taskId": task_id, "id": "config-1"}
            if self.version == "1.0"
            else {"id": task_id, "pushNotificationConfigId": "config-1"}
        )
        return await self._call(
            "DeleteTaskPushNotificationConfig", params, "DELETE", f"{base}/config-1"
        )

    # -- reading answers -------------------------------------------------------------

    def error(self, response: httpx.Response) -> WireError:
        """The error of an answer (of a stream: its first event); AssertionError if none."""
        body = self.events(response)[0] if _is_stream(response) else response.json()
        assert isinstance(body, dict), body
        if self.binding == "JSONRPC":
            assert body.get("jsonrpc") == "2.0", body
            assert "error" in body, body
            assert "result" not in body, body
            error = body["error"]
            return WireError(response.status_code, error["code"], None, error.get("message", ""))
        assert response.status_code >= 400, body
        error = body["error"]
        reasons = [
            d.get("reason")
            for d in error.get("details", [])
            if d.get("@type") == "type.googleapis.com/google.rpc.ErrorInfo"
        ]
        assert error["code"] == response.status_code, body
        return WireError(
            response.status_code, None, reasons[0] if reasons else None, error["message"]
        )

    @staticmethod
    def events(response: httpx.Response) -> list[dict[str, Any]]:
        """The JSON ``data`` of each event of an SSE answer."""
        assert _is_stream(response), response.headers
        events = []
        for line in response.text.splitlines():
            if line.startswith("data:"):
                event = json.loads(line.removeprefix("data:"))
                assert isinstance(event, dict), event
                events.append(event)
        return events

    def result(self, response: httpx.Response) -> dict[str, Any]:
        """The result of a successful answer, in the JSON of its protocol version."""
        assert response.status_code == 200, response.text
        body = response.json()
        if self.binding == "JSONRPC":
            assert "error" not in body, body
            result = body["result"]
            assert isinstance(result, dict)
            return result
        assert isinstance(body, dict)
        return body

    def task(self, response: httpx.Response) -> dict[str, Any]:
        """The task of a SendMessage or GetTask answer (either version)."""
        result = self.result(response)
        if "task" in result:
            task = result["task"]
            assert isinstance(task, dict)
            return task
        return result

    @staticmethod
    def state(task: dict[str, Any]) -> str:
        """The task's state as a 1.0 enum name, whichever version sent it."""
        state = str(task["status"]["state"])
        if state.startswith("TASK_STATE_"):
            return state
        return "TASK_STATE_" + state.upper().replace("-", "_")

    # -- the wire -----------------------------------------------------------------------

    def _message(
        self, parts: list[dict[str, Any]], task_id: str | None, context_id: str | None
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"messageId": str(uuid.uuid4())}
        if self.version == "1.0":
            message |= {"role": "ROLE_USER", "parts": parts}
        elif self.binding == "JSONRPC":
            message |= {"kind": "message", "role": "user", "parts": [_part_v03(p) for p in parts]}
        else:
            message |= {"role": "ROLE_USER", "content": [_part_v03_proto(p) for p in parts]}
        if task_id:
            message["taskId"] = task_id
        if context_id:
            message["contextId"] = context_id
        return message

    async def _call(
        self,
        method: str,
        params: dict[str, Any],
        http_method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        query: dict[str, str] | None = None,
    ) -> httpx.Response:
        if self.binding == "JSONRPC":
            name = method if self.version == "1.0" else _V03_METHODS[method]
            envelope = {"jsonrpc": "2.0", "id": 1, "method": name, "params": params}
            request = self.http.build_request(
                "POST", f"{self.root}/", json=envelope, headers=self.headers
            )
        else:
            prefix = "" if self.version == "1.0" else "/v1"
            request = self.http.build_request(
                http_method,
                f"{self.root}{prefix}{path}",
                json=body if http_method == "POST" else None,
                params=query,
                headers=self.headers,
            )
        return await self.http.send(request)


def _is_stream(response: httpx.Response) -> bool:
    return str(response.headers.get("content-type", "")).startswith("text/event-stream")


_V03_METHODS = {
    "SendMessage": "message/send",
    "SendStreamingMessage": "message/stream",
    "GetTask": "tasks/get",
    "CancelTask": "tasks/cancel",
    "SubscribeToTask": "tasks/resubscribe",
    "GetExtendedAgentCard": "agent/getAuthenticatedExtendedCard",
    "CreateTaskPushNotificationConfig": "tasks/pushNotificationConfig/set",
    "GetTaskPushNotificationConfig": "tasks/pushNotificationConfig/get",
    "ListTaskPushNotificationConfigs": "tasks/pushNotificationConfig/list",
    "DeleteTaskPushNotificationConfig": "tasks/pushNotificationConfig/delete",
}


def _part_v03(part: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 JSON part as a 0.3 JSON-RPC part."""
    if "text" in part:
        return {"kind": "text", "text": part["text"]}
    if "data" in part:
        return {"kind": "data", "data": part["data"]}
    file: dict[str, Any] = {}
    if "raw" in part:
        file["bytes"] = part["raw"]
    if "url" in part:
        file["uri"] = part["url"]
    if "mediaType" in part:
        file["mimeType"] = part["mediaType"]
    if "filename" in part:
        file["name"] = part["filename"]
    return {"kind": "file", "file": file}


def _part_v03_proto(part: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 JSON part as a 0.3 HTTP+JSON (proto JSON) part."""
    if "text" in part:
        return {"text": part["text"]}
    if "data" in part:
        return {"data": {"data": part["data"]}}
    file: dict[str, Any] = {}
    if "raw" in part:
        file["fileWithBytes"] = part["raw"]
    if "url" in part:
        file["fileWithUri"] = part["url"]
    if "mediaType" in part:
        file["mimeType"] = part["mediaType"]
    if "filename" in part:
        file["name"] = part["filename"]
    return {"file": file}


def text_part(text: str) -> dict[str, Any]:
    return {"text": text}


def file_part(content: bytes, media_type: str, filename: str = "") -> dict[str, Any]:
    part: dict[str, Any] = {"raw": base64.b64encode(content).decode(), "mediaType": media_type}
    if filename:
        part["filename"] = filename
    return part


def data_part(value: dict[str, Any]) -> dict[str, Any]:
    return {"data": json.loads(json.dumps(value))}
