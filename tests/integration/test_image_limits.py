"""Many images in one message, written as the attack (issue 46.2 and 46.8): parts, image
parts and their bytes are refused before anything is fetched or decoded; a message's
fetches stop at its byte budget; an image that would decode into too many pixels is
refused from its header; ``/healthz`` answers while a heavy message's images are decoded;
a canceled task leaves none of its prepared images behind. Through real HTTP, the real
a2a-sdk client and a real image server on 127.0.0.1 (allowed by
``PERSONA_AGENT_IMAGE_URL_ALLOWED_HOSTS``)."""

from __future__ import annotations

import asyncio
import gc
import io
import random
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from PIL import Image
from starlette.types import Receive, Scope, Send

from persona_agent.media.images import ImageInput
from tests.fakes.fake_llm import FakeLLM
from tests.integration.a2a_helpers import wait_for_state
from tests.integration.conftest import Hub, HubFactory
from tests.integration.persona_yaml import persona, write
from tests.servers.threaded import ServedInThread

HEADERS = {"A2A-Version": "1.0"}


@pytest.fixture
def mcp_config_file() -> None:
    return None  # no MCP servers: no test here calls a tool


@pytest.fixture
def personas_dir(personas_dir: Path) -> Path:
    write(personas_dir, "iris", persona("Iris", model={"name": "llama3", "vision": True}))
    return personas_dir


def noise_png(seed: int, side: int = 200) -> bytes:
    """A PNG of random pixels (it does not compress: its bytes are about ``3 × side²``)."""
    pixels = random.Random(seed).randbytes(side * side * 3)
    buffer = io.BytesIO()
    Image.frombytes("RGB", (side, side), pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def flat_png(side: int, shade: int = 0) -> bytes:
    """A PNG of one colour: a few hundred KB at most on the wire, ``side²`` pixels decoded."""
    buffer = io.BytesIO()
    Image.new("RGB", (side, side), (40, 90, shade)).save(buffer, format="PNG")
    return buffer.getvalue()


class ImageServer(ServedInThread):
    """``/n/{seed}.png``: a noise PNG of its own; ``/hang.png``: nothing until released
    (:attr:`release`), :attr:`hanging` set when it is asked and :attr:`left` when its
    client goes away."""

    label = "image server"

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.hanging = threading.Event()
        self.left = threading.Event()
        self.release = threading.Event()

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        self.paths.append(path)
        if path == "/hang.png":  # a byte at a time (no read timeout), until released
            await self._hang(receive, send)
            return
        body = noise_png(int(path.removeprefix("/n/").removesuffix(".png") or 0))
        headers = [(b"content-type", b"image/png")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _hang(self, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"image/png")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        self.hanging.set()
        message = asyncio.ensure_future(receive())  # the client's disconnect, when it comes
        try:
            while not self.release.is_set():
                await send({"type": "http.response.body", "body": b"\0", "more_body": True})
                await asyncio.sleep(0.2)  # a byte a pace: the client's read never times out
                if message.done():
                    if message.result()["type"] == "http.disconnect":
                        self.left.set()
                        return
                    message = asyncio.ensure_future(receive())  # the request's body: read on
        finally:
            message.cancel()
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def images() -> Iterator[ImageServer]:
    with ImageServer() as server:
        yield server


def message(*parts: Part) -> SendMessageRequest:
    sent = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=parts)
    return SendMessageRequest(message=sent)


def url_part(server: ImageServer, name: str) -> Part:
    return Part(url=f"http://127.0.0.1:{server.port}/{name}", media_type="image/png")


async def ask(hub: Hub, request: SendMessageRequest) -> Task:
    client = await hub.client("iris")
    return [r async for r in client.send_message(request)][-1].task


async def refused(hub: Hub, request: SendMessageRequest) -> tuple[dict[str, Any], str]:
    """The JSON-RPC error of ``request``, and the HTTP+JSON binding's answer (a 400)."""
    from google.protobuf.json_format import MessageToDict

    sent = MessageToDict(request.message)
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": sent}}
    reply = await hub.http.post("/a2a/iris/", json=body, headers=HEADERS)
    rest = await hub.http.post("/a2a/iris/message:send", json={"message": sent}, headers=HEADERS)
    assert rest.status_code == 400, rest.text
    return reply.json()["error"], rest.text


def live_images() -> int:
    gc.collect()
    return sum(isinstance(thing, ImageInput) for thing in gc.get_objects())


async def test_150_image_urls_are_refused_before_any_fetch(
    hub_factory: HubFactory, llm: FakeLLM, images: ImageServer
) -> None:
    many = [url_part(images, f"n/{seed}.png") for seed in range(150)]
    async with hub_factory(image_url_allowed_hosts=f"127.0.0.1:{images.port}") as hub:
        error, rest = await refused(hub, message(Part(text="Look"), *many))
        assert error["code"] == -32602
        assert "151 parts: a message may have 64 at most" in error["message"]
        assert "PERSONA_AGENT_MAX_MESSAGE_PARTS" in rest

        error, rest = await refused(hub, message(Part(text="Look"), *many[:20]))
        assert error["code"] == -32602
        assert "20 image parts" in error["message"]
        assert "16 at most (PERSONA_AGENT_IMAGE_MAX_PER_MESSAGE)" in error["message"]
        assert "PERSONA_AGENT_IMAGE_MAX_PER_MESSAGE" in rest
        assert images.paths == []  # nothing fetched

        # Within the count, one more than a lowered limit: refused all the same.
        assert (await ask(hub, message(*many[:2]))).status.state == TaskState.TASK_STATE_COMPLETED
    async with hub_factory(
        image_url_allowed_hosts=f"127.0.0.1:{images.port}", image_max_per_message=1
    ) as hub:
        error, _ = await refused(hub, message(*many[:2]))
        assert "2 image parts: a message may have 1 at most" in error["message"]
    assert len(images.paths) == 2  # the two of the allowed message, no more
    assert len(llm.requests) == 1


async def test_inline_image_bytes_are_refused_before_the_task(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    inline = [Part(raw=noise_png(seed), media_type="image/png") for seed in range(3)]
    size = len(inline[0].raw)
    async with hub_factory(image_message_bytes=2 * size + 100) as hub:
        error, rest = await refused(hub, message(Part(text="Look"), *inline))
        assert error["code"] == -32602
        assert f"a message's images may have {2 * size + 100:,} together" in error["message"]
        assert "PERSONA_AGENT_IMAGE_MESSAGE_BYTES" in rest
    async with hub_factory(image_max_bytes=size - 1) as hub:
        error, _ = await refused(hub, message(inline[0]))
        assert f"Part 0 is an image of {size:,} bytes" in error["message"]
        assert "PERSONA_AGENT_IMAGE_MAX_BYTES" in error["message"]
    assert llm.requests == []


async def test_fetching_stops_at_the_message_byte_budget(
    hub_factory: HubFactory, llm: FakeLLM, images: ImageServer
) -> None:
    size = len(noise_png(0))
    parts = [url_part(images, f"n/{seed}.png") for seed in range(6)]
    allowed = f"127.0.0.1:{images.port}"
    budget = 3 * size + size // 2  # three noise images, not four
    async with hub_factory(image_url_allowed_hosts=allowed, image_message_bytes=budget) as hub:
        task = await ask(hub, message(Part(text="Look"), *parts))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    reason = task.status.message.parts[0].text
    assert "Part 4 (3.png)" in reason
    assert "PERSONA_AGENT_IMAGE_MESSAGE_BYTES" in reason
    assert images.paths == [f"/n/{seed}.png" for seed in range(4)]  # never the 5th or 6th
    assert llm.requests == []


async def test_the_pixel_budget_refuses_a_6300_square_png_from_its_header(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    big = Part(raw=flat_png(6300), media_type="image/png", filename="big.png")
    async with hub_factory() as hub:
        task = await ask(hub, message(Part(text="Look"), big))
        assert task.status.state == TaskState.TASK_STATE_FAILED
        reason = task.status.message.parts[0].text
        assert "Part 1 (big.png) is refused: 6300×6300 is 39,690,000 pixels to decode" in reason
        assert "more than the 25,000,000 an image may have" in reason
    assert llm.requests == []

    side = [Part(raw=flat_png(1000 + n), media_type="image/png") for n in range(4)]
    async with hub_factory(image_message_pixels=2_500_000) as hub:
        task = await ask(hub, message(*side))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    reason = task.status.message.parts[0].text
    assert "Part 2 (image-2) is refused: its 1,004,004 pixels (1002×1002)" in reason
    assert "past the 2,500,000 pixels" in reason
    assert "PERSONA_AGENT_IMAGE_MESSAGE_PIXELS" in reason
    assert llm.requests == []


async def test_healthz_answers_while_a_heavy_message_is_decoded(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    heavy = [Part(raw=flat_png(4900 + n, n), media_type="image/png") for n in range(4)]
    async with hub_factory() as hub:
        request = message(Part(text="Look"), *heavy)
        request.configuration.return_immediately = True
        task = await ask(hub, request)
        answered = 0
        async with asyncio.timeout(120):
            while not llm.requests:
                health = await hub.http.get("/healthz")
                decoding = any(t.name.startswith("images") for t in threading.enumerate())
                if health.json()["status"] == "ok" and decoding and not llm.requests:
                    answered += 1  # served while the images were read, before the model
        client = await hub.client("iris")
        done = await wait_for_state(client, task.id, TaskState.TASK_STATE_COMPLETED)
    assert answered > 0
    content = llm.requests[-1]["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["text", *["image_url"] * 4]
    assert done.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_canceled_task_releases_its_prepared_images(
    hub_factory: HubFactory, llm: FakeLLM, images: ImageServer
) -> None:
    parts = [url_part(images, f"n/{seed}.png") for seed in range(3)]
    allowed = f"127.0.0.1:{images.port}"
    try:
        async with hub_factory(image_url_allowed_hosts=allowed, image_fetch_seconds=120) as hub:
            before = live_images()
            request = message(Part(text="Look"), *parts, url_part(images, "hang.png"))
            request.configuration.return_immediately = True
            task = await ask(hub, request)
            await asyncio.to_thread(images.hanging.wait, 60)
            assert live_images() == before + 3  # held while the fourth is fetched

            client = await hub.client("iris")
            canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            assert await asyncio.to_thread(images.left.wait, 60)  # the fetch was abandoned
            assert live_images() == before
    finally:
        images.release.set()
    assert llm.requests == []
