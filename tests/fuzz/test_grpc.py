"""A2A gRPC fuzzed with Hypothesis: every method of ``lf.a2a.v1.A2AService``, and raw bytes.

Requests go through a real gRPC channel to the gRPC port of a real hub (uvicorn on
127.0.0.1, ``grpc_port=0``, the fake LLM answering, push notifications on, a webhook of
the tests' own the only host it may call): for a persona, the panel, the directory
(``_directory``), an unknown, empty or hostile tenant, with ``a2a-version`` metadata 1.0,
absent or garbage; messages of random parts (text, data nested deep, raw bytes, URLs, odd
media types), ids of tasks the hub has and of none, page sizes, history lengths, push
configs with hostile URLs; and random bytes sent to each method as its request (a generic
call, no serializer). Every call must end within :data:`~tests.fuzz.budget.DEADLINE`
(streams to their end) with OK or a status of the A2A error mapping (never UNKNOWN or
INTERNAL: bytes that are not the method's message are INVALID_ARGUMENT, naming it), and no
status detail a stack trace. Afterwards a persona answers a SendMessage over gRPC, and the
hub serves ``/healthz`` and answers over HTTP.

Examples per test: ``PERSONA_AGENT_FUZZ_EXAMPLES`` (default 20); seed
``PERSONA_AGENT_FUZZ_SEED``; the counts printed at the end of the run give gRPC status
codes as numbers (0 OK, 3 INVALID_ARGUMENT, 5 NOT_FOUND, 9 FAILED_PRECONDITION).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf import json_format, struct_pb2
from hypothesis import given, seed
from hypothesis import strategies as st

from tests.fakes.fake_llm import FakeLLM
from tests.fuzz.a2a_values import push_urls
from tests.fuzz.budget import DEADLINE, SEED, fuzz_settings
from tests.fuzz.hub import SENTINEL, FuzzHub, assert_serving, running_hub
from tests.fuzz.tally import TALLY
from tests.servers.webhook import Webhook

SERVICE = "lf.a2a.v1.A2AService"
ANSWERED = frozenset(
    {
        grpc.StatusCode.OK,
        grpc.StatusCode.INVALID_ARGUMENT,  # InvalidRequest/InvalidParams, a refusal, no tenant
        grpc.StatusCode.NOT_FOUND,  # TaskNotFound, MethodNotFound, an unknown tenant
        grpc.StatusCode.FAILED_PRECONDITION,  # not cancelable, unsupported, version
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,  # a rate limit, a message past the size limit
    }
)
"""The statuses of the A2A error mapping (the SDK's and the hub's refusals): never
UNKNOWN or INTERNAL (a server error), never DEADLINE_EXCEEDED (a hang)."""

# Values: protobuf strings are UTF-8, so no lone surrogate (the client refuses to build one).
_text = st.text(st.characters(codec="utf-8"), max_size=40)
_hostile = st.sampled_from(
    ["", " ", "\x00", "../../etc/passwd", "%2e%2e%2f", "a/b?c#d", "\u202e\u200b\ufeff",
     "<script>", "${jndi:ldap://x}", "💥" * 50, "9" * 400, "\r\nx-injected: 1"]
)  # fmt: skip
_texts = _text | _hostile
_TENANTS = ["socrates"] * 5 + ["science-panel", "_directory", "", "no-such-one", "*"]
TENANTS = (
    st.sampled_from(_TENANTS)
    .flatmap(lambda tenant: _texts if tenant == "*" else st.just(tenant))
    .filter(lambda tenant: tenant != SENTINEL)
)
"""A persona (most often), the panel, the directory, none, unknown, hostile; never the
sentinel, which must answer after the run."""
_version_values = st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=8)
VERSIONS = st.sampled_from(["1.0", "1.0", "1", "1.0.1", None, "*"]).flatmap(
    lambda version: _version_values if version == "*" else st.just(version)
)
"""``a2a-version`` metadata: served ones (five times in six), none, garbage (metadata is
printable ASCII). Hypothesis draws the branches of ``one_of`` far from evenly: a sampled
marker (``*``) picks the random branch instead."""

_json_leaf = st.none() | st.booleans() | st.floats(allow_nan=False) | _texts
_json: st.SearchStrategy[Any] = st.recursive(
    _json_leaf,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=12,
)


def _nest(depth: int) -> dict[str, Any]:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"n": value}
    return {"deep": value}


_structs = st.dictionaries(_text, _json, max_size=4) | st.builds(
    _nest, st.sampled_from([5, 12, 25])
)
"""``google.protobuf.Struct`` contents: small and wild, or nested 25 deep (three protobuf
levels each: 75 of the 100 protobuf parses; deeper is the raw-bytes test's)."""
_MEDIA_TYPES = ["text/plain", "application/json", "image/png", "", "x/../../y", "a" * 300]
_media_types = st.sampled_from(_MEDIA_TYPES) | _texts


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    json_format.ParseDict(value, struct)
    return struct


def _part(kind: str, content: Any, media_type: str, filename: str) -> Part:
    if kind == "text":
        return Part(text=content, media_type=media_type)
    if kind == "raw":
        return Part(raw=content, media_type=media_type, filename=filename)
    if kind == "url":
        return Part(url=content, media_type=media_type, filename=filename)
    data = struct_pb2.Value()
    json_format.ParseDict(content, data)
    return Part(data=data, media_type=media_type)


_parts = st.one_of(
    st.builds(_part, st.just("text"), _texts, _media_types, _texts),
    st.builds(_part, st.just("raw"), st.binary(max_size=300), _media_types, _texts),
    st.builds(_part, st.just("url"), push_urls | _texts, _media_types, _texts),
    st.builds(_part, st.just("data"), _json | _structs, _media_types, _texts),
)
_roles = st.sampled_from([Role.ROLE_USER, Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_UNSPECIFIED])
_counts = st.integers(-(2**31), 2**31 - 1) | st.sampled_from([0, 1, 5, 100])


@dataclass(frozen=True)
class GrpcPool:
    """What the gRPC hub has: its address, tasks of ``socrates``, a push config of the
    first task, and the webhook URL it may call."""

    hub: FuzzHub
    address: str
    task_ids: list[str]
    context_ids: list[str]
    config_id: str
    webhook_url: str


def _requests(pool: GrpcPool) -> dict[str, st.SearchStrategy[Any]]:
    """Each method's requests: every field mostly sensible, sometimes anything."""
    tasks = st.sampled_from(pool.task_ids) | st.uuids().map(str) | _texts
    contexts = st.sampled_from(pool.context_ids) | _texts
    urls = st.just(pool.webhook_url) | push_urls | _texts
    auth = st.builds(AuthenticationInfo, scheme=_texts, credentials=_texts)
    push = st.builds(
        TaskPushNotificationConfig,
        id=_texts, task_id=tasks, url=urls, token=_texts, authentication=auth,
    )  # fmt: skip
    message = st.builds(
        Message,
        message_id=st.uuids().map(str) | _texts,
        context_id=contexts | st.just(""),
        task_id=st.just("") | tasks,
        role=_roles,
        parts=st.lists(_parts, max_size=4),
        metadata=st.builds(_struct, _structs),
        extensions=st.lists(_texts, max_size=2),
        reference_task_ids=st.lists(tasks, max_size=2),
    )
    configuration = st.builds(
        SendMessageConfiguration,
        accepted_output_modes=st.lists(_media_types, max_size=3),
        task_push_notification_config=push,
        history_length=_counts,
        return_immediately=st.booleans(),
    ) | st.builds(SendMessageConfiguration, return_immediately=st.booleans())
    plain = st.builds(
        Message,
        message_id=st.uuids().map(str),
        role=st.just(Role.ROLE_USER),
        parts=st.lists(st.builds(Part, text=_texts.filter(str.strip)), min_size=1, max_size=2),
    )
    plain_configuration = st.builds(SendMessageConfiguration, return_immediately=st.booleans())
    send = st.builds(
        SendMessageRequest,
        tenant=TENANTS,
        message=st.integers(0, 1).flatmap(lambda n: plain if n else message),
        configuration=st.integers(0, 1).flatmap(
            lambda n: plain_configuration if n else configuration
        ),
        metadata=st.builds(_struct, _structs),
    )  # fmt: skip
    ids = {"tenant": TENANTS, "task_id": tasks, "id": st.just(pool.config_id) | _texts}
    return {
        "SendMessage": send,
        "SendStreamingMessage": send,
        "GetTask": st.builds(GetTaskRequest, tenant=TENANTS, id=tasks, history_length=_counts),
        "ListTasks": st.builds(
            ListTasksRequest,
            tenant=TENANTS,
            context_id=contexts,
            status=st.sampled_from(list(TaskState.values())),
            page_size=_counts,
            page_token=_texts,
            history_length=_counts,
            include_artifacts=st.booleans(),
        ),
        "CancelTask": st.builds(CancelTaskRequest, tenant=TENANTS, id=tasks),
        "SubscribeToTask": st.builds(SubscribeToTaskRequest, tenant=TENANTS, id=tasks),
        "CreateTaskPushNotificationConfig": st.builds(
            TaskPushNotificationConfig,
            tenant=TENANTS,
            id=_texts,
            task_id=tasks,
            url=urls,
            token=_texts,
            authentication=auth,
        ),
        "GetTaskPushNotificationConfig": st.builds(GetTaskPushNotificationConfigRequest, **ids),
        "ListTaskPushNotificationConfigs": st.builds(
            ListTaskPushNotificationConfigsRequest,
            tenant=TENANTS,
            task_id=tasks,
            page_size=_counts,
            page_token=_texts,
        ),
        "GetExtendedAgentCard": st.builds(GetExtendedAgentCardRequest, tenant=TENANTS),
        "DeleteTaskPushNotificationConfig": st.builds(
            DeleteTaskPushNotificationConfigRequest, **ids
        ),
    }


METHODS = [
    "SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask",
    "SubscribeToTask", "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs", "GetExtendedAgentCard", "DeleteTaskPushNotificationConfig",
]  # fmt: skip
STREAMING = {"SendStreamingMessage", "SubscribeToTask"}


@pytest.fixture(scope="module")
def grpc_pool(
    tmp_path_factory: pytest.TempPathFactory, fuzz_llm: FakeLLM, webhook: Webhook
) -> Iterator[GrpcPool]:
    """A hub serving gRPC on a free port, with three tasks of ``socrates`` (one still
    worked on or done, as the fake LLM goes) and a push config of the first."""
    root = tmp_path_factory.mktemp("grpc")
    allowed = f"127.0.0.1:{webhook.port}"
    with running_hub(root, fuzz_llm.base_url, push_allowed_hosts=allowed, grpc_port=0) as hub:
        address = _grpc_address(hub)
        with grpc.insecure_channel(address) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            tasks = [
                stub.SendMessage(_hello("socrates", immediately), timeout=DEADLINE).task
                for immediately in (False, True, False)
            ]
            hook = f"{webhook.url}/fuzz"
            config = TaskPushNotificationConfig(
                tenant="socrates", id="fuzz-config", task_id=tasks[0].id, url=hook, token="t"
            )
            stub.CreateTaskPushNotificationConfig(config, timeout=DEADLINE)
        yield GrpcPool(
            hub=hub,
            address=address,
            task_ids=[task.id for task in tasks],
            context_ids=[task.context_id for task in tasks],
            config_id="fuzz-config",
            webhook_url=hook,
        )


def _grpc_address(hub: FuzzHub) -> str:
    """The gRPC address a persona's card lists (``host:port``)."""
    card = httpx.get(f"{hub.url}/a2a/socrates/.well-known/agent-card.json", timeout=DEADLINE)
    assert card.status_code == 200, card.text
    for interface in card.json()["supportedInterfaces"]:
        if interface["protocolBinding"] == "GRPC":
            return str(interface["url"]).removeprefix("grpc://")
    raise AssertionError(f"the card lists no gRPC interface: {card.text}")


def _hello(tenant: str, immediately: bool = False, text: str = "hi") -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
    configuration = SendMessageConfiguration(return_immediately=immediately)
    return SendMessageRequest(tenant=tenant, message=message, configuration=configuration)


def _call(
    channel: grpc.Channel, method: str, request: bytes, version: str | None
) -> tuple[grpc.StatusCode, str]:
    """Send ``request`` (serialized, or any bytes) to ``method``, read the whole answer
    (a stream to its end), and return its status and details."""
    path = f"/{SERVICE}/{method}"
    metadata = [("a2a-version", version)] if version is not None else []
    try:
        if method in STREAMING:
            stream = channel.unary_stream(path)(request, timeout=DEADLINE, metadata=metadata)
            for _ in stream:
                pass
        else:
            channel.unary_unary(path)(request, timeout=DEADLINE, metadata=metadata)
    except grpc.RpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


def _check(method: str, code: grpc.StatusCode, details: str) -> None:
    shown = f"{method}: {code.name} {details[:500]!r}"
    assert code is not grpc.StatusCode.DEADLINE_EXCEEDED, f"a hang: {shown}"
    assert "Traceback" not in details, f"a stack trace went out: {shown}"
    assert code in ANSWERED, f"not a status of the A2A error mapping: {shown}"
    if code is not grpc.StatusCode.OK:
        assert details, f"a refusal that says nothing: {shown}"


@pytest.mark.parametrize("method", METHODS)
def test_each_method_with_random_requests(grpc_pool: GrpcPool, method: str) -> None:
    requests = _requests(grpc_pool)[method]

    @seed(SEED)
    @fuzz_settings()
    @given(request=requests, version=VERSIONS)
    def run(request: Any, version: str | None) -> None:
        with (
            TALLY.case("gRPC", method) as counted,
            grpc.insecure_channel(grpc_pool.address) as channel,
        ):
            code, details = _call(channel, method, request.SerializeToString(), version)
            counted.status = code.value[0]
            _check(method, code, details)

    run()


def _delimited(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _too_deep(depth: int) -> bytes:
    """A SendMessageRequest whose metadata Struct nests ``depth`` deep (three protobuf levels
    each: 200 is past the 100 protobuf parses), written by hand (the client's protobuf would
    not build it)."""
    struct = b""
    for _ in range(depth):
        value = _delimited(5, struct)  # Value.struct_value
        struct = _delimited(1, _delimited(1, b"n") + _delimited(2, value))  # Struct.fields
    metadata = SendMessageRequest.DESCRIPTOR.fields_by_name["metadata"].number
    return _delimited(1, b"socrates") + _delimited(metadata, struct)  # tenant, metadata


@seed(SEED)
@fuzz_settings(scale=2)
@given(
    method=st.sampled_from(METHODS),
    body=st.binary(max_size=300)
    | st.sampled_from([b"", b"\x0a" * 200, b"\xff" * 64])
    | st.builds(lambda depth: _too_deep(depth), st.sampled_from([30, 200])),
    version=VERSIONS,
)
def test_raw_bytes_to_each_method(
    grpc_pool: GrpcPool, method: str, body: bytes, version: str | None
) -> None:
    with (
        TALLY.case("gRPC", "raw bytes") as counted,
        grpc.insecure_channel(grpc_pool.address) as channel,
    ):
        code, details = _call(channel, method, body, version)
        counted.status = code.value[0]
        _check(method, code, details)


def test_the_hub_serves_on_after_the_grpc_fuzzing(grpc_pool: GrpcPool) -> None:
    text = f"Still there? {uuid.uuid4()}"
    with grpc.insecure_channel(grpc_pool.address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        answer = stub.SendMessage(_hello(SENTINEL, text=text), timeout=DEADLINE)
    assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED, answer
    said = "".join(part.text for artifact in answer.task.artifacts for part in artifact.parts)
    assert text in said, answer
    assert_serving(grpc_pool.hub.url)


def test_bytes_that_are_not_the_request_are_invalid_argument_naming_it(
    grpc_pool: GrpcPool,
) -> None:
    with grpc.insecure_channel(grpc_pool.address) as channel:
        for method, body in (
            ("SendMessage", b"\xff" * 64),
            ("SubscribeToTask", b"\xff" * 64),
            ("SendMessage", _too_deep(200)),
        ):
            code, details = _call(channel, method, body, "1.0")
            assert code is grpc.StatusCode.INVALID_ARGUMENT, (method, code, details)
            assert f"{SERVICE}/{method} is not its protobuf message" in details, details
