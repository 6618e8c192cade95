"""docs/media.md's Images section, run: the ``curl`` lines in a sandbox against a hub whose
persona ``iris`` sees, the scripted LLM receiving the content the section shows; the URL
part sent as shown (its host made the test's image server, allow-listed); the error shown
for a persona that does not see is the hub's, word for word."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from starlette.types import Receive, Scope, Send

from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import claim, expect
from tests.fakes.fake_llm import FakeLLM
from tests.integration.conftest import HubFactory
from tests.integration.persona_yaml import persona, write
from tests.media.images import image_bytes
from tests.servers.threaded import ServedInThread

SEND = claim("docs/media.md", "IMAGE=$(base64 -w0 flower.png)")
RECEIVED = claim("docs/media.md", '{"type": "text", "text": "What flower is this?"}')
BY_URL = claim("docs/media.md", '{"url": "https://example.org/flower.jpg"')
REFUSED = claim("docs/media.md", '{"code": -32005')
TOO_MANY = claim("docs/media.md", '{"code": -32602')
FLOWER = image_bytes("PNG", (640, 480))


@pytest.fixture
def mcp_config_file() -> None:
    return None


@pytest.fixture
def personas_dir(personas_dir: Path) -> Path:
    write(personas_dir, "iris", persona("Iris", model={"name": "llava:13b", "vision": True}))
    write(personas_dir, "blind", persona("Blind", model={"vision": False}))
    return personas_dir


class Flowers(ServedInThread):
    label = "image server"

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        jpeg = image_bytes("JPEG", (300, 200))
        headers = [(b"content-type", b"image/jpeg")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": jpeg})


async def test_an_image_is_sent_read_back_and_fetched_as_the_section_shows(
    sandbox: Sandbox, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    (sandbox.root / "flower.png").write_bytes(FLOWER)
    image, send, read, fetch = expect(SEND, "IMAGE=", "curl -s http", "curl -s http", "curl -s -o")
    async with hub_factory() as hub:
        here = {DOC_URL: hub.settings.base_url}

        def run(command: str, **more: str) -> str:
            return sandbox.run(rewrite(command, {**here, **more})).ok().stdout

        sent = json.loads(await asyncio.to_thread(run, f"{image}\n{send}"))
        assert sent["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        user = llm.requests[-1]["messages"][-1]
        shown = json.loads(RECEIVED.text)
        assert user["content"][0] == shown["content"][0]
        url = user["content"][1]["image_url"]["url"]
        assert url.startswith(shown["content"][1]["image_url"]["url"].removesuffix("..."))
        assert Image.open(io.BytesIO(base64.b64decode(url.partition(",")[2]))).size == (640, 480)

        conversation = json.loads(await asyncio.to_thread(run, read))
        parts = conversation["messages"][0]["parts"]
        assert parts[0] == {"kind": "text", "text": "What flower is this?"}
        sha = parts[1]["url"].rsplit("/", 1)[1]
        assert parts[1]["url"] == f"/api/v1/conversations/iris/garden/media/{sha}"
        assert (parts[1]["width"], parts[1]["height"]) == (640, 480)
        await asyncio.to_thread(run, fetch, **{"<sha256>": sha})
        stored = (sandbox.root / "stored.png").read_bytes()
        assert base64.b64encode(stored).decode() == url.partition(",")[2]


async def test_the_url_part_and_the_refusal_are_the_hubs(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    with Flowers() as flowers:
        where = f"127.0.0.1:{flowers.port}"
        part: dict[str, Any] = json.loads(
            rewrite(BY_URL.text, {"https://example.org": f"http://{where}"})
        )
        async with hub_factory(image_url_allowed_hosts=where) as hub:
            headers = {"A2A-Version": "1.0"}

            def body(parts: list[dict[str, Any]]) -> dict[str, Any]:
                message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}
                return {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {"message": message},
                }

            sent = await hub.http.post("/a2a/iris/", json=body([part]), headers=headers)
            assert sent.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            content = llm.requests[-1]["messages"][-1]["content"]
            assert content[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")

            png = {"raw": base64.b64encode(FLOWER).decode(), "mediaType": "image/png"}
            refused = await hub.http.post("/a2a/blind/", json=body([png]), headers=headers)
            error = refused.json()["error"]
            assert {"code": error["code"], "message": error["message"]} == json.loads(REFUSED.text)
            assert error["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"


async def test_the_refusal_of_too_many_images_is_the_hubs(hub_factory: HubFactory) -> None:
    url = {"url": "https://example.org/flower.jpg", "mediaType": "image/jpeg"}
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [url] * 20}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    async with hub_factory() as hub:
        refused = await hub.http.post("/a2a/iris/", json=body, headers={"A2A-Version": "1.0"})
    error = refused.json()["error"]
    assert {"code": error["code"], "message": error["message"]} == json.loads(TOO_MANY.text)
