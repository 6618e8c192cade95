"""Panels: a persona with ``panel:`` served as one A2A agent whose members answer as real
A2A tasks of their own (broadcast, round-table, moderated), driven through the SDK client."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from a2a.types.a2a_pb2 import Artifact, CancelTaskRequest, StreamResponse, Task, TaskState
from google.protobuf.json_format import MessageToDict

from persona_agent.a2a.extensions import COST_EXTENSION_URI
from tests.fakes.fake_llm import Fail, FakeLLM, Hang, Reply
from tests.integration.a2a_helpers import (
    get_task,
    send,
    status_text,
    user_message,
    wait_for_state,
)
from tests.integration.conftest import TRANSPORTS, Hub, HubFactory

PANEL_KEY = "persona-agent/panel"
EINSTEIN, CURIE, DARWIN = (
    "You are Albert Einstein.",
    "You are Marie Curie.",
    "You are Charles Darwin.",
)
SOCRATES, ADA = "You are Socrates.", "You are Ada Lovelace."


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def write_panel(directory: Path, panel_id: str, **panel: Any) -> None:
    data = {"name": f"Panel {panel_id}", "description": "A test panel.", "panel": panel}
    (directory / f"{panel_id}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")


def artifacts(events: list[StreamResponse]) -> dict[str, list[str]]:
    """The chunks streamed for each artifact id, in order (checked: the first is not an
    append, the others are, the last is the last chunk)."""
    chunks: dict[str, list[str]] = {}
    flags: dict[str, list[tuple[bool, bool]]] = {}
    for event in events:
        if event.HasField("artifact_update"):
            update = event.artifact_update
            key = update.artifact.artifact_id
            chunks.setdefault(key, []).append("".join(p.text for p in update.artifact.parts))
            flags.setdefault(key, []).append((update.append, update.last_chunk))
    for key, seen in flags.items():
        assert [append for append, _ in seen] == [False] + [True] * (len(seen) - 1), key
        assert [last for _, last in seen] == [False] * (len(seen) - 1) + [True], key
    return chunks


def by_name(task: Task) -> dict[str, Artifact]:
    return {artifact.name: artifact for artifact in task.artifacts}


def text_of(artifact: Artifact) -> str:
    return "".join(part.text for part in artifact.parts)


def member_of(artifact: Artifact) -> dict[str, Any]:
    found: dict[str, Any] = MessageToDict(artifact.metadata)[PANEL_KEY]
    return found


def data_of(task: Task, kind: str = "panel") -> dict[str, Any]:
    for part in task.status.message.parts:
        if part.HasField("data"):
            data: dict[str, Any] = MessageToDict(part.data)
            if data["kind"] == kind:
                return data
    raise AssertionError(f"no {kind} data part in {task.status.message}")


def turns(task: Task) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = data_of(task)["turns"]
    return found


def statuses(events: list[StreamResponse], kind: str) -> list[dict[str, Any]]:
    found = []
    for event in events:
        if event.HasField("status_update"):
            for part in event.status_update.status.message.parts:
                if part.HasField("data") and part.data.struct_value["kind"] == kind:
                    found.append(dict(part.data.struct_value.items()))
    return found


def requests_of(llm: FakeLLM, system_text: str) -> list[dict[str, Any]]:
    """The chat requests of one persona (by a text of its system prompt), in order."""
    return [
        r
        for r in llm.requests
        if any(m["role"] == "system" and system_text in m["content"] for m in r["messages"])
    ]


def last_user(request: dict[str, Any]) -> str:
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


async def final_task(hub: Hub, panel_id: str, task_id: str) -> Task:
    return await get_task(await hub.client(panel_id), task_id)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_broadcast_panel_streams_each_answer_and_names_the_member_that_failed(
    hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    llm.script_for(
        EINSTEIN, Reply("Imagination is more important than knowledge.", token_delay=0.03)
    )
    llm.script_for(CURIE, Fail(500, "the model is down"))
    llm.script_for(DARWIN, Reply("It is not the strongest that survives.", token_delay=0.03))
    client = await hub.client("science-panel", transport, streaming=True)
    async with asyncio.timeout(30):
        events = [e async for e in client.send_message(user_message("What drives science?"))]

    last = events[-1].status_update
    assert last.status.state == TaskState.TASK_STATE_FAILED
    assert "Marie Curie (marie-curie) did not answer: failed" in status_text_of(last.status)
    # The others' answers arrived, streamed in chunks, each its own artifact.
    streamed = artifacts(events)
    assert sorted("".join(chunks) for chunks in streamed.values()) == [
        "Imagination is more important than knowledge.",
        "It is not the strongest that survives.",
    ]
    assert all(len(chunks) > 2 for chunks in streamed.values())
    # The stored task keeps them, named after the members, and names every member's task.
    task = await final_task(hub, "science-panel", last.task_id)
    assert task.status.state == TaskState.TASK_STATE_FAILED
    named = by_name(task)
    assert set(named) == {"Albert Einstein", "Charles Darwin"}
    assert text_of(named["Charles Darwin"]) == "It is not the strongest that survives."
    assert member_of(named["Albert Einstein"])["member"] == "albert-einstein"
    listed = {turn["id"]: turn for turn in turns(task)}
    assert {i: t["state"] for i, t in listed.items()} == {
        "albert-einstein": "completed",
        "marie-curie": "failed",
        "charles-darwin": "completed",
    }
    # Each member answered as a task of its own, durable, linked to the panel's task (read
    # on 1.0: a 0.3 HTTP+JSON GetTask drops the history's referenceTaskIds).
    for member_id, turn in listed.items():
        member_task = await get_task(await hub.client(member_id), turn["taskId"])
        assert member_task.status.state == (
            TaskState.TASK_STATE_COMPLETED
            if turn["state"] == "completed"
            else TaskState.TASK_STATE_FAILED
        )
        assert list(member_task.history[0].reference_task_ids) == [task.id]
    # Each member was asked the question as it was put.
    for system in (EINSTEIN, CURIE, DARWIN):
        (request,) = requests_of(llm, system)
        assert last_user(request) == "What drives science?"


def status_text_of(status: Any) -> str:
    return "".join(part.text for part in status.message.parts if part.HasField("text"))


@pytest.mark.parametrize("transport", [TRANSPORTS[0], TRANSPORTS[3]])
async def test_cancel_mid_panel_cancels_every_members_task(
    hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    llm.script_for(EINSTEIN, Reply(" ".join(f"w{i}" for i in range(400)), hold_after=1))
    llm.script_for(CURIE, Hang())
    llm.script_for(DARWIN, Hang())
    streaming = await hub.client("science-panel", transport, streaming=True)
    control = await hub.client("science-panel", transport)
    events: list[StreamResponse] = []
    members: dict[str, str] = {}
    panel_task = ""
    async with asyncio.timeout(30):
        async for event in streaming.send_message(user_message("Talk among yourselves.")):
            events.append(event)
            members |= {s["member"]: s["taskId"] for s in statuses([event], "panel-turn")}
            if len(members) == 3 and not panel_task:
                # Every member is answering at once: three model calls open together (the
                # first holds its answer after a word, the others hang).
                await asyncio.to_thread(llm.wait_requests, 3)
                assert llm.active == 3
                panel_task = event.status_update.task_id
                canceled = await control.cancel_task(CancelTaskRequest(id=panel_task))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    # The stream ended with the cancel, and so did every member's task (how soon: bench/).
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
    for member_id, task_id in members.items():
        await wait_for_state(
            await hub.client(member_id, transport), task_id, TaskState.TASK_STATE_CANCELED
        )
    await asyncio.to_thread(llm.wait_idle)  # every model call was abandoned
    assert llm.disconnects == 3
    assert llm.chunks_sent <= 1
    task = await get_task(control, panel_task)
    assert task.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_round_table_speaks_in_order_each_member_seeing_the_answers_before_it(
    personas_dir: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    write_panel(
        personas_dir, "table", mode="round-table", members=["socrates", "ada-lovelace"], rounds=2
    )
    llm.script(
        *(
            Reply(text, usage=(10, 2))
            for text in ("Socrates one.", "Ada one.", "Socrates two.", "Ada two.")
        )
    )
    async with hub_factory() as hub:
        client = await hub.client("table", streaming=True)
        async with asyncio.timeout(30):
            events = [e async for e in client.send_message(user_message("What is a machine?"))]
        task = await final_task(hub, "table", events[-1].status_update.task_id)

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    spoken = [(a.name, member_of(a)["round"], text_of(a)) for a in task.artifacts]
    assert spoken == [
        ("Socrates", 1, "Socrates one."),
        ("Ada Lovelace", 1, "Ada one."),
        ("Socrates", 2, "Socrates two."),
        ("Ada Lovelace", 2, "Ada two."),
    ]
    socrates, ada = requests_of(llm, SOCRATES), requests_of(llm, ADA)
    assert [len(socrates), len(ada)] == [2, 2]
    assert last_user(socrates[0]) == "What is a machine?"
    # Ada hears Socrates; in round 2 each hears what was said since its last turn.
    assert last_user(ada[0]).startswith("What is a machine?")
    assert "Socrates (socrates):\nSocrates one." in last_user(ada[0])
    assert "Ada one." in last_user(socrates[1])
    assert "Socrates one." not in last_user(socrates[1])  # its own turn is in its history
    assert {"role": "assistant", "content": "Socrates one."} in socrates[1]["messages"]
    assert "Socrates two." in last_user(ada[1])
    assert "round 2 of 2" in last_user(ada[1])
    # The final message is the whole discussion.
    assert status_text(task) == (
        "Socrates:\nSocrates one.\n\nAda Lovelace:\nAda one.\n\n"
        "Socrates:\nSocrates two.\n\nAda Lovelace:\nAda two."
    )
    # What the four turns used, added up (cost-v1, as a persona's answer reports it).
    assert COST_EXTENSION_URI in task.status.message.extensions
    (cost,) = [
        data
        for part in task.status.message.parts
        if part.HasField("data") and (data := MessageToDict(part.data))["kind"] == "cost-v1"
    ]
    assert cost["usage"] == {"promptTokens": 40, "completionTokens": 8, "totalTokens": 48}
    assert (cost["llmCalls"], cost["toolCalls"]) == (4, 0)
    assert cost["durationMs"] >= 0


async def test_a_moderated_panel_gives_the_floor_then_writes_the_synthesis(
    personas_dir: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    members = ["albert-einstein", "charles-darwin"]
    write_panel(personas_dir, "forum", mode="moderated", members=members, moderator="socrates")
    llm.script(
        Reply("Let Charles Darwin begin."),  # the pick: by name
        Reply("Variation and selection."),
        Reply("Hmm, someone else, perhaps."),  # no one named: round order, the one not heard
        Reply("Thought experiments."),
        Reply("Both seek laws behind appearances."),  # the synthesis
    )
    async with hub_factory() as hub:
        client = await hub.client("forum", streaming=True)
        async with asyncio.timeout(30):
            events = [e async for e in client.send_message(user_message("How do ideas grow?"))]
        task = await final_task(hub, "forum", events[-1].status_update.task_id)

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [(a.name, text_of(a)) for a in task.artifacts] == [
        ("Charles Darwin", "Variation and selection."),
        ("Albert Einstein", "Thought experiments."),
        ("synthesis", "Both seek laws behind appearances."),
    ]
    assert status_text(task) == "Both seek laws behind appearances."
    picks = statuses(events, "panel-pick")
    assert [(p["member"], p["fallback"]) for p in picks] == [
        ("charles-darwin", False),
        ("albert-einstein", True),
    ]
    moderator = requests_of(llm, SOCRATES)
    assert len(moderator) == 3
    assert "albert-einstein: Albert Einstein" in last_user(moderator[0])
    assert "(nobody has spoken yet)" in last_user(moderator[0])
    assert "Variation and selection." in last_user(moderator[1])
    synthesis = last_user(moderator[2])
    assert "Variation and selection." in synthesis
    assert "Thought experiments." in synthesis
    assert "Variation and selection." in last_user(requests_of(llm, EINSTEIN)[0])
    assert data_of(task)["synthesis"]["state"] == "completed"


async def test_a_moderator_may_close_the_discussion_early(
    personas_dir: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    members = ["albert-einstein", "charles-darwin"]
    write_panel(
        personas_dir, "forum", mode="moderated", members=members, moderator="socrates", rounds=3
    )
    llm.script(Reply("albert-einstein"), Reply("E = mc^2."), Reply("DONE"), Reply("Energy."))
    async with hub_factory() as hub:
        task = await send(await hub.client("forum"), "What is mass?")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [(a.name, text_of(a)) for a in task.artifacts] == [
        ("Albert Einstein", "E = mc^2."),
        ("synthesis", "Energy."),
    ]
    assert len(llm.requests) == 4


async def test_a_panel_conversation_goes_on_with_each_members_history(
    hub: Hub, llm: FakeLLM
) -> None:
    client = await hub.client("science-panel")
    first = await send(client, "First question.")
    again = await send(client, "Second question.", context_id=first.context_id)
    other = await send(client, "Another conversation.")

    for task in (first, again, other):
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
    for system in (EINSTEIN, CURIE, DARWIN):
        asked = requests_of(llm, system)
        assert [last_user(r) for r in asked] == [
            "First question.",
            "Second question.",
            "Another conversation.",
        ]
        contents = [(m["role"], m["content"]) for m in asked[1]["messages"][1:]]
        assert contents == [
            ("user", "First question."),
            ("assistant", "Hello from the fake LLM. You said: First question."),
            ("user", "Second question."),
        ]
        assert len(asked[2]["messages"]) == 2  # a new panel conversation: a new one for each
    # Each member keeps one conversation per panel conversation, its own.
    contexts: dict[str, set[str]] = {}
    for task in (first, again):
        for turn in turns(task):
            member = await get_task(await hub.client(turn["id"]), turn["taskId"])
            contexts.setdefault(turn["id"], set()).add(member.context_id)
    assert all(len(ids) == 1 for ids in contexts.values())
    assert len(set().union(*contexts.values()) | {first.context_id}) == 4


async def test_panels_are_listed_with_their_members_and_carded(hub: Hub) -> None:
    listing = {row["id"]: row for row in (await hub.http.get("/a2a/personas")).json()}
    members = ["albert-einstein", "marie-curie", "charles-darwin"]
    assert listing["science-panel"]["panel"] == {"mode": "broadcast", "members": members}
    assert "panel" not in listing["socrates"]
    aggregate = (await hub.http.get("/.well-known/agent.json")).json()
    assert aggregate["panels"] == [{"id": "science-panel", "mode": "broadcast", "members": members}]
    assert "Science Panel" in {card["name"] for card in aggregate["agents"]}
    card = await hub.card("science-panel")
    (skill,) = card.skills
    assert skill.id == "science-panel-conversation"
    assert {"panel", "panel:broadcast", *(f"member:{m}" for m in members)} <= set(skill.tags)
    for name in ("Albert Einstein (albert-einstein)", "Marie Curie (marie-curie)"):
        assert name in skill.description
    assert card.capabilities.streaming


async def test_a_panel_is_managed_like_a_persona_and_validated(hub: Hub, llm: FakeLLM) -> None:
    api = "/api/v1/personas"
    base = {"id": "duo", "name": "Duo", "description": "Two voices."}
    no_moderator = await hub.http.post(
        api, json={**base, "panel": {"mode": "moderated", "members": ["socrates"]}}
    )
    assert no_moderator.status_code == 422
    assert "a moderated panel needs a moderator" in no_moderator.text
    itself = await hub.http.post(api, json={**base, "panel": {"members": ["duo", "socrates"]}})
    assert itself.status_code == 422
    assert "a panel cannot sit on itself" in itself.text
    twice = await hub.http.post(api, json={**base, "panel": {"members": ["socrates", "socrates"]}})
    assert twice.status_code == 422
    created = await hub.http.post(
        api, json={**base, "panel": {"members": ["socrates", "ada-lovelace"]}}
    )
    assert created.status_code == 201, created.text
    task = await send(await hub.client("duo"), "Hello, both.")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert set(by_name(task)) == {"Socrates", "Ada Lovelace"}


async def test_a_member_that_is_missing_or_a_panel_is_warned_of_and_fails_its_turn(
    personas_dir: Path, hub_factory: HubFactory, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    write_panel(personas_dir, "odd", members=["socrates", "nobody-here", "science-panel"])
    with caplog.at_level(logging.WARNING, logger="persona_agent"):
        async with hub_factory() as hub:
            task = await send(await hub.client("odd"), "Anyone?")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "Panel odd: its member 'nobody-here' is not a persona of this hub" in w for w in warnings
    ), warnings
    assert any("Panel odd: its member 'science-panel' is a panel" in w for w in warnings), warnings
    assert task.status.state == TaskState.TASK_STATE_FAILED
    said = status_text(task)
    assert (
        "nobody-here (nobody-here) did not answer: failed: 'nobody-here' is not a persona" in said
    )
    assert "science-panel" in said
    assert set(by_name(task)) == {"Socrates"}
    assert len(llm.requests) == 1
