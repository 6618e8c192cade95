"""The REST API (/api/v1): CRUD, errors, versions, auth, and changes that reach A2A at once."""

from __future__ import annotations

import asyncio
import json
import os
import random
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from a2a.types.a2a_pb2 import CancelTaskRequest, TaskState
from typer.testing import CliRunner

from persona_agent.cli import app as cli_app
from persona_agent.personas.scan import load_persona_dir
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, send, submit, user_message, wait_for_state
from tests.integration.conftest import HERMIT, TRANSPORTS, Hub, HubFactory

API = "/api/v1/personas"
UPLOAD = {"X-Requested-With": "tests"}


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def persona_body(persona_id: str, **changes: Any) -> dict[str, Any]:
    return {**HERMIT, "id": persona_id, **changes}


async def card_name(hub: Hub, persona_id: str) -> str | None:
    response = await hub.http.get(f"/a2a/{persona_id}/.well-known/agent-card.json")
    if response.status_code == 404:
        return None
    response.raise_for_status()
    name: str = response.json()["name"]
    return name


async def listed_ids(hub: Hub) -> set[str]:
    discovery = {p["id"] for p in (await hub.http.get("/a2a/personas")).json()}
    aggregate = {
        card["supportedInterfaces"][0]["url"].rstrip("/").rsplit("/", 1)[1]
        for card in (await hub.http.get("/.well-known/agent.json")).json()["agents"]
    }
    assert discovery == aggregate
    return discovery


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_created_persona_answers_over_a2a_at_once(
    hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    created = await hub.http.post(API, json=persona_body("newton", name="Isaac Newton"))
    assert created.status_code == 201
    assert created.headers["location"] == f"{API}/newton"
    assert created.json()["links"]["card"].endswith("/a2a/newton/.well-known/agent-card.json")
    assert "newton" in await listed_ids(hub)

    llm.script(Reply("Hypotheses non fingo."))
    task = await send(await hub.client("newton", transport), "Do you make hypotheses?")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(task) == "Hypotheses non fingo."
    assert "Isaac Newton" in llm.requests[-1]["messages"][0]["content"]


async def test_update_and_delete_reach_cards_and_discovery(hub: Hub, llm: FakeLLM) -> None:
    created = await hub.http.post(API, json=persona_body("newton", name="Isaac Newton"))
    old_card = await hub.http.get("/a2a/newton/.well-known/agent-card.json")

    updated = await hub.http.put(
        f"{API}/newton",
        json=persona_body("newton", name="Sir Isaac Newton"),
        headers={"If-Match": created.headers["etag"]},
    )
    assert updated.status_code == 200
    assert updated.headers["etag"] != created.headers["etag"]
    assert await card_name(hub, "newton") == "Sir Isaac Newton"
    new_card = await hub.http.get("/a2a/newton/.well-known/agent-card.json")
    assert new_card.headers["etag"] != old_card.headers["etag"]
    await send(await hub.client("newton"), "Who are you?")
    assert "Sir Isaac Newton" in llm.requests[-1]["messages"][0]["content"]

    deleted = await hub.http.delete(f"{API}/newton")
    assert deleted.status_code == 204
    assert await card_name(hub, "newton") is None
    assert (await hub.http.post("/a2a/newton/", json={})).status_code == 404
    assert "newton" not in await listed_ids(hub)
    assert not (hub.settings.personas_dir / "newton.yaml").exists()


async def test_crud_error_codes(hub: Hub) -> None:
    assert (await hub.http.get(f"{API}/nobody")).status_code == 404
    assert (await hub.http.put(f"{API}/nobody", json=persona_body("nobody"))).status_code == 404
    assert (await hub.http.delete(f"{API}/nobody")).status_code == 404

    assert (await hub.http.post(API, json=persona_body("socrates"))).status_code == 409

    missing_tone = persona_body("toneless", language_style={})
    invalid = await hub.http.post(API, json=missing_tone)
    assert invalid.status_code == 422
    assert ["body", "language_style", "tone"] in [e["loc"] for e in invalid.json()["detail"]]
    bad_id = await hub.http.post(API, json=persona_body("Bad Id"))
    assert bad_id.status_code == 422
    assert "id" in str(bad_id.json()["detail"])
    no_id = await hub.http.post(API, json=HERMIT)
    assert no_id.status_code == 422
    wrong_id = await hub.http.put(f"{API}/socrates", json=persona_body("plato"))
    assert wrong_id.status_code == 422
    # A rejected request changes nothing, on disk or in the registry.
    assert not (hub.settings.personas_dir / "toneless.yaml").exists()
    assert await card_name(hub, "toneless") is None
    assert await card_name(hub, "socrates") == "Socrates"


async def test_a_body_that_cannot_be_parsed_is_a_declared_400(hub: Hub) -> None:
    """JSON that is not UTF-8 is FastAPI's 400, which the OpenAPI document declares on
    every route that takes a body (a broken multipart form is the same 400)."""
    broken = await hub.http.post(
        API, content=b'{"name": "\xff"}', headers={"content-type": "application/json"}
    )
    assert broken.status_code == 400
    assert broken.json() == {"detail": "There was an error parsing the body"}
    document = (await hub.http.get("/openapi.json")).json()
    for path, method in (
        (API, "post"),
        (f"{API}/{{persona_id}}", "put"),
        (f"{API}/upload", "post"),
        (f"{API}/validate", "post"),
    ):
        declared = document["paths"][path][method]["responses"]
        assert declared["400"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorDetail"
        }, (path, method)


async def test_get_and_paginate(hub: Hub) -> None:
    one = await hub.http.get(f"{API}/ada-lovelace")
    assert one.status_code == 200
    assert one.json()["name"] == "Ada Lovelace"
    assert one.headers["etag"] == f'"{one.json()["version"]}"'

    total = (await hub.http.get(API)).json()["total"]
    seen: list[str] = []
    for offset in range(0, total, 2):
        page = (await hub.http.get(API, params={"offset": offset, "limit": 2})).json()
        assert page["total"] == total
        seen += [item["id"] for item in page["items"]]
    assert seen == sorted(seen)
    assert len(seen) == total == len(set(seen))
    assert (await hub.http.get(API, params={"limit": 0})).status_code == 422


async def test_two_editors_never_overwrite_each_other(hub: Hub) -> None:
    etag = (await hub.http.get(f"{API}/socrates")).headers["etag"]
    data = yaml.safe_load((hub.settings.personas_dir / "socrates.yaml").read_text())
    first = await hub.http.put(
        f"{API}/socrates", json={**data, "description": "First edit."}, headers={"If-Match": etag}
    )
    assert first.status_code == 200
    second = await hub.http.put(
        f"{API}/socrates", json={**data, "description": "Second edit."}, headers={"If-Match": etag}
    )
    assert second.status_code == 412
    stale_delete = await hub.http.delete(f"{API}/socrates", headers={"If-Match": etag})
    assert stale_delete.status_code == 412
    assert (await hub.http.get(f"{API}/socrates")).json()["description"] == "First edit."


async def test_upload_yaml_and_json(hub: Hub) -> None:
    # Without API keys, an upload needs a header no web page's form can send.
    yaml_file = yaml.safe_dump({**HERMIT, "name": "Hypatia"})
    created = await hub.http.post(
        f"{API}/upload", headers=UPLOAD, files={"file": ("hypatia.yaml", yaml_file)}
    )
    assert created.status_code == 201
    assert await card_name(hub, "hypatia") == "Hypatia"

    again = await hub.http.post(
        f"{API}/upload", headers=UPLOAD, files={"file": ("hypatia.yaml", yaml_file)}
    )
    assert again.status_code == 409
    replaced = await hub.http.post(
        f"{API}/upload",
        headers=UPLOAD,
        params={"replace": "true"},
        files={"file": ("hypatia.json", json.dumps({**HERMIT, "name": "Hypatia of Alexandria"}))},
    )
    assert replaced.status_code == 200, replaced.text
    assert await card_name(hub, "hypatia") == "Hypatia of Alexandria"

    bad = await hub.http.post(
        f"{API}/upload", headers=UPLOAD, files={"file": ("broken.yaml", "name: [x\n")}
    )
    assert bad.status_code == 422
    assert "line" in str(bad.json()["detail"])
    wrong_type = await hub.http.post(
        f"{API}/upload", headers=UPLOAD, files={"file": ("x.txt", "name: x")}
    )
    assert wrong_type.status_code == 422
    huge = await hub.http.post(
        f"{API}/upload", headers=UPLOAD, files={"file": ("big.yaml", "a" * (1024 * 1024 + 1))}
    )
    assert huge.status_code == 422


async def test_api_keys_guard_every_route(hub_factory: HubFactory) -> None:
    async with hub_factory(api_keys="first-key, second-key") as hub:
        assert (await hub.http.get(API)).status_code == 401
        assert (await hub.http.get(API, headers={"X-API-Key": "wrong"})).status_code == 401
        unauthorized = await hub.http.post(API, json=persona_body("newton"))
        assert unauthorized.status_code == 401
        assert unauthorized.headers["www-authenticate"].startswith("Bearer realm=")
        assert (await hub.http.get(API, headers={"X-API-Key": "second-key"})).status_code == 200
        created = await hub.http.post(
            API, json=persona_body("newton"), headers={"Authorization": "Bearer first-key"}
        )
        assert created.status_code == 201
        # A2A discovery and endpoints stay public.
        assert (await hub.http.get("/a2a/newton/.well-known/agent-card.json")).status_code == 200


async def test_without_keys_writes_only_from_loopback(hub: Hub) -> None:
    assert (await hub.http.post(API, json=persona_body("newton"))).status_code == 201
    remote = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=hub.app, client=("203.0.113.7", 40000)),
        base_url="http://127.0.0.1",
    )
    async with remote:
        assert (await remote.get(API)).status_code == 200
        refused = await remote.post(API, json=persona_body("leibniz"))
        assert refused.status_code == 403
        assert "PERSONA_AGENT_API_KEYS" in refused.json()["detail"]
        assert (await remote.delete(f"{API}/newton")).status_code == 403
    assert await card_name(hub, "leibniz") is None
    assert await card_name(hub, "newton") is not None


async def wait_for(condition: Any, what: str) -> None:
    """Poll an async condition (60 s at most, a hang guard): the watcher works on its own
    schedule."""
    async with asyncio.timeout(60):
        while True:
            if await condition():
                return
            await asyncio.sleep(0.05)


async def test_files_added_edited_and_removed_while_serving(
    hub: Hub, caplog: pytest.LogCaptureFixture
) -> None:
    directory = hub.settings.personas_dir
    path = directory / "kepler.yaml"
    path.write_text(yaml.safe_dump({**HERMIT, "name": "Johannes Kepler"}), encoding="utf-8")

    async def named(name: str | None) -> bool:
        return await card_name(hub, "kepler") == name

    await wait_for(lambda: named("Johannes Kepler"), "added")
    assert "kepler" in await listed_ids(hub)

    path.write_text(yaml.safe_dump({**HERMIT, "name": "J. Kepler"}), encoding="utf-8")
    await wait_for(lambda: named("J. Kepler"), "edited")

    path.write_text("name: [broken\n", encoding="utf-8")

    async def rejected() -> bool:
        return "kepler.yaml" in caplog.text and "left as it was" in caplog.text

    await wait_for(rejected, "rejected")
    assert await card_name(hub, "kepler") == "J. Kepler"

    path.unlink()
    await wait_for(lambda: named(None), "removed")
    assert "kepler" not in await listed_ids(hub)


async def test_concurrent_writes_with_a2a_traffic(hub: Hub, llm: FakeLLM) -> None:
    ids = [f"stress-{i}" for i in range(8)]
    statuses: list[int] = []
    rng = random.Random(7)

    async def writer(n: int) -> None:
        persona_id = rng.choice(ids)
        operation = n % 3
        if operation == 0:
            response = await hub.http.post(API, json=persona_body(persona_id, name=f"Stress {n}"))
        elif operation == 1:
            response = await hub.http.put(
                f"{API}/{persona_id}", json=persona_body(persona_id, name=f"Stress {n}")
            )
        else:
            response = await hub.http.delete(f"{API}/{persona_id}")
        statuses.append(response.status_code)

    async def talker(n: int) -> None:
        persona_id = rng.choice(ids)
        response = await hub.http.post(
            f"/a2a/{persona_id}/",
            headers={"A2A-Version": "1.0"},
            json={
                "jsonrpc": "2.0",
                "id": n,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": f"m{n}",
                        "role": "ROLE_USER",
                        "parts": [{"text": "hi"}],
                    }
                },
            },
        )
        statuses.append(response.status_code)
        card = await hub.http.get(f"/a2a/{persona_id}/.well-known/agent-card.json")
        statuses.append(card.status_code)

    jobs = [writer(n) for n in range(60)] + [talker(n) for n in range(30)]
    rng.shuffle(jobs)
    async with asyncio.timeout(60):
        await asyncio.gather(*jobs)

    assert all(code < 500 for code in statuses), statuses
    assert {201, 200, 204} & set(statuses)
    on_disk, errors = load_persona_dir(hub.settings.personas_dir)
    assert errors == []
    assert set(on_disk) == await listed_ids(hub)
    for persona_id, persona in on_disk.items():
        assert await card_name(hub, persona_id) == persona.name
    names = await asyncio.to_thread(os.listdir, hub.settings.personas_dir)
    assert [name for name in names if name.startswith(".")] == []  # no temporary files left


async def test_personas_cli_against_a_running_hub(hub: Hub, tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"PERSONA_AGENT_URL": str(hub.http.base_url)}

    def run(*args: str) -> Any:
        return runner.invoke(cli_app, ["personas", *args], env=env)

    source = tmp_path / "galileo.yaml"
    source.write_text(yaml.safe_dump({**HERMIT, "name": "Galileo Galilei"}), encoding="utf-8")
    created = await asyncio.to_thread(run, "create", str(source))
    assert created.exit_code == 0, created.output
    assert await card_name(hub, "galileo") == "Galileo Galilei"

    got = await asyncio.to_thread(run, "get", "galileo")
    assert got.exit_code == 0
    assert '"name": "Galileo Galilei"' in got.output

    written = "# Galileo, as the user wrote him\n" + yaml.safe_dump({**HERMIT, "name": "Galileo"})
    source.write_text(written, encoding="utf-8")
    stale = await asyncio.to_thread(run, "update", "galileo", str(source), "--if-match", '"old"')
    assert stale.exit_code == 1
    assert "412" in stale.output
    updated = await asyncio.to_thread(run, "update", "galileo", str(source))
    assert updated.exit_code == 0, updated.output
    assert await card_name(hub, "galileo") == "Galileo"
    kept = await hub.http.get(f"{API}/galileo/file")  # stored as written, comment and all
    assert kept.text == written

    listed = await asyncio.to_thread(run, "list")
    rows = listed.stdout.splitlines()  # one short line a persona: id, name, version
    assert len(rows) == len(await listed_ids(hub))
    (row,) = [line for line in rows if line.startswith("galileo ")]
    assert row.split()[1] == "Galileo"
    as_json = await asyncio.to_thread(run, "list", "--json")
    assert as_json.exit_code == 0, as_json.output
    items = {item["id"]: item for item in json.loads(as_json.output)}
    assert set(items) == await listed_ids(hub)
    assert items["galileo"]["name"] == "Galileo"

    deleted = await asyncio.to_thread(run, "delete", "galileo")
    assert deleted.exit_code == 0
    assert await card_name(hub, "galileo") is None
    missing = await asyncio.to_thread(run, "get", "galileo")
    assert missing.exit_code == 1
    assert "404" in missing.output


async def test_the_personas_cli_says_what_is_wrong_as_a_user_would_read_it(
    hub: Hub, tmp_path: Path
) -> None:
    runner = CliRunner()
    base = str(hub.http.base_url).rstrip("/")

    def run(*args: str, url: str = base) -> Any:
        return runner.invoke(cli_app, ["personas", *args, "--url", url])

    # The REST API's URL for the hub's: told the hub's, not a 404.
    for url in (f"{base}/api/v1", f"{base}/api/v1/"):
        listed = await asyncio.to_thread(run, "list", url=url)
        assert listed.exit_code == 2
        assert f"--url is the hub's base URL, without /api/v1: --url {base}\n" in listed.output

    # An upload's problems name the file, once, as the message starts.
    bad = tmp_path / "galileo.yaml"
    bad.write_text(yaml.safe_dump({"name": "Galileo Galilei"}), encoding="utf-8")
    reply = await hub.http.post(
        f"{API}/upload",
        files={"file": (bad.name, bad.read_bytes())},
        headers={"X-Requested-With": "test"},
    )
    assert reply.status_code == 422
    problems = reply.json()["detail"]
    assert all(problem["msg"].startswith("galileo.yaml: ") for problem in problems), problems
    assert "galileo.yaml: description: Field required" in [p["msg"] for p in problems]
    created = await asyncio.to_thread(run, "create", str(bad))
    assert created.exit_code == 1
    assert created.output.startswith("422: galileo.yaml: "), created.output
    assert "file:" not in created.output
    text = tmp_path / "galileo.txt"
    text.write_text("name: Galileo\n", encoding="utf-8")
    wrong_type = await asyncio.to_thread(run, "create", str(text))
    assert wrong_type.output.startswith("422: file name 'galileo.txt' must end with .yaml")


async def test_a_running_task_finishes_on_the_definition_it_started_with(
    hub: Hub, llm: FakeLLM
) -> None:
    await hub.http.post(API, json=persona_body("newton", name="Isaac Newton"))
    words = [f"word{i} " for i in range(10)]
    llm.script(Reply("".join(words), chunks=words, token_delay=0.1), Reply("Updated answer."))
    client = await hub.client("newton", streaming=True)

    events = []
    async with asyncio.timeout(30):
        async for event in client.send_message(user_message("Talk a while")):
            events.append(event)
            if len(events) == 3:  # mid-answer: replace the persona
                body = persona_body("newton", name="Sir Isaac Newton")
                assert (await hub.http.put(f"{API}/newton", json=body)).status_code == 200
    final = events[-1].status_update.status
    assert final.state == TaskState.TASK_STATE_COMPLETED
    assert "".join(p.text for p in final.message.parts if p.text) == "".join(words)
    assert "Isaac Newton" in llm.requests[0]["messages"][0]["content"]
    assert "Sir Isaac Newton" not in llm.requests[0]["messages"][0]["content"]

    await send(await hub.client("newton"), "And now?")
    assert "Sir Isaac Newton" in llm.requests[1]["messages"][0]["content"]


async def test_a_task_running_on_a_replaced_definition_can_still_be_canceled(
    hub: Hub, llm: FakeLLM
) -> None:
    await hub.http.post(API, json=persona_body("newton", name="Isaac Newton"))
    llm.script(Reply(" ".join(f"w{i}" for i in range(100)), hold_after=1))  # held: running
    client = await hub.client("newton")
    task_id = await submit(client, "Talk a while")
    await asyncio.to_thread(llm.wait_held)

    body = persona_body("newton", name="Sir Isaac Newton")
    assert (await hub.http.put(f"{API}/newton", json=body)).status_code == 200
    canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    await asyncio.to_thread(llm.wait_disconnect)
    stored = await wait_for_state(client, task_id, TaskState.TASK_STATE_CANCELED)
    assert stored.status.state == TaskState.TASK_STATE_CANCELED
