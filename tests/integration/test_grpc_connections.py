"""The gRPC port under a connection flood, as an attacker tries it (issue 46): raw TCP
connections that send nothing, part of the HTTP/2 preface, or the preface and settings
alone, and pings to look busy, are closed by the server (handshake deadline, idle timeout,
ping policy); a call whose request never comes ends with its connection's age; past the
cap a new connection is closed as it is accepted while the HTTP port answers, and the
SDK's client is served again once the flood is gone. Each test starts its own hub with
the bound it tests short and the others long, so the bound seen is the one tested."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import a2a_pb2
from a2a.types.a2a_pb2 import SendMessageRequest, TaskState
from a2a.utils.errors import A2AError

from persona_agent.api.grpc.grpc_server import connection_cap, server_options
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, user_message
from tests.integration.conftest import Hub, fake_llm_server, llm, settings_of  # noqa: F401
from tests.integration.grpc_helpers import grpc_address, grpc_hub

BOUND = 60.0
"""Seconds a test waits for the server at most: far above the bound under test (1 s), far
below the bounds not under test (:data:`LONG`), so only the bound tested can close."""

LONG = 3600.0
"""The hub's other timeouts in a test: nothing they would close closes within :data:`BOUND`."""

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""The HTTP/2 client connection preface (RFC 9113, section 3.4), before its SETTINGS frame."""

SETTINGS = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""An empty SETTINGS frame: length 0, type 4, no flags, stream 0."""

PING = bytes([0, 0, 8, 6, 0, 0, 0, 0, 0]) + b"stillhere"[:8]
"""A PING frame: length 8, type 6, no flags, stream 0, eight bytes of data."""

HANDSHAKES = {
    "nothing": b"",
    "part of the preface": PREFACE[:10],
    "the preface without settings": PREFACE,
}
"""What a connection that never completes the HTTP/2 handshake sends."""


@asynccontextmanager
async def bounded_hub(root: Path, llm: FakeLLM, **bounds: Any) -> AsyncIterator[Hub]:  # noqa: F811
    """A hub serving gRPC, its connections' bounds :data:`LONG` but ``bounds``."""
    values: dict[str, Any] = {
        "grpc_handshake_timeout": LONG,
        "grpc_idle_timeout": LONG,
        "grpc_max_connection_age": 0,
    }
    async with grpc_hub(root, llm, **(values | bounds)) as hub:
        yield hub


class Raw:
    """A raw TCP connection to the gRPC port that sends ``first`` and then nothing."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.greeted = asyncio.Event()
        """Set when the server sent something (its SETTINGS: it took the connection)."""
        self.closed = asyncio.Event()
        """Set when the server closed the connection (end of stream, or a reset)."""
        self._watch = asyncio.create_task(self._until_closed())

    @classmethod
    async def open(cls, address: str, first: bytes) -> Raw:
        host, _, port = address.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        if first:
            writer.write(first)
            await writer.drain()
        return cls(reader, writer)

    async def _until_closed(self) -> None:
        try:
            while await self.reader.read(65536):
                self.greeted.set()  # the server's SETTINGS, its ack, a GOAWAY: dropped
        except OSError:
            pass  # reset by the server
        self.closed.set()

    async def aclose(self) -> None:
        self._watch.cancel()
        self.writer.close()
        with suppress(OSError):
            await self.writer.wait_closed()


async def opened(stack: AsyncExitStack, address: str, first: bytes, count: int) -> list[Raw]:
    connections = [await Raw.open(address, first) for _ in range(count)]
    for connection in connections:
        stack.push_async_callback(connection.aclose)
    return connections


async def all_closed(connections: list[Raw]) -> None:
    async with asyncio.timeout(BOUND):
        await asyncio.gather(*(c.closed.wait() for c in connections))


async def healthy(hub: Hub) -> None:
    response = await hub.http.get("/healthz")
    assert response.status_code == 200, response.text


def test_the_connection_cap_keeps_half_the_descriptors_for_the_rest() -> None:
    assert connection_cap(1000, 20_000) == 1000
    assert connection_cap(1000, 256) == 128
    assert connection_cap(1000, None) == 1000  # no limit
    assert connection_cap(1000, 1) == 1


def test_the_server_options_carry_every_bound(tmp_path: Path) -> None:
    settings = settings_of(
        data_dir=tmp_path,
        grpc_handshake_timeout=5,
        grpc_idle_timeout=30,
        grpc_max_connection_age=600,
        grpc_max_connection_age_grace=20,
        grpc_keepalive_interval=45,
        grpc_max_streams=50,
    )
    options = dict(server_options(settings, 128))
    assert options["grpc.max_allowed_incoming_connections"] == 128
    assert options["grpc.server_handshake_timeout_ms"] == 5000
    assert options["grpc.max_connection_idle_ms"] == 30_000
    assert options["grpc.max_connection_age_ms"] == 600_000
    assert options["grpc.max_connection_age_grace_ms"] == 20_000
    assert options["grpc.keepalive_time_ms"] == 45_000
    assert options["grpc.max_concurrent_streams"] == 50
    assert options["grpc.keepalive_permit_without_calls"] == 0
    never = dict(server_options(settings_of(data_dir=tmp_path, grpc_max_connection_age=0), 1))
    assert "grpc.max_connection_age_ms" not in never


async def test_connections_that_never_finish_the_handshake_are_closed(
    tmp_path: Path,
    llm: FakeLLM,  # noqa: F811
) -> None:
    """Connections that send nothing, part of the preface, or the preface without its
    SETTINGS are closed at the handshake deadline; one that completed the handshake is not
    (its idle timeout is long here), and the HTTP port answers throughout."""
    async with (
        bounded_hub(tmp_path, llm, grpc_handshake_timeout=1) as hub,
        AsyncExitStack() as stack,
    ):
        address = grpc_address(hub)
        done = await opened(stack, address, PREFACE + SETTINGS, 5)
        stuck = [
            connection
            for first in HANDSHAKES.values()
            for connection in await opened(stack, address, first, 20)
        ]
        await healthy(hub)
        await all_closed(stuck)
        assert not any(connection.closed.is_set() for connection in done)
        await healthy(hub)


async def test_idle_connections_are_closed_and_pings_do_not_keep_them(
    tmp_path: Path,
    llm: FakeLLM,  # noqa: F811
) -> None:
    """Connections that sent the preface and settings and then nothing, and connections
    that ping the server every 100 ms with no call open, are all closed."""
    async with (
        bounded_hub(tmp_path, llm, grpc_idle_timeout=1) as hub,
        AsyncExitStack() as stack,
    ):
        address = grpc_address(hub)
        idle = await opened(stack, address, PREFACE + SETTINGS, 40)
        pinging = await opened(stack, address, PREFACE + SETTINGS, 10)

        async def ping(connection: Raw) -> None:
            while not connection.closed.is_set():
                try:
                    connection.writer.write(PING)
                    await connection.writer.drain()
                except OSError:
                    return
                await asyncio.sleep(0.1)

        pings = [asyncio.create_task(ping(connection)) for connection in pinging]
        try:
            await healthy(hub)
            await all_closed(idle + pinging)
        finally:
            for task in pings:
                task.cancel()
        await healthy(hub)


async def test_a_call_whose_request_never_comes_ends_with_its_connections_age(
    tmp_path: Path,
    llm: FakeLLM,  # noqa: F811
) -> None:
    """A call that opens its stream and never sends its request holds its connection
    (it is not idle): the connection's age ends it, after the grace."""
    async with (
        bounded_hub(
            tmp_path, llm, grpc_max_connection_age=1, grpc_max_connection_age_grace=1
        ) as hub,
        grpc.aio.insecure_channel(grpc_address(hub)) as channel,
    ):
        never = asyncio.Event()

        async def no_request() -> AsyncIterator[SendMessageRequest]:
            await never.wait()
            yield SendMessageRequest()  # never reached

        send = channel.stream_unary(
            "/lf.a2a.v1.A2AService/SendMessage",
            request_serializer=SendMessageRequest.SerializeToString,
            response_deserializer=a2a_pb2.SendMessageResponse.FromString,
        )
        async with asyncio.timeout(BOUND):
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await send(no_request())
        assert ended.value.code() == grpc.StatusCode.UNAVAILABLE, ended.value
        await healthy(hub)


async def test_past_the_cap_connections_are_closed_and_the_hub_still_serves(
    tmp_path: Path,
    llm: FakeLLM,  # noqa: F811
) -> None:
    """With the cap's connections held, every further one is closed as it is accepted (a
    gRPC call finds the server unavailable) while ``/healthz`` answers over HTTP; once they
    are gone, the SDK's client is served over gRPC."""
    cap = 8
    async with bounded_hub(tmp_path, llm, grpc_max_connections=cap) as hub:
        address = grpc_address(hub)
        async with AsyncExitStack() as stack:
            held = await opened(stack, address, PREFACE + SETTINGS, cap)
            async with asyncio.timeout(BOUND):  # the server took them
                await asyncio.gather(*(connection.greeted.wait() for connection in held))
            refused = await opened(stack, address, PREFACE + SETTINGS, 3 * cap)
            await all_closed(refused)
            assert not any(connection.closed.is_set() for connection in held)
            await healthy(hub)
            async with grpc.aio.insecure_channel(address) as channel:
                stub_call = channel.unary_unary(
                    "/lf.a2a.v1.A2AService/SendMessage",
                    request_serializer=SendMessageRequest.SerializeToString,
                    response_deserializer=a2a_pb2.SendMessageResponse.FromString,
                )
                request = user_message("Anyone?")
                request.tenant = "socrates"
                with pytest.raises(grpc.aio.AioRpcError) as unavailable:
                    await stub_call(request, timeout=BOUND)
            assert unavailable.value.code() == grpc.StatusCode.UNAVAILABLE
            assert llm.requests == []
        # The flood is gone (its connections closed): the SDK's client is served again.
        llm.script(Reply("Served again."))
        answer = await served_over_grpc(hub, "socrates", "Are you there?")
        assert answer == "Served again."


async def served_over_grpc(hub: Hub, persona_id: str, text: str) -> str:
    """The answer of the SDK's client over the card's gRPC interface, asked again while the
    server has not yet seen the closed connections go (each try a new client)."""
    card = await hub.card(persona_id)
    interfaces = [i for i in card.supported_interfaces if i.protocol_binding == "GRPC"]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(interfaces)
    config = ClientConfig(
        grpc_channel_factory=grpc.aio.insecure_channel,
        supported_protocol_bindings=["GRPC"],
        streaming=False,
    )
    failures: list[Exception] = []
    try:
        async with asyncio.timeout(BOUND):
            while True:
                client = ClientFactory(config).create(card)
                try:
                    responses = [r async for r in client.send_message(user_message(text))]
                except (A2AError, grpc.aio.AioRpcError) as error:
                    failures.append(error)  # its connection was closed at accept: not yet
                    await asyncio.sleep(0.2)
                    continue
                finally:
                    await client.close()
                task = responses[-1].task
                assert task.status.state == TaskState.TASK_STATE_COMPLETED, responses
                return answer_text(task)
    except TimeoutError:
        raise AssertionError(f"never served over gRPC: {failures[-3:]}") from None
