"""The hub's gRPC server with the real a2a-sdk client and the SDK's generated stub: the
card's gRPC interface, a send, streamed tokens, a cancel that stops the model, push configs
and the extended card, the directory at its tenant, an unknown persona, API keys and OIDC
tokens in the metadata (refused without, served with), rate limits and the metrics' binding
label, and a taken port at start-up (no tenant and other versions: test_grpc_refusals.py).
One hub a module (a key and an OIDC issuer configured: anonymous callers are still served
by the personas that allow them)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
import pytest_asyncio
from a2a.client import Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import A2AError

from persona_agent.api.app import create_app
from persona_agent.errors import ConfigError
from tests.conformance.conftest import _fill_personas_dir
from tests.fakes.fake_llm import FakeLLM, Hang, Reply
from tests.integration.a2a_helpers import answer_text, user_message
from tests.integration.conftest import (  # noqa: F401
    Hub,
    fake_llm_server,
    llm,
    loopback_socket,
    serving,
    settings_of,
)
from tests.servers.oidc_issuer import AUDIENCE, OidcIssuer

pytestmark = pytest.mark.asyncio(loop_scope="module")

KEY = "grpc-key-0123456789abcdef"
SECRET_PERSONA = "hermit"
LIMITED_PERSONA = "limited-hermit"


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    with OidcIssuer() as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def grpc_hub(
    tmp_path_factory: pytest.TempPathFactory,
    fake_llm_server: FakeLLM,  # noqa: F811
    issuer: OidcIssuer,
) -> AsyncIterator[Hub]:
    """A hub with gRPC on a free port, one API key and an OIDC issuer; ``hermit`` needs
    a credential."""
    root = tmp_path_factory.mktemp("grpc-hub")
    personas = _fill_personas_dir(root / "personas")
    hermit = personas / f"{SECRET_PERSONA}.yaml"
    hermit.write_text(hermit.read_text() + "access: authenticated\n", encoding="utf-8")
    limited = personas / f"{LIMITED_PERSONA}.yaml"  # a copy of hermit, two requests a minute
    limited.write_text(hermit.read_text() + "limits: {requests_per_minute: 2}\n", encoding="utf-8")
    sock, base_url = loopback_socket()
    settings = settings_of(
        personas_dir=personas,
        data_dir=root / "data",
        public_base_url=base_url,
        llm_base_url=fake_llm_server.base_url,
        llm_api_key="test-key",
        llm_max_retries=0,
        llm_timeout=10,
        mcp_config=None,
        watch_personas=False,
        task_listing="all",
        api_keys=json.dumps([{"name": "grpc-caller", "key": KEY}]),
        grpc_port=0,
        shutdown_grace_seconds=2,
        push_allowed_hosts="127.0.0.1",
        oidc_issuer=issuer.issuer,
        oidc_audience=AUDIENCE,
    )
    app = create_app(settings)
    async with (
        serving(app, sock),
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield Hub(app, http, settings)


def grpc_interface(card: AgentCard) -> Any:
    found = [i for i in card.supported_interfaces if i.protocol_binding == "GRPC"]
    assert len(found) == 1, card.supported_interfaces
    return found[0]


async def grpc_client(hub: Hub, persona_id: str, *, streaming: bool = False) -> Client:
    """The SDK's client on the card's gRPC interface alone."""
    card = await hub.card(persona_id)
    interface = grpc_interface(card)
    del card.supported_interfaces[:]
    card.supported_interfaces.append(interface)
    config = ClientConfig(
        grpc_channel_factory=grpc.aio.insecure_channel,
        supported_protocol_bindings=["GRPC"],
        streaming=streaming,
    )
    return ClientFactory(config).create(card)


def with_key(key: str = KEY) -> ClientCallContext:
    return ClientCallContext(service_parameters={"x-api-key": key})


async def test_cards_list_grpc_after_the_http_interfaces(grpc_hub: Hub) -> None:
    card = await grpc_hub.card("socrates")
    bindings = [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces]
    assert bindings[:3] == [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("GRPC", "1.0")]
    interface = grpc_interface(card)
    assert interface.tenant == "socrates"
    host, _, port = interface.url.rpartition(":")
    assert host == "127.0.0.1"
    assert int(port) > 0
    # The AI Catalog carries the same card, the real port included.
    catalog = (await grpc_hub.http.get("/.well-known/ai-catalog.json")).json()
    (entry,) = [e for e in catalog["entries"] if e["data"]["name"] == card.name]
    listed = [i for i in entry["data"]["supportedInterfaces"] if i["protocolBinding"] == "GRPC"]
    assert listed == [
        {
            "url": interface.url,
            "protocolBinding": "GRPC",
            "protocolVersion": "1.0",
            "tenant": "socrates",
        }
    ]


async def test_send_and_get_over_grpc(grpc_hub: Hub, llm: FakeLLM) -> None:  # noqa: F811
    llm.script(Reply("Know thyself."))
    client = await grpc_client(grpc_hub, "socrates")
    try:
        responses = [r async for r in client.send_message(user_message("Who am I?"))]
        task = responses[0].task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer_text(task) == "Know thyself."
        again = await client.get_task(GetTaskRequest(id=task.id))
        assert again.id == task.id
        assert answer_text(again) == "Know thyself."
    finally:
        await client.close()


async def test_tokens_stream_over_grpc(grpc_hub: Hub, llm: FakeLLM) -> None:  # noqa: F811
    llm.script(Reply("one two three four", own_writes=True))
    client = await grpc_client(grpc_hub, "socrates", streaming=True)
    try:
        async with asyncio.timeout(30):
            events = [r async for r in client.send_message(user_message("Count"))]
    finally:
        await client.close()
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert len(chunks) >= 2, events  # tokens arrive as they come, not as one answer
    text = "".join(p.text for c in chunks for p in c.artifact.parts)
    assert text == "one two three four"
    last = events[-1]
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_cancel_over_grpc_stops_the_model(grpc_hub: Hub, llm: FakeLLM) -> None:  # noqa: F811
    llm.script(Hang())
    disconnects = llm.disconnects
    client = await grpc_client(grpc_hub, "socrates")
    try:
        request = user_message("Think forever")
        request.configuration.return_immediately = True
        responses = [r async for r in client.send_message(request)]
        task_id = responses[0].task.id
        await asyncio.to_thread(llm.wait_requests, 1)  # the model was called
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        await asyncio.to_thread(llm.wait_disconnect)
        assert llm.disconnects > disconnects
    finally:
        await client.close()


async def test_api_key_in_metadata(grpc_hub: Hub, llm: FakeLLM) -> None:  # noqa: F811
    """``hermit`` needs a key: refused without (UNAUTHENTICATED), with a wrong one, and
    served with the key as ``x-api-key`` metadata or ``authorization: Bearer``."""
    llm.script(Reply("Go away."), Reply("Go away again."))
    client = await grpc_client(grpc_hub, SECRET_PERSONA)
    try:
        with pytest.raises(A2AError):
            [r async for r in client.send_message(user_message("Hello?"))]
        with pytest.raises(A2AError):
            [r async for r in client.send_message(user_message("Hi"), context=with_key("nope"))]
        served = [r async for r in client.send_message(user_message("Hi"), context=with_key())]
        assert answer_text(served[0].task) == "Go away."
    finally:
        await client.close()
    interface = grpc_interface(await grpc_hub.card(SECRET_PERSONA))
    async with grpc.aio.insecure_channel(interface.url) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        request = SendMessageRequest(message=user_message("Hi").message, tenant=SECRET_PERSONA)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(request)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        trailers = dict(refused.value.trailing_metadata() or ())
        assert "www-authenticate" in trailers
        answer = await stub.SendMessage(request, metadata=[("authorization", f"Bearer {KEY}")])
        assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_unknown_tenant_and_the_directory(grpc_hub: Hub) -> None:
    """An unknown tenant is NOT_FOUND naming it; the directory answers at the tenant its
    card gives (``_directory``), to the SDK's client made from the hub's card."""
    interface = grpc_interface(await grpc_hub.card("socrates"))
    async with grpc.aio.insecure_channel(interface.url) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        message = user_message("Who is here?").message
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await stub.SendMessage(SendMessageRequest(message=message, tenant="nobody"))
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        assert "nobody" in (unknown.value.details() or "")
        assert "/a2a/personas" in (unknown.value.details() or "")
        assert "'_directory'" in (unknown.value.details() or "")
        answer = await stub.SendMessage(SendMessageRequest(message=message, tenant="_directory"))
        text = "".join(p.text for p in answer.message.parts) or answer_text(answer.task)
        assert "socrates" in text.lower()
    # The hub's own card lists the directory there: the gRPC address, its tenant.
    hub_card = parse_agent_card((await grpc_hub.http.get("/.well-known/agent-card.json")).json())
    directory = grpc_interface(hub_card)
    assert (directory.url, directory.tenant) == (interface.url, "_directory")
    del hub_card.supported_interfaces[:]
    hub_card.supported_interfaces.append(directory)
    config = ClientConfig(
        grpc_channel_factory=grpc.aio.insecure_channel, supported_protocol_bindings=["GRPC"]
    )
    client = ClientFactory(config).create(hub_card)
    try:
        answers = [event async for event in client.send_message(user_message("Who is here?"))]
    finally:
        await client.close()
    assert "socrates" in str(answers[-1]).lower()


async def test_limits_metrics_and_the_binding_label(
    grpc_hub: Hub,
    llm: FakeLLM,  # noqa: F811
) -> None:
    """A caller over the persona's rate gets RESOURCE_EXHAUSTED with ``retry-after``; the
    calls are counted with the binding ``grpc``."""
    llm.script(Reply("One."), Reply("Two."))
    interface = grpc_interface(await grpc_hub.card(LIMITED_PERSONA))
    metadata = [("x-api-key", KEY)]
    async with grpc.aio.insecure_channel(interface.url) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        for text in ("a", "b"):
            request = SendMessageRequest(message=user_message(text).message, tenant=LIMITED_PERSONA)
            answer = await stub.SendMessage(request, metadata=metadata)
            assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED
        with pytest.raises(grpc.aio.AioRpcError) as limited:
            await stub.SendMessage(request, metadata=metadata)
    assert limited.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "retry-after" in dict(limited.value.trailing_metadata() or ())
    metrics = await grpc_hub.http.get("/metrics", headers={"X-API-Key": KEY})
    counted = [
        line
        for line in metrics.text.splitlines()
        if line.startswith("persona_agent_a2a_requests_total{")
        and f'persona="{LIMITED_PERSONA}"' in line
        and 'binding="grpc"' in line
        and 'method="SendMessage"' in line
        and 'outcome="ok"' in line
    ]
    assert counted, metrics.text[-2000:]
    assert float(counted[0].rsplit(" ", 1)[1]) == 2


async def test_push_configs_and_the_extended_card_over_grpc(
    grpc_hub: Hub,
    llm: FakeLLM,  # noqa: F811
) -> None:
    """A push config set, read, listed and deleted over gRPC (the URL guard's own hosts
    allowed); the extended card for a caller with the key, not for an anonymous one."""
    llm.script(Reply("Noted."))
    client = await grpc_client(grpc_hub, "socrates")
    try:
        responses = [r async for r in client.send_message(user_message("Note this"))]
        task_id = responses[0].task.id
        hook = TaskPushNotificationConfig(
            task_id=task_id, id="hook-1", url="http://127.0.0.1:9/hook"
        )
        created = await client.create_task_push_notification_config(hook)
        assert created.url == hook.url
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1")
        )
        assert got.id == "hook-1"
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        assert [c.id for c in listed.configs] == ["hook-1"]
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1")
        )
        with pytest.raises(A2AError):
            await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        extended = await client.get_extended_agent_card(
            GetExtendedAgentCardRequest(), context=with_key()
        )
        assert extended.name == (await grpc_hub.card("socrates")).name
    finally:
        await client.close()


async def test_a_taken_grpc_port_stops_start_up_naming_it(
    tmp_path: Path,
    llm: FakeLLM,  # noqa: F811
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = settings_of(
            personas_dir=_fill_personas_dir(tmp_path / "personas"),
            data_dir=tmp_path / "data",
            llm_base_url=llm.base_url,
            llm_api_key="test-key",
            mcp_config=None,
            watch_personas=False,
            grpc_port=port,
        )
        app = create_app(settings)
        with pytest.raises(ConfigError) as refused:
            async with app.router.lifespan_context(app):
                pass
    assert f"127.0.0.1:{port}" in refused.value.message
    assert "PERSONA_AGENT_GRPC_PORT" in refused.value.message


async def test_oidc_tokens_in_the_metadata(
    grpc_hub: Hub,
    issuer: OidcIssuer,
    llm: FakeLLM,  # noqa: F811
) -> None:
    """An OIDC token as ``authorization: Bearer`` is served; an expired one is
    UNAUTHENTICATED naming why; one without the A2A scope is PERMISSION_DENIED."""
    llm.script(Reply("A token, then."))
    interface = grpc_interface(await grpc_hub.card(SECRET_PERSONA))
    request = SendMessageRequest(message=user_message("Token?").message, tenant=SECRET_PERSONA)

    def bearer(token: str) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {token}")]

    async with grpc.aio.insecure_channel(interface.url) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        served = await stub.SendMessage(
            request, metadata=bearer(issuer.token("alice", scopes=["a2a"]))
        )
        assert answer_text(served.task) == "A token, then."
        expired = issuer.token("alice", scopes=["a2a"], expires_in=-120)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(request, metadata=bearer(expired))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "has expired" in (refused.value.details() or "")
        reader = issuer.token("alice", scopes=["personas:read"])
        with pytest.raises(grpc.aio.AioRpcError) as forbidden:
            await stub.SendMessage(request, metadata=bearer(reader))
        assert forbidden.value.code() == grpc.StatusCode.PERMISSION_DENIED
