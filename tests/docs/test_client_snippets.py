"""The snippets that talk to a running hub (``curl``, ``persona-agent personas``,
``persona-agent chat``) or work on files (``import-persona``, ``db upgrade``), run as a
reader pastes them, in a sandbox (sandbox.py), against a hub on a real uvicorn on
127.0.0.1 answering through the scripted fake LLM (tests/integration/conftest.py).

The substitutions, each the least that makes a snippet run here:

- the docs' hub, ``http://127.0.0.1:8000``, is the test hub's URL (:func:`rewrite`); the
  ``personas`` commands, which name no URL, get it from ``PERSONA_AGENT_URL``, as the docs
  say they do;
- a value the docs leave for the reader to fill in (``<version>``: the ETag the command
  before printed) is the value the command before printed;
- ``https://agent.example.com`` ("any A2A agent") is one of the hub's own personas, which
  is an A2A agent like any other;
- docs/a2a.md's Python lines run as the program they say they belong to (the README
  example's imports, their own in an ``async def``).
"""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
import uuid
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from persona_agent.personas.formats.png import placeholder_image, png_card_text, png_with_chunks
from persona_agent.personas.loader import load_persona_file
from tests.docs.sandbox import DOC_URL, Ran, Sandbox, rewrite
from tests.docs.snippets import REPO, Snippet, claim, expect, find
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import Hub, HubFactory

SEND = claim("README.md", "albert-einstein/")
MANAGE = claim("README.md", "uv run persona-agent personas create")
API_CLI = claim("docs/api.md", "persona-agent personas get grace-hopper")
API_CURL = claim("docs/api.md", "curl -s -X POST http://127.0.0.1:8000/api/v1/personas/upload")
USAGE = claim("docs/observability.md", "/usage?since=")
CHAT = claim("docs/chat.md", "uv run persona-agent chat socrates")
TRANSCRIPT = claim("docs/chat.md", "starting the hub...")
MIGRATE = claim("docs/configuration.md", "persona-agent db upgrade")
CARDS = claim("docs/personas.md", "import-persona Seraphina.png")
REPLICA_PROBES = claim("docs/deployment.md", "http://127.0.0.1:8001/healthz")
READY = claim("docs/observability.md", '"status": "ready"')
DIRECTORY = claim("docs/a2a.md", "create_from_url(")
README_CLIENT = find("README.md", "from a2a.client import ClientConfig, ClientFactory")


@pytest.fixture
async def hub(hub_factory: HubFactory) -> AsyncIterator[Hub]:
    """The hub with the bundled personas (and the tests' two), no MCP servers."""
    async with hub_factory(mcp_config=None) as running:
        yield running


async def run(sandbox: Sandbox, command: str, **kwargs: Any) -> Ran:
    """:meth:`Sandbox.run` off the event loop, which serves the hub meanwhile."""
    return await asyncio.to_thread(sandbox.run, command, **kwargs)


def comment_keys(text: str) -> set[str]:
    """The JSON keys a comment shows (``# {"persona": ..., "answers": 42}``)."""
    return set(re.findall(r'"(\w+)":', text))


async def test_the_curl_message_gets_a_completed_task(
    sandbox: Sandbox, hub: Hub, llm: FakeLLM
) -> None:
    (curl,) = expect(SEND, "curl -s ")
    llm.script(Reply("Time is what a clock measures."))
    ran = (await run(sandbox, rewrite(curl, {DOC_URL: hub.settings.base_url}))).ok()
    task = ran.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    text = "".join(p.get("text", "") for a in task["artifacts"] for p in a["parts"])
    assert text == "Time is what a clock measures."
    assert llm.requests[-1]["messages"][-1] == {"role": "user", "content": "What is time?"}


async def test_the_example_persona_is_created_and_a_new_one_written(
    sandbox: Sandbox, hub: Hub
) -> None:
    create, card, new = expect(
        MANAGE, "uv run persona-agent personas create", "curl -s", "uv run persona-agent new"
    )
    env = {"PERSONA_AGENT_URL": hub.settings.base_url}
    created = (await run(sandbox, create, env=env)).ok().stdout
    assert created.startswith("Created 'grace-hopper' (Grace Hopper), version "), created
    shown = (await run(sandbox, rewrite(card, {DOC_URL: hub.settings.base_url}))).ok().json()
    assert shown["name"] == "Grace Hopper"
    assert shown["supportedInterfaces"][0]["url"].startswith(hub.settings.base_url)
    said = (await run(sandbox, new)).ok()
    # As the comment says: in the user persona directory, the bundled ones being examples.
    written = sandbox.root / "data" / "personas" / "ada-byron.yaml"
    assert "data/personas/ada-byron.yaml" in said.stdout
    assert load_persona_file(written).name == "Ada Byron"


async def test_the_personas_commands_create_read_update_list_and_delete(
    sandbox: Sandbox, hub: Hub
) -> None:
    create, get, update, listing, delete = expect(
        API_CLI,
        *(
            f"persona-agent personas {verb}"
            for verb in ("create", "get", "update", "list", "delete")
        ),
    )
    env = {"PERSONA_AGENT_URL": hub.settings.base_url}
    created = (await run(sandbox, create, env=env)).ok().stdout
    got = (await run(sandbox, get, env=env)).ok().json()
    version = got["version"]
    assert created.strip() == (  # one line; --json prints the document
        f"Created 'grace-hopper' (Grace Hopper), version {version}; it answers at "
        f"{hub.settings.base_url}/a2a/grace-hopper/"
    )
    updated = (await run(sandbox, rewrite(update, {"<version>": version}), env=env)).ok()
    assert updated.stdout.startswith("Updated 'grace-hopper' (Grace Hopper), version ")
    version = (await run(sandbox, get, env=env)).ok().json()["version"]
    document = await run(sandbox, rewrite(update, {"<version>": version}) + " --json", env=env)
    assert document.ok().json()["id"] == "grace-hopper"
    listed = (await run(sandbox, listing, env=env)).ok().stdout
    assert re.search(r"^grace-hopper\s+Grace Hopper\s+[0-9a-f]{16}$", listed, re.MULTILINE)
    assert (await run(sandbox, delete, env=env)).ok().stdout.strip() == "Deleted 'grace-hopper'"
    assert (await hub.http.get("/api/v1/personas/grace-hopper")).status_code == 404


async def test_curl_uploads_reads_and_deletes_with_if_match(sandbox: Sandbox, hub: Hub) -> None:
    upload, read, delete = expect(API_CURL, "curl -s -X POST", "curl -s http", "curl -s -X DELETE")
    url = {DOC_URL: hub.settings.base_url}
    uploaded = (await run(sandbox, rewrite(upload, url))).ok().json()
    assert (uploaded["id"], uploaded["name"]) == ("grace-hopper", "Grace Hopper")
    shown = (await run(sandbox, rewrite(read, url))).ok().stdout
    head, _, body = shown.partition("\n\n")  # text mode: the CRLFs read as newlines
    assert head.startswith("HTTP/1.1 200")
    etag = re.search(r"^etag: (\"[0-9a-f]{16}\")$", head, re.IGNORECASE | re.MULTILINE)
    assert etag is not None, head
    assert etag.group(1) == f'"{json.loads(body)["version"]}"'
    deleted = (await run(sandbox, rewrite(delete, {**url, '"<version>"': etag.group(1)}))).ok()
    assert deleted.stdout == ""  # 204
    assert (await hub.http.get("/api/v1/personas/grace-hopper")).status_code == 404


async def test_the_usage_report_sums_what_answers_used(
    sandbox: Sandbox, hub: Hub, llm: FakeLLM
) -> None:
    (curl,) = expect(USAGE, "curl -s")
    llm.script(Reply("Know thyself.", usage=(120, 30)))
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "Hi"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answered = await hub.http.post("/a2a/socrates/", json=body, headers={"A2A-Version": "1.0"})
    assert answered.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    report = (await run(sandbox, rewrite(curl, {DOC_URL: hub.settings.base_url}))).ok().json()
    assert set(report) == comment_keys(USAGE.text)
    assert (report["persona"], report["answers"]) == ("socrates", 1)
    assert report["since"] == "2026-11-01T00:00:00+00:00"
    assert (report["promptTokens"], report["completionTokens"]) == (120, 30)


def chat_commands(snippet: Snippet, hub_url: str) -> list[str]:
    """The chat snippet's commands, made to run here: the hub already running is the test
    hub, and "any A2A agent" one of its personas."""
    inside, running, agent = expect(
        snippet,
        "uv run persona-agent chat socrates ",
        "uv run persona-agent chat socrates --url",
        "uv run persona-agent chat --agent",
    )
    return [
        inside,
        rewrite(running, {DOC_URL: hub_url}),
        rewrite(agent, {"https://agent.example.com": f"{hub_url}/a2a/socrates"}),
    ]


async def test_each_chat_command_talks_with_socrates(
    sandbox: Sandbox, hub: Hub, llm: FakeLLM, llm_env: dict[str, str]
) -> None:
    transcript = TRANSCRIPT.text.splitlines()
    question = transcript[2].removeprefix("you> ")
    answer = transcript[3].removeprefix("Socrates: ")
    outputs: list[str] = []
    for command in chat_commands(CHAT, hub.settings.base_url):
        llm.script(Reply(answer))
        ran = (await run(sandbox, command, env=llm_env, stdin=question + "\n")).ok()
        assert llm.requests[-1]["messages"][-1] == {"role": "user", "content": question}
        outputs.append(ran.stdout)
    # The first runs a hub of its own: what it prints is the docs' transcript, but for the
    # port (a free one) and the line typed (not echoed: it comes from a pipe).
    port = re.search(r"on http://127\.0\.0\.1:(\d+)\.", outputs[0])
    assert port is not None, outputs[0]
    shown = outputs[0].replace("you> Socrates: ", f"you> {question}\nSocrates: ")
    expected = TRANSCRIPT.text.replace("127.0.0.1:41235", f"127.0.0.1:{port.group(1)}")
    assert [line.rstrip() for line in shown.splitlines()] == expected.splitlines()
    for output in outputs[1:]:
        assert f"Socrates: {answer}" in output


def test_the_database_is_migrated_and_then_current(sandbox: Sandbox) -> None:
    upgrade, current = expect(
        MIGRATE, "uv run persona-agent db upgrade", "uv run persona-agent db current"
    )
    upgraded = sandbox.run(upgrade).ok().stdout
    assert "revision before: none" in upgraded
    head = re.search(r"^revision after: (\S+)$", upgraded, re.MULTILINE)
    assert head is not None
    assert head.group(1) != "none"
    assert (sandbox.root / "data" / "persona-agent.db").is_file()  # the default: the data dir
    shown = sandbox.run(current).ok().stdout
    assert f"current: {head.group(1)}\nhead: {head.group(1)}\n" in shown


def seraphina_png() -> bytes:
    """A character card as other tools export one: a V2 card in a PNG's ``chara`` chunk."""
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Seraphina",
            "description": "{{char}} is a guardian of the forest glade.",
            "personality": "Gentle, watchful.",
            "first_mes": "*{{char}} tends to your wounds.* Rest now, {{user}}.",
            "mes_example": "<START>\n{{user}}: Where am I?\n{{char}}: Safe, in my glade.",
        },
    }
    return png_with_chunks(placeholder_image("seraphina"), {"chara": json.dumps(card)})


async def test_a_card_is_imported_exported_uploaded_and_downloaded(
    sandbox: Sandbox, hub: Hub
) -> None:
    imported, card, upload, download, export, charx = expect(
        CARDS,
        "uv run persona-agent import-persona",
        "uv run persona-agent agent-card",
        "curl -s -X POST",
        "curl -s 'http",
        "uv run persona-agent export-persona socrates",
        "uv run persona-agent export-persona seraphina --charx",
    )
    (sandbox.root / "Seraphina.png").write_bytes(seraphina_png())
    url = {DOC_URL: hub.settings.base_url}
    (await run(sandbox, imported)).ok()
    # -> data/personas/seraphina.json + .avatar.png
    assert (sandbox.root / "data" / "personas" / "seraphina.json").is_file()
    assert (sandbox.root / "data" / "personas" / "seraphina.avatar.png").is_file()
    assert not (sandbox.root / "personas" / "seraphina.png").exists()
    icon = (await run(sandbox, card)).ok().stdout
    assert re.fullmatch(r'\s*"iconUrl": "http://127\.0\.0\.1:8000/a2a/seraphina/avatar",?\s*', icon)
    stored = (await run(sandbox, rewrite(upload, url))).ok().json()
    assert stored["id"] == "seraphina"  # 201, stored as seraphina.json
    assert (hub.settings.personas_dir / "seraphina.json").is_file()
    (await run(sandbox, rewrite(download, url))).ok()
    found = png_card_text((sandbox.root / "out.png").read_bytes())
    assert found is not None
    assert found[0] == "ccv3"
    assert json.loads(found[1])["data"]["name"] == "Seraphina"
    (await run(sandbox, export)).ok()
    exported = png_card_text((sandbox.root / "socrates.png").read_bytes())
    assert exported is not None
    assert exported[0] == "chara"
    assert json.loads(exported[1])["spec"] == "chara_card_v2"
    (await run(sandbox, charx)).ok()  # the V3 card and its avatar, zipped
    with zipfile.ZipFile(sandbox.root / "seraphina.charx") as archive:
        assert set(archive.namelist()) == {"card.json", "assets/icon/images/main.png"}
        assert json.loads(archive.read("card.json"))["data"]["name"] == "Seraphina"


async def test_the_replica_probes_and_the_readiness_body(
    sandbox: Sandbox, hub_factory: HubFactory, tmp_path: Path
) -> None:
    """docs/deployment.md's probes of a replica, on a hub of the five bundled personas (a
    single hub on SQLite: a replica on PostgreSQL adds ``"replica"``), and the readiness
    body docs/observability.md shows for such a hub."""
    bundled = tmp_path / "bundled"
    bundled.mkdir()
    for path in (REPO / "personas").iterdir():
        (bundled / path.name).write_bytes(path.read_bytes())
    health, ready = expect(
        REPLICA_PROBES,
        "curl -s http://127.0.0.1:8001/healthz",
        "curl -s http://127.0.0.1:8001/readyz",
    )
    async with hub_factory(personas_dir=bundled, mcp_config=None) as hub:
        url = {"http://127.0.0.1:8001": hub.settings.base_url}
        alive = (await run(sandbox, rewrite(health, url))).ok()
        assert alive.json() == json.loads(health.split("#", 1)[1])  # {"status":"ok","personas":5}
        body = (await run(sandbox, rewrite(ready, url))).ok().json()
    assert set(body) == comment_keys(ready.split("#", 1)[1]) - {"replica"}
    assert body == json.loads(READY.text)


def directory_program(base_url: str) -> str:
    """docs/a2a.md's client of the hub's own agent as the program it says it is part of:
    the README example's imports and ``get_message_text``, its lines in an ``async def``."""
    imports = [
        line for line in README_CLIENT.text.splitlines() if line.startswith(("import ", "from "))
    ]
    body = textwrap.indent(rewrite(DIRECTORY.text, {DOC_URL: base_url}), "    ")
    return "\n".join(
        [
            *imports,
            "from a2a.helpers import get_message_text",
            "",
            "",
            "async def main() -> None:",
            body,
            "",
            "",
            "asyncio.run(main())",
            "",
        ]
    )


async def test_the_hubs_own_agent_names_every_persona_and_its_card(
    sandbox: Sandbox, hub: Hub
) -> None:
    (sandbox.root / "directory.py").write_text(directory_program(hub.settings.base_url))
    printed = (await run(sandbox, "python directory.py")).ok().stdout
    personas = (await hub.http.get("/a2a/personas")).json()
    assert len(personas) >= 5
    for persona in personas:
        card = f"{hub.settings.base_url}/a2a/{persona['id']}/.well-known/agent-card.json"
        line = (
            rf"^(- )?{re.escape(persona['name'])} \({persona['id']}\): .+ Card: {re.escape(card)}$"
        )
        assert re.search(line, printed, re.MULTILINE), printed


STRICT_CARD = claim("docs/a2a.md", "agent-card.json -H 'A2A-Version: 1.0'")


async def test_the_strict_card_curl_gets_1_0_fields_alone(sandbox: Sandbox, hub: Hub) -> None:
    (curl,) = expect(STRICT_CARD, "curl -s ")
    card = (await run(sandbox, rewrite(curl, {DOC_URL: hub.settings.base_url}))).ok().json()
    assert card["name"] == "Socrates"
    assert card["supportedInterfaces"][0]["protocolVersion"] == "1.0"
    assert not {"url", "preferredTransport", "protocolVersion", "additionalInterfaces"} & set(card)
