"""Canaries: a2a-sdk as shipped still behaves as each fix in ``a2a/sdk_fixes/`` assumes.

Each test runs the SDK alone (its handler and routes, no hub) and asserts the
behaviour a fix corrects. When one fails, the SDK changed: check the behaviour
against the specification and drop the fix it names (the conformance suite proves
the hub's own answers).
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext, active_task
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import ParseError
from google.protobuf.struct_pb2 import Value
from starlette.applications import Starlette


class _Echo(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        counted = Value()
        counted.struct_value.update({"calls": 12})
        await updater.complete(updater.new_agent_message([Part(text="done"), Part(data=counted)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


@pytest.fixture
async def sdk() -> AsyncIterator[httpx.AsyncClient]:
    """The SDK's own JSON-RPC and HTTP+JSON routes (v1.0 with v0.3 compatibility)."""
    card = AgentCard(
        name="canary",
        description="a2a-sdk alone",
        version="1",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="Echoes.", tags=["canary"])],
        supported_interfaces=[
            AgentInterface(url="http://sdk/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
    )
    handler = DefaultRequestHandler(
        agent_executor=_Echo(), task_store=InMemoryTaskStore(), agent_card=card
    )
    app = Starlette(
        routes=[
            *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True),
            *create_rest_routes(handler, enable_v0_3_compat=True),
        ]
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sdk") as client:
        yield client


def v03_send(message: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}


async def test_sdk_v03_jsonrpc_calls_bad_params_an_invalid_request(
    sdk: httpx.AsyncClient,
) -> None:
    """Fix: sdk_fixes/routes.py (v0.3 bad parameters are -32602, JSON-RPC 2.0 section 5.1)."""
    reply = await sdk.post("/", json=v03_send({"role": "user", "parts": "not a list"}))
    assert reply.json()["error"]["code"] == -32600


async def test_sdk_answers_an_undecodable_jsonrpc_body_with_an_internal_error(
    sdk: httpx.AsyncClient,
) -> None:
    """Fix: sdk_fixes/jsonrpc_body.py (a body that is not JSON is -32700)."""
    body = b"[" * 100_000 + b"]" * 100_000  # JSON, too deep for json.loads: RecursionError
    reply = await sdk.post("/", content=body, headers={"Content-Type": "application/json"})
    assert reply.json()["error"]["code"] == -32603


async def test_sdk_has_no_v03_rest_route_to_delete_a_push_config(
    sdk: httpx.AsyncClient,
) -> None:
    """Fix: sdk_fixes/routes.py (the v0.3 DELETE pushNotificationConfigs route)."""
    reply = await sdk.delete("/v1/tasks/t1/pushNotificationConfigs/c1")
    # The v1.0 ``/{tenant}/...`` route takes it and refuses the v0.3 call.
    assert reply.status_code == 400
    assert "VERSION_NOT_SUPPORTED" in reply.text


async def test_sdk_lists_every_task_for_an_unknown_status(sdk: httpx.AsyncClient) -> None:
    """Fix: sdk_fixes/routes.py (an unknown ListTasks status is Invalid params)."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "ListTasks",
        "params": {"status": "TASK_STATE_NO_SUCH_STATE"},
    }
    reply = await sdk.post("/", json=request, headers={"A2A-Version": "1.0"})
    assert "result" in reply.json(), reply.json()


def test_sdk_subscription_reads_the_task_after_tapping() -> None:
    """Fix: sdk_fixes/subscription.py (events applied between the tap and the read of the
    task come twice). The SDK's ``ActiveTask.subscribe`` taps its queue, then reads."""
    source = inspect.getsource(active_task.ActiveTask.subscribe)
    assert 0 < source.index(".tap(") < source.index("self.get_task()")


def test_sdk_hands_subscribers_the_reloaded_task() -> None:
    """Fix: sdk_fixes/last_event.py (a stream's last event, after another replica's cancel,
    is the whole task). The SDK's ``_process_event``, on a concurrent modification that
    left the task terminal, enqueues the reloaded task to its subscribers."""
    source = inspect.getsource(active_task.EventConsumer._process_event)
    conflict = source.index("except ConcurrentTaskModificationError")
    assert conflict < source.index("_enqueue_to_subscribers(task, task)")


async def test_sdk_v03_rest_decodes_inline_file_bytes_twice(sdk: httpx.AsyncClient) -> None:
    """Fix: sdk_fixes/file_bytes.py (v0.3 inline file bytes arrive intact)."""
    file = {"file": {"fileWithBytes": "aGVsbG8h", "mimeType": "text/plain"}}
    message = {"role": "ROLE_USER", "messageId": "m1", "content": [file]}
    reply = await sdk.post("/v1/message:send", json={"message": message})
    assert reply.status_code >= 500, reply.text


async def test_sdk_v03_rest_starts_a_stream_for_a_finished_task(sdk: httpx.AsyncClient) -> None:
    """Fix: sdk_fixes/routes.py (subscribing to a finished task is a 400 UnsupportedOperation,
    not a broken event stream)."""
    message = {"role": "ROLE_USER", "messageId": "m2", "content": [{"text": "hi"}]}
    sent = await sdk.post("/v1/message:send", json={"message": message})
    task_id = sent.json()["task"]["id"]
    # The SDK starts the event stream, then the check fails inside it: the error escapes
    # the app instead of becoming an answer.
    with pytest.raises(UnsupportedOperationError, match="terminal state"):
        await sdk.post(f"/v1/tasks/{task_id}:subscribe")


V10 = {"A2A-Version": "1.0"}


def v10_send(message: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def test_sdk_version_error_does_not_name_the_header(sdk: httpx.AsyncClient) -> None:
    """Fix: sdk_fixes/hints.py (a 1.0 call without ``A2A-Version`` is told to add it)."""
    message = {"role": "ROLE_USER", "messageId": "m3", "parts": [{"text": "hi"}]}
    error = (await sdk.post("/", json=v10_send(message))).json()["error"]
    assert error["code"] == -32009
    assert "'0.3' is not supported" in error["message"]
    assert "A2A-Version" not in error["message"]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_sdk_calls_an_unknown_role_missing(sdk: httpx.AsyncClient, binding: str) -> None:
    """Fix: sdk_fixes/hints.py (a 1.0 message's unknown role is named, with the roles)."""
    message = {"role": "user", "messageId": "m4", "parts": [{"text": "hi"}]}
    headers = {"A2A-Version": "1.0"}
    if binding == "JSONRPC":
        error = (await sdk.post("/", json=v10_send(message), headers=headers)).json()["error"]
        assert error["code"] == -32602
    else:
        reply = await sdk.post("/message:send", json={"message": message}, headers=headers)
        assert reply.status_code == 400
        error = reply.json()["error"]
    assert "message.role" in str(error)
    assert "Field is required." in str(error)
    assert "ROLE_USER" not in str(error)


async def test_sdk_writes_a_data_parts_whole_numbers_as_floats(sdk: httpx.AsyncClient) -> None:
    """Fix: sdk_fixes/numbers.py (the cost-v1 counts are JSON integers on the wire)."""
    message = {"role": "ROLE_USER", "messageId": "m5", "parts": [{"text": "hi"}]}
    reply = await sdk.post("/message:send", json={"message": message}, headers=V10)
    assert '"calls":12.0' in reply.text.replace(" ", ""), reply.text
    jsonrpc = await sdk.post("/", json=v10_send({**message, "messageId": "m6"}), headers=V10)
    assert '"calls":12.0' in jsonrpc.text.replace(" ", ""), jsonrpc.text


def test_sdk_checks_required_fields_in_every_value_of_a_data_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fix: sdk_fixes/validation.py (the SDK walks each value of a data part in Python to
    check required fields that no value can have: seconds of the event loop per message)."""
    from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest
    from a2a.utils import proto_utils

    checked = 0
    check = proto_utils._validate_proto_required_fields_internal

    def counted(message: object) -> object:
        nonlocal checked
        checked += 1
        return check(message)  # type: ignore[arg-type]

    monkeypatch.setattr(proto_utils, "_validate_proto_required_fields_internal", counted)
    numbers = Value()
    numbers.list_value.values.extend(Value(number_value=n) for n in range(1000))
    message = Message(message_id="m", role=Role.ROLE_USER, parts=[Part(data=numbers)])
    proto_utils.validate_proto_required_fields(SendMessageRequest(message=message))
    assert checked > 1000
    # And the handler's methods check through a decorator the fix steps past.
    for method in (
        DefaultRequestHandler.on_message_send,
        DefaultRequestHandler.on_message_send_stream,
    ):
        layers = []
        layer: object = method
        while layer is not None:
            layers.append(getattr(layer, "__code__", None))
            layer = getattr(layer, "__wrapped__", None)
        assert any(
            code is not None and code.co_qualname.startswith("validate_request_params.")
            for code in layers
        )


async def test_sdk_echoes_a_lone_surrogate_into_an_answer_it_cannot_write(
    sdk: httpx.AsyncClient,
) -> None:
    """Fix: sdk_fixes/jsonrpc_body.py (a lone surrogate is not JSON text: -32700)."""
    body = b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "GetTask", "params": {"id": "t"}}'
    # The SDK answers TaskNotFound with the id echoed: not UTF-8, so the app raises.
    with pytest.raises(UnicodeEncodeError):
        await sdk.post("/", content=body, headers={**V10, "Content-Type": "application/json"})


async def test_sdk_takes_nan_for_a_json_number(sdk: httpx.AsyncClient) -> None:
    """Fix: sdk_fixes/jsonrpc_body.py (``NaN`` is not JSON text: -32700)."""
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"historyLength": NaN}}'
    reply = await sdk.post("/", content=body, headers={**V10, "Content-Type": "application/json"})
    assert reply.json()["error"]["code"] != -32700, reply.text


@pytest.mark.parametrize(
    ("role", "part"), [("ROLE_USER", {"text": ""}), ("ROLE_AGENT", {"text": "hi"})]
)
async def test_sdk_fails_a_message_its_task_builder_refuses_as_internal(
    sdk: httpx.AsyncClient, role: str, part: dict[str, str]
) -> None:
    """Fix: a2a/input.py check_parts (an empty text part, or a message that is not the
    user's, is Invalid params before a task is made; ``new_task_from_user_message``
    raises ``ValueError``: -32603)."""
    message = {"role": role, "messageId": f"m-{role}", "parts": [part]}
    reply = await sdk.post("/", json=v10_send(message), headers=V10)
    assert reply.json()["error"]["code"] == -32603, reply.text


async def test_sdk_v03_rest_answers_a_bad_history_length_with_a_500(
    sdk: httpx.AsyncClient,
) -> None:
    """Fix: sdk_fixes/v03_requests.py (a ``historyLength`` that is not a count is a 400)."""
    reply = await sdk.get("/v1/tasks/t1", params={"historyLength": "x"})
    assert reply.status_code == 500, reply.text


async def test_sdk_v03_rest_cuts_a_stream_it_refuses(sdk: httpx.AsyncClient) -> None:
    """Fix: sdk_fixes/v03_requests.py (a stream refused before its first event is a 4xx)."""
    # The SDK answers 200 and starts the stream, then parsing fails inside it: the error
    # escapes the app instead of becoming an answer.
    with pytest.raises(ParseError):
        await sdk.post("/v1/message:stream", json={"message": 5})


_WRAPPED_WITH_TRACING_OFF = """
from a2a.server.events.event_queue_v2 import EventQueueSource
from a2a.server.tasks import task_manager
print(EventQueueSource.enqueue_event.__code__.co_name)
print(task_manager.append_artifact_to_task.__code__.co_name)
"""


def test_sdk_wraps_its_methods_with_tracing_off() -> None:
    """Fix: sdk_fixes/untraced.py (the SDK's no-op tracing wrappers put aside when its
    tracing is off). Run apart: the hub's app unwraps them for the whole process."""
    environment = {**os.environ, "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false"}
    shown = subprocess.run(
        [sys.executable, "-c", _WRAPPED_WITH_TRACING_OFF],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.split() == ["async_wrapper", "sync_wrapper"]
