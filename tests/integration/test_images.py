"""Images in (issue 38): image parts by bytes or URL reach a model that sees as OpenAI
``image_url`` content (in later turns' history too), stored once a conversation; a persona
that cannot see, SVG, bombs and inward URLs are refused with clear errors, the hub serving
on. Through real HTTP and the real a2a-sdk client; the scripted LLM records what it got."""

from __future__ import annotations

import base64
import io
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, Task, TaskState
from google.protobuf.json_format import MessageToDict
from PIL import Image
from sqlalchemy import text
from starlette.types import Receive, Scope, Send

from persona_agent.db import create_engine
from tests.conftest import migrated_postgres
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import Hub, HubFactory
from tests.integration.persona_yaml import persona, write
from tests.media.images import bomb_png, image_bytes
from tests.servers.threaded import ServedInThread

CAT = image_bytes("PNG", (3000, 1500), text="secret location")


@pytest.fixture
def mcp_config_file() -> None:
    return None  # no MCP servers: no test here calls a tool


@pytest.fixture
def personas_dir(personas_dir: Path) -> Path:
    write(personas_dir, "iris", persona("Iris", model={"name": "llama3", "vision": True}))
    write(personas_dir, "blind", persona("Blind", model={"vision": False}))
    return personas_dir


class ImageServer(ServedInThread):
    """``/cat.png``; ``/inward``: a redirect to ``localhost`` (the same server, by a name
    that is not allow-listed); ``/slow``: headers, then nothing."""

    label = "image server"

    def __init__(self) -> None:
        self.hosts: list[str] = []
        """The ``Host`` header of each request."""

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.hosts.append(dict(scope["headers"]).get(b"host", b"").decode())
        path = scope["path"]
        if path == "/cat.png":
            await _respond(send, 200, CAT, [(b"content-type", b"image/png")])
        elif path == "/inward":
            where = f"http://localhost:{self.port}/cat.png".encode()
            await _respond(send, 302, b"", [(b"location", where)])
        else:
            await _respond(send, 404, b"", [])


async def _respond(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def images() -> Iterator[ImageServer]:
    with ImageServer() as server:
        yield server


def message(*parts: Part, context_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER, message_id=str(uuid.uuid4()), context_id=context_id, parts=parts
        )
    )


async def ask(hub: Hub, persona_id: str, request: SendMessageRequest) -> Task:
    client = await hub.client(persona_id)
    responses = [r async for r in client.send_message(request)]
    return responses[-1].task


def image_of(url: str) -> Image.Image:
    head, _, data = url.partition(",")
    assert head.startswith("data:image/")
    assert head.endswith(";base64")
    return Image.open(io.BytesIO(base64.b64decode(data)))


async def media_rows(hub: Hub) -> list[tuple[Any, ...]]:
    engine = create_engine(hub.settings.resolved_database_url)
    try:
        async with engine.connect() as conn:
            query = text("SELECT conversation, sha256, media_type, width, height FROM pa_media")
            return [tuple(row) for row in (await conn.execute(query)).all()]
    finally:
        await engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
async def stored_hub(request: pytest.FixtureRequest, hub_factory: HubFactory) -> AsyncIterator[Hub]:
    """A hub on SQLite, and one on PostgreSQL (PERSONA_AGENT_TEST_POSTGRES_URL)."""
    url = await migrated_postgres() if request.param == "postgresql" else None
    async with hub_factory(database_url=url) as running:
        yield running


async def test_an_image_reaches_the_model_as_image_url_content_and_stays_in_the_history(
    stored_hub: Hub, llm: FakeLLM
) -> None:
    hub = stored_hub
    part = Part(raw=CAT, media_type="image/png", filename="cat.png")
    task = await ask(hub, "iris", message(Part(text="What is this?"), part))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    content = llm.requests[-1]["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["text", "image_url"]
    assert content[0] == {"type": "text", "text": "What is this?"}
    seen = image_of(content[1]["image_url"]["url"])
    assert (seen.format, seen.size) == ("PNG", (1568, 784))  # scaled to the longest side
    assert "Comment" not in seen.info  # its metadata stripped
    first_url = content[1]["image_url"]["url"]

    again = message(Part(text="And now?"), part, context_id=task.context_id)
    assert (await ask(hub, "iris", again)).status.state == TaskState.TASK_STATE_COMPLETED
    messages = llm.requests[-1]["messages"]
    users = [m for m in messages if m["role"] == "user"]
    assert users[0]["content"][1] == {"type": "image_url", "image_url": {"url": first_url}}
    assert all("media" not in m and "files" not in m for m in messages)
    rows = await media_rows(hub)
    assert len(rows) == 1  # the same image twice: stored once
    assert rows[0][2:] == ("image/png", 1568, 784)


@pytest.mark.parametrize(
    ("fmt", "media_type", "stored"),
    [
        ("JPEG", "image/jpeg", "JPEG"),
        ("WEBP", "image/webp", "WEBP"),
        ("GIF", "image/gif", "PNG"),  # the first frame, as a PNG
    ],
)
async def test_jpeg_webp_and_gif_are_seen(
    hub: Hub, llm: FakeLLM, fmt: str, media_type: str, stored: str
) -> None:
    data = image_bytes(fmt, (80, 60), frames=3 if fmt == "GIF" else 1)
    part = Part(raw=data, media_type=media_type, filename=f"picture.{fmt.lower()}")
    task = await ask(hub, "iris", message(part))  # an image alone is a message
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    content = llm.requests[-1]["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["image_url"]
    seen = image_of(content[0]["image_url"]["url"])
    assert (seen.format, seen.size) == (stored, (80, 60))
    assert getattr(seen, "n_frames", 1) == 1


async def test_a_persona_that_cannot_see_is_refused_with_the_content_type_error(
    hub: Hub, llm: FakeLLM
) -> None:
    png = {"raw": base64.b64encode(CAT).decode(), "mediaType": "image/png", "filename": "c.png"}
    sent = {"messageId": "m1", "role": "ROLE_USER", "parts": [png]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": sent}}
    headers = {"A2A-Version": "1.0"}
    reply = await hub.http.post("/a2a/blind/", json=body, headers=headers)
    error = reply.json()["error"]
    assert error["code"] == -32005
    assert "image/png" in error["message"]
    assert "does not see images" in error["message"]
    rest = await hub.http.post("/a2a/blind/message:send", json={"message": sent}, headers=headers)
    assert rest.status_code == 400
    assert "does not see images" in rest.text
    assert llm.requests == []


async def test_cards_declare_images_for_the_personas_that_see(hub: Hub) -> None:
    iris = (await hub.http.get("/a2a/iris/.well-known/agent-card.json")).json()
    blind = (await hub.http.get("/a2a/blind/.well-known/agent-card.json")).json()
    kinds = ["image/png", "image/jpeg", "image/webp", "image/gif"]
    assert all(kind in iris["defaultInputModes"] for kind in kinds)
    assert all(kind in iris["skills"][0]["inputModes"] for kind in kinds)
    assert not any(kind in blind["defaultInputModes"] for kind in kinds)


async def test_a_decompression_bomb_fails_the_task_and_the_hub_serves_on(
    hub: Hub, llm: FakeLLM
) -> None:
    for bomb in (bomb_png(), bomb_png(8000)):  # over Pillow's own limit; over the hub's
        part = Part(raw=bomb, media_type="image/png", filename="bomb.png")
        task = await ask(hub, "iris", message(Part(text="Look"), part))
        assert task.status.state == TaskState.TASK_STATE_FAILED
        reason = task.status.message.parts[0].text
        assert "Part 1 (bomb.png)" in reason
        assert "decompression bomb" in reason
    assert llm.requests == []
    task = await ask(hub, "iris", message(Part(text="Still there?")))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_url_is_fetched_only_when_its_host_is_public_or_allowed(
    hub_factory: HubFactory, llm: FakeLLM, images: ImageServer
) -> None:
    url = f"http://127.0.0.1:{images.port}/cat.png"
    part = Part(url=url, media_type="image/png")
    async with hub_factory() as hub:  # 127.0.0.1 is not public: refused
        task = await ask(hub, "iris", message(Part(text="See"), part))
        assert task.status.state == TaskState.TASK_STATE_FAILED
        assert "is refused" in task.status.message.parts[0].text
    allowed = f"127.0.0.1:{images.port}"
    async with hub_factory(image_url_allowed_hosts=allowed) as hub:
        task = await ask(hub, "iris", message(Part(text="See"), part))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        content = llm.requests[-1]["messages"][-1]["content"]
        assert image_of(content[1]["image_url"]["url"]).size == (1568, 784)
        inward = Part(url=f"http://127.0.0.1:{images.port}/inward", media_type="image/png")
        task = await ask(hub, "iris", message(Part(text="See"), inward))
        assert task.status.state == TaskState.TASK_STATE_FAILED
        reason = task.status.message.parts[0].text
        assert f"http://localhost:{images.port}" in reason
        assert "is refused" in reason


async def test_a_named_host_is_called_at_the_address_judged_with_its_name_as_host(
    hub_factory: HubFactory, llm: FakeLLM, images: ImageServer
) -> None:
    named = f"localhost:{images.port}"
    async with hub_factory(image_url_allowed_hosts=named) as hub:
        part = Part(url=f"http://{named}/cat.png", media_type="image/png")
        task = await ask(hub, "iris", message(Part(text="See"), part))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert images.hosts == [named]


async def test_svg_by_url_is_refused_before_any_fetch(hub: Hub, images: ImageServer) -> None:
    part = {"url": f"http://127.0.0.1:{images.port}/x.svg", "mediaType": "image/svg+xml"}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m2", "role": "ROLE_USER", "parts": [part]}},
    }
    reply = await hub.http.post("/a2a/iris/", json=body, headers={"A2A-Version": "1.0"})
    assert reply.json()["error"]["code"] == -32005
    assert "image/svg+xml" in reply.json()["error"]["message"]


async def test_image_tokens_the_model_reports_are_in_cost_v1(hub: Hub, llm: FakeLLM) -> None:
    llm.script(Reply("A cat.", usage=(900, 2), image_tokens=765))
    part = Part(raw=CAT, media_type="image/png", filename="cat.png")
    task = await ask(hub, "iris", message(part))
    data = [MessageToDict(p.data) for p in task.status.message.parts if p.HasField("data")]
    usage = data[0]["usage"]
    assert usage["imageTokens"] == 765
    assert usage["promptTokens"] == 900


async def test_the_conversation_read_shows_the_image_and_serves_its_bytes(
    stored_hub: Hub, llm: FakeLLM
) -> None:
    hub = stored_hub
    part = Part(raw=CAT, media_type="image/png", filename="cat.png")
    task = await ask(hub, "iris", message(Part(text="Mine"), part))
    base = f"/api/v1/conversations/iris/{task.context_id}"
    read = (await hub.http.get(base)).json()
    user = next(m for m in read["messages"] if m["role"] == "user")
    assert user["content"] == "Mine"
    sha = (await media_rows(hub))[0][1]
    assert user["parts"] == [
        {"kind": "text", "text": "Mine"},
        {
            "kind": "image",
            "mediaType": "image/png",
            "name": "cat.png",
            "width": 1568,
            "height": 784,
            "url": f"{base}/media/{sha}",
        },
    ]
    got = await hub.http.get(user["parts"][1]["url"])
    assert got.status_code == 200
    assert got.headers["content-type"] == "image/png"
    assert got.headers["cache-control"] == "private, max-age=31536000, immutable"
    assert got.headers["etag"] == f'"{sha}"'
    assert Image.open(io.BytesIO(got.content)).size == (1568, 784)
    again = await hub.http.get(user["parts"][1]["url"], headers={"If-None-Match": f'"{sha}"'})
    assert again.status_code == 304
    other = await hub.http.get(f"/api/v1/conversations/iris/another/media/{sha}")
    assert other.status_code == 404  # another conversation has no such image

    assert (await hub.http.delete(base)).status_code == 204
    assert await media_rows(hub) == []
    assert (await hub.http.get(user["parts"][1]["url"])).status_code == 404
