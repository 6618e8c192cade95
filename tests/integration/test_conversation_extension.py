"""Steering a conversation over A2A (issue 37): the conversation extension, through the real
hub and the real a2a-sdk client on JSON-RPC and HTTP+JSON, streaming and not. The scripted
LLM's recorded prompts show what the model read: a regenerate sends it exactly the selected
branch (the answer it replaces is not in it), a continue the answer it continues; the
answer a later message builds on is the selected one. A malformed value is InvalidParams;
one the conversation cannot do fails the task, saying why."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from a2a.client import Client
from a2a.types.a2a_pb2 import Task, TaskState

from persona_agent.a2a.extensions import CONVERSATION_EXTENSION_URI
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, status_text, user_message
from tests.integration.conftest import Hub
from tests.integration.persona_yaml import persona, write

NUDGE = "[Continue your last message without repeating its original content.]"
GREETINGS = ["Hello, traveller.", "Back again, {{user}}?", "Who goes there?"]
HOST = persona(
    "Hana the Host",
    greeting=GREETINGS[0],
    alternate_greetings=GREETINGS[1:],
)


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


@pytest.fixture(autouse=True)
def host(personas_dir: Path) -> None:
    write(personas_dir, "host", HOST)


async def run(
    client: Client,
    text: str,
    context_id: str,
    conversation: dict[str, Any] | None = None,
    reference: str = "",
) -> Task:
    """Send a message (with the conversation extension's value, if any); the final task
    (from a blocking send, or the stream's last task state)."""
    request = user_message(text, context_id)
    if conversation is not None:
        request.message.metadata.update({CONVERSATION_EXTENSION_URI: conversation})
    if reference:
        request.message.reference_task_ids.append(reference)
    task = Task()
    answer: list[str] = []
    async for response in client.send_message(request):
        if response.HasField("task"):
            task.CopyFrom(response.task)
        elif response.HasField("status_update"):
            task.id = response.status_update.task_id
            task.status.CopyFrom(response.status_update.status)
        elif response.HasField("artifact_update"):
            answer += [part.text for part in response.artifact_update.artifact.parts]
    if answer and not task.artifacts:
        task.artifacts.add().parts.add().text = "".join(answer)
    return task


def said(llm: FakeLLM) -> list[tuple[str, str]]:
    """The last model request's conversation (without the system prompt)."""
    return [(m["role"], m["content"]) for m in llm.requests[-1]["messages"][1:]]


TRANSPORTS = [
    pytest.param(binding, streaming, id=f"{binding}-{'streaming' if streaming else 'blocking'}")
    for binding in ("JSONRPC", "HTTP+JSON")
    for streaming in (False, True)
]


@pytest.mark.parametrize(("binding", "streaming"), TRANSPORTS)
async def test_regenerate_sends_the_selected_branch_and_makes_a_new_swipe(
    hub: Hub, llm: FakeLLM, binding: str, streaming: bool
) -> None:
    card = await hub.card("host")
    assert CONVERSATION_EXTENSION_URI in [e.uri for e in card.capabilities.extensions]
    client = await hub.client("host", (binding, "1.0"), streaming=streaming)
    context = str(uuid.uuid4())
    llm.script(Reply("Hi."), Reply("First answer."), Reply("Second answer."), Reply("On."))
    await run(client, "Hello.", context)
    asked = await run(client, "How are you?", context)
    assert answer_text(asked) == "First answer."

    again = await run(client, "ignored", context, {"op": "regenerate"}, asked.id)
    assert again.status.state == TaskState.TASK_STATE_COMPLETED, status_text(again)
    assert answer_text(again) == "Second answer."
    assert said(llm) == [
        ("assistant", GREETINGS[0]),
        ("user", "Hello."),
        ("assistant", "Hi."),
        ("user", "How are you?"),
    ]  # exactly the branch up to the answer it replaces; nor the text "ignored"

    await run(client, "Good.", context)
    assert said(llm)[-3:] == [
        ("user", "How are you?"),
        ("assistant", "Second answer."),  # the new alternative is the selected one
        ("user", "Good."),
    ]
    assert "First answer." not in str(said(llm))
    swipes = await hub.http.get(f"/api/v1/conversations/host/{context}")
    answers = [m for m in swipes.json()["messages"] if m.get("swipes")]
    assert answers[-1]["swipes"]["count"] == 2
    assert answers[-1]["swipes"]["texts"] == ["First answer.", "Second answer."]


@pytest.mark.parametrize(("binding", "streaming"), TRANSPORTS[::3])
async def test_continue_extends_the_last_answer(
    hub: Hub, llm: FakeLLM, binding: str, streaming: bool
) -> None:
    client = await hub.client("host", (binding, "1.0"), streaming=streaming)
    context = str(uuid.uuid4())
    llm.script(Reply("Once upon"), Reply(" a time."), Reply("The end."))
    asked = await run(client, "Tell me a story.", context)
    more = await run(client, "ignored", context, {"op": "continue"}, asked.id)
    assert more.status.state == TaskState.TASK_STATE_COMPLETED, status_text(more)
    assert answer_text(more) == " a time."
    assert said(llm)[-2:] == [("assistant", "Once upon"), ("system", NUDGE)]
    await run(client, "And then?", context)
    assert said(llm)[-2:] == [("assistant", "Once upon a time."), ("user", "And then?")]


async def test_a_wrong_reference_fails_the_task_clearly(hub: Hub, llm: FakeLLM) -> None:
    client = await hub.client("host")
    context = str(uuid.uuid4())
    llm.script(Reply("One."), Reply("Two."))
    first = await run(client, "First.", context)
    second = await run(client, "Second.", context)
    asked = len(llm.requests)
    for reference in (first.id, "no-such-task"):
        failed = await run(client, "x", context, {"op": "regenerate"}, reference)
        assert failed.status.state == TaskState.TASK_STATE_FAILED
        assert "latest answer" in status_text(failed)
        assert second.id in status_text(failed)
    nothing = await run(client, "x", str(uuid.uuid4()), {"op": "continue"}, second.id)
    assert nothing.status.state == TaskState.TASK_STATE_FAILED
    assert "Nothing to continue" in status_text(nothing)
    assert len(llm.requests) == asked  # the model was not asked
    llm.script(Reply("Three."))
    await run(client, "Third.", context)
    assert said(llm)[-3:] == [("user", "Second."), ("assistant", "Two."), ("user", "Third.")]


@pytest.mark.parametrize("index", [0, 1, 2])
async def test_a_new_conversation_opens_with_the_chosen_greeting(
    hub: Hub, llm: FakeLLM, index: int
) -> None:
    client = await hub.client("host")
    context = str(uuid.uuid4())
    llm.script(Reply("Indeed."))
    await run(client, "Hello.", context, {"greeting": index})
    assert said(llm)[0] == ("assistant", GREETINGS[index].replace("{{user}}", "User"))


async def test_a_greeting_that_cannot_be_chosen_fails_the_task(hub: Hub, llm: FakeLLM) -> None:
    client = await hub.client("host")
    context = str(uuid.uuid4())
    failed = await run(client, "Hello.", context, {"greeting": 3})
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    assert "no greeting 3: it has 3 (0 to 2)" in status_text(failed)
    llm.script(Reply("Hi."))
    await run(client, "Hello.", context)
    late = await run(client, "Hello again.", context, {"greeting": 1})
    assert late.status.state == TaskState.TASK_STATE_FAILED
    assert "opens a new conversation" in status_text(late)
    assert len(llm.requests) == 1


BAD = [
    ({"op": "redo"}, [], 'op must be "regenerate" or "continue"'),
    ({"op": "regenerate"}, [], "exactly one"),
    ({"op": "continue"}, ["a", "b"], "exactly one"),
    ({"greeting": -1}, [], "whole number"),
    ({"greeting": 1.5}, [], "whole number"),
    ({"greeting": "1"}, [], "whole number"),
    ({"op": "regenerate", "greeting": 0}, ["a"], "one of"),
    ({}, [], "one of"),
    ("regenerate", [], "must be an object"),
]


@pytest.mark.parametrize(("value", "references", "says"), BAD)
async def test_a_malformed_conversation_extension_is_invalid_params(
    hub: Hub, llm: FakeLLM, value: Any, references: list[str], says: str
) -> None:
    message = {
        "role": "ROLE_USER",
        "messageId": str(uuid.uuid4()),
        "parts": [{"text": "Hello."}],
        "metadata": {CONVERSATION_EXTENSION_URI: value},
        "referenceTaskIds": references,
    }
    headers = {"A2A-Version": "1.0"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    reply = await hub.http.post("/a2a/host/", json=body, headers=headers)
    error = reply.json()["error"]
    assert error["code"] == -32602, reply.text
    assert says in error["message"]
    rest = await hub.http.post("/a2a/host/message:send", json={"message": message}, headers=headers)
    assert rest.status_code == 400, rest.text
    assert says in rest.json()["error"]["message"]
    assert llm.requests == []
