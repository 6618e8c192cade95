"""Character cards through the hub's doors: REST upload and export, the watched directory,
avatars on the agent card, and what a card's persona sends the model (greeting, lore,
post-history instructions), with the real a2a-sdk client and the scripted LLM."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import httpx
import pytest
import yaml
from a2a.types.a2a_pb2 import TaskState

from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, send
from tests.integration.conftest import HERMIT, Hub
from tests.personas.cards import (
    MIRA_V2,
    ORLA_V3,
    card_png,
    decoded_chunk,
    encoded,
    picture,
    pixels,
    png_bytes,
    text_chunks,
)
from tests.personas.test_original_format import TRUMP

API = "/api/v1/personas"
UPLOAD = {"X-Requested-With": "tests"}


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


async def upload(hub: Hub, name: str, content: bytes, **params: Any) -> httpx.Response:
    return await hub.http.post(
        f"{API}/upload", headers=UPLOAD, params=params, files={"file": (name, content)}
    )


async def declared_upload(hub: Hub, size: int) -> tuple[int, str]:
    """Announce a multipart upload of ``size`` bytes, send none of it, read the answer."""
    host, port = hub.settings.base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (
        f"POST {API}/upload HTTP/1.1\r\nHost: {host}\r\nX-Requested-With: tests\r\n"
        "Content-Type: multipart/form-data; boundary=x\r\n"
        f"Content-Length: {size}\r\n\r\n"
    )
    writer.write(head.encode())
    await writer.drain()
    async with asyncio.timeout(60):
        answer = await reader.read()  # to the end: the hub closes the connection
    writer.close()
    status_line, _, rest = answer.decode().partition("\r\n")
    return int(status_line.split()[1]), rest.partition("\r\n\r\n")[2]


def problems(response: httpx.Response) -> str:
    return " | ".join(item["msg"] for item in response.json()["detail"])


async def test_a_json_card_is_uploaded_served_and_exported_unchanged(hub: Hub) -> None:
    response = await upload(hub, "Captain Mira (1).json", json.dumps(MIRA_V2).encode())
    assert response.status_code == 201, response.text
    assert response.headers["location"] == f"{API}/captain-mira-voss"
    body = response.json()
    assert body["greeting"] == MIRA_V2["data"]["first_mes"]
    assert body["avatar"] is None

    card = (await hub.http.get("/a2a/captain-mira-voss/.well-known/agent-card.json")).json()
    assert card["name"] == "Captain Mira Voss"
    assert "iconUrl" not in card  # no picture in a JSON card
    greeting = next(
        e for e in card["capabilities"]["extensions"] if e["uri"].endswith(":greeting:v1")
    )
    assert greeting["params"]["greeting"] == (
        "*Captain Mira Voss looks up from the star chart.* So you're the new mechanic, User?"
    )
    assert "sci-fi" in card["skills"][0]["tags"]

    exported = await hub.http.get(f"{API}/captain-mira-voss/card", params={"format": "v2"})
    assert exported.status_code == 200
    assert (
        exported.headers["content-disposition"] == 'attachment; filename="captain-mira-voss.json"'
    )
    assert exported.json() == MIRA_V2
    v3 = (await hub.http.get(f"{API}/captain-mira-voss/card", params={"format": "v3"})).json()
    assert v3["spec"] == "chara_card_v3"
    assert v3["data"]["character_book"] == MIRA_V2["data"]["character_book"]


async def test_a_png_card_brings_its_avatar(hub: Hub) -> None:
    image = picture((40, 50))
    response = await upload(hub, "orla.png", card_png(ORLA_V3, image), id="orla")
    assert response.status_code == 201, response.text
    assert response.json()["avatar"] == "orla.avatar.png"
    # Stored as every card is: its JSON as it was in the PNG, its picture beside it.
    stored = hub.settings.personas_dir / "orla.json"
    assert json.loads(stored.read_bytes()) == ORLA_V3
    assert (hub.settings.personas_dir / "orla.avatar.png").is_file()
    assert not (hub.settings.personas_dir / "orla.yaml").exists()

    card = (await hub.http.get("/a2a/orla/.well-known/agent-card.json")).json()
    assert card["iconUrl"] == f"{hub.settings.base_url}/a2a/orla/avatar"
    avatar = await hub.http.get("/a2a/orla/avatar")
    assert avatar.status_code == 200
    assert avatar.headers["content-type"] == "image/png"
    assert pixels(avatar.content) == pixels(png_bytes(image))
    assert text_chunks(avatar.content) == {}  # the card (the prompt) is not served with it
    again = await hub.http.get(
        "/a2a/orla/avatar", headers={"If-None-Match": avatar.headers["etag"]}
    )
    assert again.status_code == 304

    exported = await hub.http.get(f"{API}/orla/card", params={"format": "v3", "as": "png"})
    assert exported.headers["content-type"] == "image/png"
    assert pixels(exported.content) == pixels(png_bytes(image))
    assert decoded_chunk(exported.content, "ccv3") == ORLA_V3
    assert decoded_chunk(exported.content, "chara")["spec"] == "chara_card_v2"

    assert (await hub.http.get("/a2a/socrates/avatar")).status_code == 404  # has none
    assert (await hub.http.get("/a2a/nobody/avatar")).status_code == 404


async def test_bad_cards_are_refused_and_nothing_changes(hub: Hub) -> None:
    before = (await hub.http.get(API, params={"limit": 500})).json()
    v1 = {k: MIRA_V2[k] for k in ("name", "description", "first_mes", "mes_example")}
    cases: list[tuple[str, bytes, str]] = [
        ("plain.png", png_bytes(picture()), "no character card in it"),
        ("bad.png", png_bytes(picture(), {"chara": "%%%"}), "'chara' chunk is not base64"),
        (
            "notjson.png",
            png_bytes(picture(), {"chara": encoded({"x": 1})[:-4] + "AAAA"}),
            "JSON syntax error",
        ),
        ("v1.json", json.dumps(v1).encode(), "V1 character card"),
        ("v1.png", card_png(v1), "V1 character card"),
        ("trunc.png", card_png(MIRA_V2)[:300], "damaged"),
    ]
    for name, content, expected in cases:
        response = await upload(hub, name, content)
        assert response.status_code == 422, (name, response.text)
        assert expected in problems(response), (name, problems(response))
        assert name in problems(response)

    # A card of 50 MB: refused from its length, before the body is sent.
    status, detail = await declared_upload(hub, 50 * 1024 * 1024)
    assert status == 413
    assert "PERSONA_AGENT_MAX_IMAGE_BYTES" in detail
    # One just over the image limit, within the envelope's allowance: the file is refused.
    huge = b"\x89PNG\r\n\x1a\n" + b"\0" * hub.settings.max_image_bytes
    response = await upload(hub, "huge.png", huge)
    assert response.status_code == 422
    assert "more than the limit of 16777216 bytes (PERSONA_AGENT_MAX_IMAGE_BYTES)" in problems(
        response
    )

    # A card whose name is the id of a persona already there: a clash, not an overwrite.
    socrates = (await hub.http.get(f"{API}/socrates")).json()
    clash = copy.deepcopy(MIRA_V2)
    clash["data"]["name"] = "Socrates"
    response = await upload(hub, "socrates.png", card_png(clash))
    assert response.status_code == 409
    assert "socrates" in response.json()["detail"]
    assert (await hub.http.get(f"{API}/socrates")).json() == socrates
    assert not (hub.settings.personas_dir / "socrates.avatar.png").exists()

    after = (await hub.http.get(API, params={"limit": 500})).json()
    assert after == before


async def test_cards_dropped_in_the_watched_directory_are_served(hub: Hub) -> None:
    directory = hub.settings.personas_dir
    image = picture((20, 30), "RGB")
    (directory / "orla.png").write_bytes(card_png(ORLA_V3, image))
    (directory / "mira.json").write_text(json.dumps(MIRA_V2), encoding="utf-8")
    (directory / "just-a-picture.png").write_bytes(png_bytes(picture()))  # not a card

    async with asyncio.timeout(60):
        while True:
            listed = {p["id"] for p in (await hub.http.get("/a2a/personas")).json()}
            if {"orla", "mira"} <= listed:
                break
            await asyncio.sleep(0.05)
    assert "just-a-picture" not in listed
    card = (await hub.http.get("/a2a/orla/.well-known/agent-card.json")).json()
    assert card["iconUrl"].endswith("/a2a/orla/avatar")
    avatar = await hub.http.get("/a2a/orla/avatar")
    assert pixels(avatar.content) == pixels(png_bytes(image))
    assert text_chunks(avatar.content) == {}
    exported = await hub.http.get(f"{API}/mira/card", params={"format": "v2"})
    assert exported.json() == MIRA_V2


async def test_a_card_persona_talks_with_greeting_lore_and_instructions(
    hub: Hub, llm: FakeLLM
) -> None:
    card = copy.deepcopy(MIRA_V2)
    card["data"]["character_book"]["token_budget"] = 20  # room for one entry of the two
    assert (await upload(hub, "mira.json", json.dumps(card).encode(), id="mira")).status_code == 201
    client = await hub.client("mira")

    llm.script(Reply("Welcome aboard."), Reply("She flies."), Reply("Both, then."))
    first = await send(client, "Hello, captain.")
    assert first.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(first) == "Welcome aboard."
    messages = llm.requests[-1]["messages"]
    system = messages[0]["content"]
    assert "Kestrel is a patched-up" not in system  # no key said yet
    assert "Halden Yard" not in system
    # The conversation opens with the greeting, then the message; the card's
    # post-history instructions come last.
    assert [m["role"] for m in messages] == ["system", "assistant", "user", "system"]
    assert messages[1]["content"].startswith("*Captain Mira Voss looks up")
    assert messages[3]["content"] == "Stay terse; no more than three sentences."

    second = await send(client, "Tell me about the kestrel.", first.context_id)
    assert answer_text(second) == "She flies."
    system = llm.requests[-1]["messages"][0]["content"]
    assert "The Kestrel is a patched-up Class IV hauler" in system
    # before_char: ahead of the character's description.
    assert system.index("patched-up") < system.index("# Who you are")
    assert "Halden Yard" not in system
    history = [m["role"] for m in llm.requests[-1]["messages"]]
    assert history == ["system", "assistant", "user", "assistant", "user", "system"]

    await send(client, "And Halden? And the Kestrel?", second.context_id)
    system = llm.requests[-1]["messages"][0]["content"]
    # Both keys said; the budget of 20 tokens holds the higher-priority entry only.
    assert "The Kestrel is a patched-up" in system
    assert "Halden Yard" not in system


async def test_lore_after_char_goes_after_the_description(hub: Hub, llm: FakeLLM) -> None:
    assert (
        await upload(hub, "mira.json", json.dumps(MIRA_V2).encode(), id="mira")
    ).status_code == 201
    llm.script(Reply("Hm."))
    await send(await hub.client("mira"), "We dock at Halden tomorrow.")
    system = llm.requests[-1]["messages"][0]["content"]
    assert "Halden Yard is the salvage port" in system
    assert system.index("# Who you are") < system.index("Halden Yard") < system.index("# Rules")


@pytest.mark.parametrize("spec", ["v2", "v3"])
async def test_a_bundled_persona_exports_as_a_card_that_imports_as_the_same(
    hub: Hub, spec: str
) -> None:
    original = (await hub.http.get(f"{API}/socrates")).json()
    png = await hub.http.get(f"{API}/socrates/card", params={"format": spec, "as": "png"})
    assert png.status_code == 200
    await hub.http.delete(f"{API}/socrates")
    response = await upload(hub, "anything.png", png.content, id="socrates")
    assert response.status_code == 201, response.text
    imported = response.json()
    for key in (
        "name",
        "description",
        "personal_background",
        "language_style",
        "knowledge_domains",
    ):
        assert imported[key] == original[key]
    assert imported["interaction_samples"] == original["interaction_samples"]
    assert imported["avatar"] == "socrates.avatar.png"  # the exported picture came back


async def test_the_original_format_through_every_door(hub: Hub, llm: FakeLLM) -> None:
    # The REST upload.
    response = await upload(hub, "donald-trump.yaml", TRUMP.encode())
    assert response.status_code == 201, response.text
    card = (await hub.http.get("/a2a/donald-trump/.well-known/agent-card.json")).json()
    assert [s["id"] for s in card["skills"]] == [
        "donald-trump-conversation",
        "donald-trump-politics",
    ]
    # The REST API's JSON body, in the same shape.
    body = {**yaml.safe_load(TRUMP), "id": "trump-json"}
    assert (await hub.http.post(API, json=body)).status_code == 201
    assert (await hub.http.get(f"{API}/trump-json")).json()["personal_background"] == {
        "birth": "June 14, 1946, Queens, New York City, USA",
        "profession": "Businessman, Politician, Television Personality",
    }
    # The watched directory.
    (hub.settings.personas_dir / "trump-file.yaml").write_text(TRUMP, encoding="utf-8")
    async with asyncio.timeout(60):
        while True:
            card_url = "/a2a/trump-file/.well-known/agent-card.json"
            if (await hub.http.get(card_url)).status_code == 200:
                break
            await asyncio.sleep(0.05)
    # And the model is told all of it.
    llm.script(Reply("Tremendous."))
    task = await send(await hub.client("trump-file"), "How are trade deals?")
    assert answer_text(task) == "Tremendous."
    system = llm.requests[-1]["messages"][0]["content"]
    for text in (
        "Birth: June 14, 1946",
        "Vocabulary: Simple, repetitive",
        "- Believe me",
        "Quote:\nI have the best words.",
        "User: What's your approach",
        "Donald Trump: Terrible trade deals, the worst.",
    ):
        assert text in system


async def test_an_avatar_beside_a_persona_file(hub: Hub) -> None:
    directory = hub.settings.personas_dir
    image = picture((12, 12))
    (directory / "hal.png").write_bytes(png_bytes(image))  # a picture, not a card
    body = {**HERMIT, "id": "hal", "avatar": "hal.png"}
    assert (await hub.http.post(API, json=body)).status_code == 201
    card = (await hub.http.get("/a2a/hal/.well-known/agent-card.json")).json()
    assert card["iconUrl"].endswith("/a2a/hal/avatar")
    assert pixels((await hub.http.get("/a2a/hal/avatar")).content) == pixels(png_bytes(image))

    missing = {**HERMIT, "id": "hal2", "avatar": "nowhere.png"}
    response = await hub.http.post(API, json=missing)
    assert response.status_code == 422
    assert "no file 'nowhere.png' in the persona directory" in problems(response)
    assert (await hub.http.get(f"{API}/hal2")).status_code == 404
    escaping = {**HERMIT, "id": "hal3", "avatar": "../secret.png"}
    response = await hub.http.post(API, json=escaping)
    assert response.status_code == 422
    assert "is not an image file beside the persona file" in problems(response)
