"""The terminal chat's conversation commands (/history, /retry, /swipe, /continue, /edit,
/delete, /fork, /greeting, /me), driven in a real pty against ``persona-agent serve`` as a
process on the scripted LLM; what the hub then keeps is read back over its REST API, and
what the model was sent from the scripted LLM's recorded requests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from persona_agent.cli import app
from persona_agent.cli.terminal.chat_branches import shown_turns
from tests.cli.test_chat import (
    StartChat,
    chat,
    data_dir,
    fake_llm,
    llm,
    personas_with,
    remembered,
)
from tests.docs.snippets import find
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.servers.hub_process import hub_process

__all__ = ["chat", "data_dir", "fake_llm", "llm"]

FIRST = "Well met, traveller. Sit by the fire."
SECOND = "Back again, {{user}}? Your usual seat is free."
THIRD = "*The door creaks.* Shut it behind you, the wind bites."
GREETER = {
    "name": "Gwen the Greeter",
    "description": "A test persona with three greetings.",
    "personal_background": "Gwen keeps an inn.",
    "language_style": {"tone": "warm"},
    "knowledge_domains": {"Hospitality": ["welcomes"]},
    "greeting": FIRST,
    "alternate_greetings": [SECOND, THIRD],
}


@pytest.fixture
def personas_dir(tmp_path: Path) -> Path:
    return personas_with(tmp_path / "personas", GREETER)


@pytest.fixture(scope="module")
def hub(fake_llm: FakeLLM, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``persona-agent serve`` as a process, on the scripted LLM: its URL."""
    root = tmp_path_factory.mktemp("hub")
    personas = personas_with(root / "personas", GREETER)
    llm = {"LLM_BASE_URL": fake_llm.base_url, "LLM_API_KEY": "test-key", "LLM_MAX_RETRIES": "0"}
    with hub_process(personas, root / "data", **llm) as (url, _process):
        yield url


def stored(hub: str, persona: str, context: str) -> dict[str, Any]:
    """The conversation as the hub keeps it (REST)."""
    response = httpx.get(f"{hub}/api/v1/conversations/{persona}/{context}")
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def texts(conversation: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in conversation["messages"] if m.get("content")]


def prompt(request: dict[str, Any]) -> list[tuple[str, str]]:
    """The conversation the model was sent (not the system prompt)."""
    return [(m["role"], m["content"]) for m in request["messages"] if m["role"] != "system"]


def test_retry_writes_another_answer_and_swipe_goes_back(
    chat: StartChat, llm: FakeLLM, hub: str, data_dir: Path
) -> None:
    llm.script(Reply("Virtue is knowledge."), Reply("Virtue is a habit."), Reply("Indeed."))
    session = chat("socrates", "--url", hub, "--new")
    session.prompt()
    session.say("What is virtue?")
    assert "Socrates: Virtue is knowledge." in session.text
    session.say("/retry")
    assert "Socrates: Virtue is a habit." in session.text
    assert "(answer 2/2: /swipe N shows another)" in session.text
    # The model was asked again with the conversation up to the user's message only.
    assert prompt(llm.requests[1]) == [("user", "What is virtue?")]

    session.say("/swipe 1")
    assert "(answer 1/2)" in session.text
    session.say("/swipe 3")
    assert "/swipe N: the last answer has alternatives 1 to 2" in session.text
    session.say("So?")
    # The selected branch goes on: the first answer, not the second.
    assert prompt(llm.requests[2]) == [
        ("user", "What is virtue?"),
        ("assistant", "Virtue is knowledge."),
        ("user", "So?"),
    ]
    context = remembered(data_dir)[hub]["socrates"]
    swipes = stored(hub, "socrates", context)["messages"][1]["swipes"]
    assert (swipes["selected"], swipes["count"]) == (0, 2)
    assert swipes["texts"] == ["Virtue is knowledge.", "Virtue is a habit."]
    assert session.quit() == 0


ENDED = ["TASK_STATE_CANCELED", "TASK_STATE_COMPLETED"]
"""A conversation's tasks after a first answer and a canceled /retry (sorted)."""


def task_states(hub: str, persona: str, context: str) -> list[str]:
    """The states of the conversation's tasks on the hub (A2A ListTasks), sorted."""
    request = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"contextId": context}}
    listed = httpx.post(f"{hub}/a2a/{persona}/", json=request, headers={"A2A-Version": "1.0"})
    return sorted(task["status"]["state"] for task in listed.json()["result"]["tasks"])


def test_ctrl_c_during_a_streamed_retry_cancels_its_task_on_the_hub(
    chat: StartChat, llm: FakeLLM, hub: str, data_dir: Path
) -> None:
    slow = " ".join(f"word{i}" for i in range(400))
    llm.script(Reply("Virtue is knowledge."), Reply(slow, token_delay=0.05), Reply("Here."))
    session = chat("socrates", "--url", hub, "--new")
    session.prompt()
    session.say("What is virtue?")
    context = remembered(data_dir)[hub]["socrates"]
    session.child.sendline("/retry")
    session.expect("word5")  # the other answer streams
    session.child.sendintr()
    session.expect("(answer canceled)")
    session.prompt()
    llm.wait_disconnect(60)  # the hub closed the model's stream

    # The regenerate's task ended canceled on the hub (the first answer's completed); across
    # processes there is no event to await, so the hub is asked until the task has ended.
    deadline = time.monotonic() + 60
    while (states := task_states(hub, "socrates", context)) != ENDED:
        assert time.monotonic() < deadline, f"the tasks are {states}, not {ENDED}"
        time.sleep(0.1)
    assert texts(stored(hub, "socrates", context))[-1] == ("assistant", "Virtue is knowledge.")

    session.say("Still there?")  # the chat goes on
    assert "Socrates: Here." in session.text
    assert session.quit() == 0


def test_history_numbers_the_messages_and_edit_and_delete_use_the_numbers(
    chat: StartChat, llm: FakeLLM, hub: str, data_dir: Path
) -> None:
    llm.script(Reply("Ada here."), Reply("Engines weave."), Reply("Noted."))
    session = chat("ada-lovelace", "--url", hub, "--new")
    session.prompt()
    session.say("Who are you?")
    session.say("What do engines do?")
    session.say("/history")
    assert "1. you: Who are you?" in session.text
    assert "2. Ada Lovelace: Ada here." in session.text
    assert "4. Ada Lovelace: Engines weave." in session.text

    session.say("/edit 3 What do looms do?")
    assert "(message 3 edited)" in session.text
    session.say("/edit Engines weave algebraic patterns.")  # the last message
    assert "(message 4 edited)" in session.text
    session.say("/delete 9")
    assert "no message 9: /history lists them" in session.text
    session.say("/delete 2")
    assert "(message 2 deleted)" in session.text
    context = remembered(data_dir)[hub]["ada-lovelace"]
    assert texts(stored(hub, "ada-lovelace", context)) == [
        ("user", "Who are you?"),
        ("user", "What do looms do?"),
        ("assistant", "Engines weave algebraic patterns."),
    ]
    session.say("And then?")
    assert prompt(llm.requests[-1])[-3:] == [
        ("user", "What do looms do?"),
        ("assistant", "Engines weave algebraic patterns."),
        ("user", "And then?"),
    ]
    assert session.quit() == 0


def test_fork_continues_a_new_conversation_up_to_a_message(
    chat: StartChat, llm: FakeLLM, hub: str, data_dir: Path
) -> None:
    llm.script(Reply("Light bends."), Reply("Time dilates."), Reply("From the bend."))
    session = chat("albert-einstein", "--url", hub, "--new")
    session.prompt()
    session.say("What does gravity do to light?")
    session.say("And to time?")
    first = remembered(data_dir)[hub]["albert-einstein"]
    session.say("/fork 2")
    assert "up to message 2" in session.text
    forked = remembered(data_dir)[hub]["albert-einstein"]  # the next run continues the fork
    assert forked != first
    session.say("Go on.")
    assert prompt(llm.requests[-1]) == [
        ("user", "What does gravity do to light?"),
        ("assistant", "Light bends."),
        ("user", "Go on."),
    ]
    assert len(texts(stored(hub, "albert-einstein", first))) == 4  # the original is whole
    assert session.quit() == 0


def test_continue_appends_to_the_last_answer(chat: StartChat, llm: FakeLLM, hub: str) -> None:
    llm.script(Reply("The first law says"), Reply(" that a body at rest stays at rest."))
    session = chat("albert-einstein", "--url", hub, "--new")
    session.prompt()
    session.say("Newton's first law?")
    session.say("/continue")
    assert "Albert Einstein: … that a body at rest stays at rest." in session.text
    sent = llm.requests[-1]["messages"]
    assert sent[-2] == {"role": "assistant", "content": "The first law says"}
    assert "Continue your last message" in str(sent[-1]["content"])
    assert session.quit() == 0


def test_greeting_chooses_how_a_new_conversation_opens(
    chat: StartChat, llm: FakeLLM, hub: str, data_dir: Path
) -> None:
    llm.script(Reply("Pull up a chair."))
    session = chat("greeter", "--url", hub, "--new")
    session.prompt()
    assert f"Gwen the Greeter: {FIRST}" in session.text
    assert "(3 greetings: /greeting lists them" in session.text
    session.say("/greeting")
    assert "2. Back again, User? Your usual seat is free." in session.text
    session.say("/greeting 4")
    assert "greetings 1 to 3" in session.text
    session.say("/greeting 3")
    # On a terminal the *action* is in italics, its stars not shown (tests/cli/test_markup.py)
    assert f"Gwen the Greeter: {THIRD.replace('*', '')}" in session.text
    session.say("Evening, Gwen.")
    # The model saw the chosen greeting as the persona's first turn.
    assert prompt(llm.requests[-1]) == [("assistant", THIRD), ("user", "Evening, Gwen.")]
    context = remembered(data_dir)[hub]["greeter"]
    assert texts(stored(hub, "greeter", context))[0] == ("assistant", THIRD)
    session.say("/greeting 2")
    assert "/new first" in session.text  # the conversation has begun
    assert session.quit() == 0


def test_a_chosen_greeting_greets_the_user_by_name(chat: StartChat, llm: FakeLLM, hub: str) -> None:
    llm.script(Reply("Welcome back, Ann."))
    session = chat("greeter", "--url", hub, "--new")
    session.prompt()
    session.say("/me Ann")
    session.say("/greeting 2")
    session.say("Hello!")
    # {{user}} in the chosen greeting is her name.
    assert prompt(llm.requests[-1])[0] == ("assistant", SECOND.replace("{{user}}", "Ann"))
    assert session.quit() == 0


def test_me_tells_the_persona_who_the_user_is(
    chat: StartChat, llm: FakeLLM, hub: str, data_dir: Path
) -> None:
    llm.script(Reply("Welcome, Ann."), Reply("A fine trade."))
    session = chat("greeter", "--url", hub, "--new")
    session.prompt()
    session.say("/me")
    assert "(you are User: /me NAME [-- DESCRIPTION])" in session.text
    session.say("/me Ann -- a sailor who collects maps")
    assert "(you are Ann in this conversation)" in session.text
    session.say("Hello!")  # who she is goes with the first message
    system = llm.requests[-1]["messages"][0]["content"]
    assert "a sailor who collects maps" in system
    assert "Ann" in system
    session.say("/me")
    assert "(you are Ann (a sailor who collects maps):" in session.text
    session.say("/me Bea")  # from now on, in this conversation
    session.say("I trade spices.")
    assert "Bea" in llm.requests[-1]["messages"][0]["content"]
    assert "a sailor who collects maps" not in llm.requests[-1]["messages"][0]["content"]
    context = remembered(data_dir)[hub]["greeter"]
    user = httpx.get(f"{hub}/api/v1/conversations/greeter/{context}/user").json()
    assert user == {"name": "Bea", "description": ""}
    assert session.quit() == 0


def test_the_commands_need_a_hub_and_a_conversation(chat: StartChat, hub: str) -> None:
    session = chat("socrates", "--url", hub, "--new")
    session.prompt()
    session.say("/retry")
    assert "no conversation yet: send a first message" in session.text
    session.say("/greeting 2")
    assert "Socrates has no other greeting to choose" in session.text
    assert session.quit() == 0
    card = f"{hub}/a2a/socrates/.well-known/agent-card.json"
    other = chat("--agent", card)
    other.prompt()
    other.say("/history")
    assert "needs a persona of a persona-agent hub" in other.text
    assert other.quit() == 0


def test_the_docs_transcript_is_what_the_chat_shows(
    chat: StartChat, llm: FakeLLM, hub: str
) -> None:
    """docs/chat.md's example of the commands, typed into the chat: the screen shows it."""
    transcript = find("docs/chat.md", "you> /retry").text.strip().splitlines()
    answers = [line.removeprefix("Socrates: ") for line in transcript if line.startswith("Soc")]
    llm.script(Reply(answers[0]), Reply(answers[1]))
    session = chat("socrates", "--url", hub, "--new")
    session.prompt()
    for line in transcript:
        if line.startswith("you> "):
            session.say(line.removeprefix("you> "))
    shown = session.text.splitlines()
    start = shown.index(transcript[0])
    assert shown[start:-1] == transcript  # up to the last prompt, the chat's own
    assert session.quit() == 0


def test_history_numbers_an_answer_with_tool_calls_as_one_turn() -> None:
    swipes = {"anchor": 2, "selected": 1, "count": 2, "texts": ["Four.", "It is 4."]}
    conversation = {
        "messages": [
            {"id": 1, "role": "assistant", "content": FIRST},
            {"id": 2, "role": "user", "content": "What is 2 + 2?"},
            {"id": 5, "role": "assistant", "content": "", "swipes": swipes, "tool_calls": [{}]},
            {"id": 6, "role": "tool", "content": "4", "tool_call_id": "call_1"},
            {"id": 7, "role": "assistant", "content": "It is 4."},
            {"id": 8, "role": "user", "content": "Thanks."},
        ]
    }
    shown = shown_turns(conversation)
    assert [(t.number, t.kind, t.id, t.text) for t in shown] == [
        (1, "greeting", 1, FIRST),
        (2, "user", 2, "What is 2 + 2?"),
        (3, "answer", 7, "It is 4."),  # edited or deleted through its text's message
        (4, "user", 8, "Thanks."),
    ]
    assert shown[2].swipes == swipes


def test_help_names_the_conversation_commands() -> None:
    result = CliRunner().invoke(app, ["chat", "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    for command in ("/history", "/retry", "/swipe N", "/continue", "/edit", "/fork", "/greeting"):
        assert command in result.output
    assert "/me NAME [-- DESCRIPTION]" in result.output
