"""What the gRPC service refuses before any persona is called, as the HTTP bindings refuse
it: a request with no tenant (a client that ignored the persona's card) is INVALID_ARGUMENT
naming the tenant to send, and an ``a2a-version`` other than 1.x is VersionNotSupported
(the TCK's GRPC-ERR-002), with the generated stub and the SDK's client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
import pytest_asyncio
from a2a.client import ClientConfig, ClientFactory
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import GetExtendedAgentCardRequest, GetTaskRequest, SendMessageRequest
from a2a.utils.errors import A2AError

from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, user_message
from tests.integration.conftest import Hub, fake_llm_server, llm  # noqa: F401
from tests.integration.grpc_helpers import error_reason, grpc_address, grpc_hub

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def public_hub(
    tmp_path_factory: pytest.TempPathFactory,
    fake_llm_server: FakeLLM,  # noqa: F811
) -> AsyncIterator[Hub]:
    async with grpc_hub(tmp_path_factory.mktemp("grpc-refusals"), fake_llm_server) as hub:
        yield hub


async def test_a_request_without_a_tenant_is_refused_naming_the_tenants(
    public_hub: Hub,
    llm: FakeLLM,  # noqa: F811
) -> None:
    """A client that ignored the persona's card (the address, not its tenant) sends no
    tenant: INVALID_ARGUMENT naming where the tenant is and the directory's, for every
    method; no persona and no directory answers it, no model is called."""
    async with grpc.aio.insecure_channel(grpc_address(public_hub)) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        calls = [
            stub.SendMessage(user_message("Socrates?")),
            stub.GetTask(GetTaskRequest(id="some-task")),
            stub.GetExtendedAgentCard(GetExtendedAgentCardRequest()),
        ]
        for call in calls:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            details = refused.value.details() or ""
            assert "no tenant" in details
            assert "'_directory'" in details
            assert "/a2a/personas" in details
        streamed = stub.SendStreamingMessage(user_message("Socrates?"))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            [event async for event in streamed]
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # The SDK's client from a card whose gRPC interface lost its tenant: refused the same.
    card = await public_hub.card("socrates")
    (stripped,) = [i for i in card.supported_interfaces if i.protocol_binding == "GRPC"]
    stripped.tenant = ""
    del card.supported_interfaces[:]
    card.supported_interfaces.append(stripped)
    config = ClientConfig(
        grpc_channel_factory=grpc.aio.insecure_channel,
        supported_protocol_bindings=["GRPC"],
        streaming=False,
    )
    client = ClientFactory(config).create(card)
    try:
        with pytest.raises(A2AError) as sdk_refused:
            [r async for r in client.send_message(user_message("Socrates?"))]
    finally:
        await client.close()
    assert "_directory" in str(sdk_refused.value)
    assert llm.requests == []


@pytest.mark.parametrize("version", ["0.3", "9.9", "2.0", "garbage"])
async def test_an_unsupported_a2a_version_is_version_not_supported(
    public_hub: Hub,
    llm: FakeLLM,  # noqa: F811
    version: str,
) -> None:
    """As the HTTP bindings answer -32009: FAILED_PRECONDITION (A2A 1.0.1's table, the
    SDK's) with the ErrorInfo reason VERSION_NOT_SUPPORTED and the version named, before
    the tenant is looked at (so with none, as the TCK sends it) and before any model call."""
    metadata = [("a2a-version", version)]
    async with grpc.aio.insecure_channel(grpc_address(public_hub)) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        message = user_message("Hello from another version").message
        calls = [
            stub.SendMessage(
                SendMessageRequest(message=message, tenant="socrates"), metadata=metadata
            ),
            stub.SendMessage(SendMessageRequest(message=message), metadata=metadata),
            stub.GetTask(GetTaskRequest(id="some-task", tenant="socrates"), metadata=metadata),
        ]
        for call in calls:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert f"'{version}'" in (refused.value.details() or "")
            assert error_reason(refused.value) == "VERSION_NOT_SUPPORTED"
        streamed = stub.SendStreamingMessage(
            SendMessageRequest(message=message, tenant="socrates"), metadata=metadata
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            [event async for event in streamed]
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert llm.requests == []


@pytest.mark.parametrize("version", ["1.0", "1", "1.0.1", None])
async def test_a_1_x_version_or_none_is_served(
    public_hub: Hub,
    llm: FakeLLM,  # noqa: F811
    version: str | None,
) -> None:
    """A2A 1.x, and no version at all: this service is 1.0's (0.3's is another service)."""
    llm.script(Reply("Served."))
    metadata = [("a2a-version", version)] if version is not None else []
    async with grpc.aio.insecure_channel(grpc_address(public_hub)) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        request = SendMessageRequest(message=user_message("Hi").message, tenant="socrates")
        answer = await stub.SendMessage(request, metadata=metadata)
    assert answer_text(answer.task) == "Served."
