"""``persona-agent chat`` driven in a real pty (pexpect), its screen read back (pyte).

The chat runs as a process of its own, with the hub in it (the default) or against a hub
running as another process (``--url``, tests/servers/hub_process.py), or against an A2A
agent built from a2a-sdk alone (``--agent``). The model is the scripted LLM server of
tests/fakes, never the embedded one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pexpect  # type: ignore[import-untyped]
import pyte
import pytest
import yaml
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types.a2a_pb2 import (
    Message,
    Part,
    Role,
)
from typer.testing import CliRunner

from persona_agent.a2a.tasks.executor import data_value
from persona_agent.cli import app
from persona_agent.cli.terminal.a2a_chat import DEMO_NOTE
from persona_agent.cli.terminal.chat_parts import REMEMBERED_WIDTH
from tests.docs.snippets import commands, find, words
from tests.fakes.fake_llm import Fail, FakeLLM, Reply, ToolCalls
from tests.migrated import DATA_DIR_FILE, SqliteTemplate
from tests.servers.hub_process import hub_process
from tests.servers.sdk_agent import sdk_agent

REPO = Path(__file__).resolve().parents[2]
ROWS, COLUMNS = 200, 240
"""The terminal: tall and wide, so that nothing a test reads scrolls away or wraps."""
WAIT = 120.0
"""Seconds anything the chat should show may take: a bound, not a pause. Its first prompt
comes once Python, the hub in it (database, personas) and the persona's card are ready,
which a busy two-core machine can take tens of seconds to do."""
GREETING = "Well met, traveller. Sit by the fire and say what brings you."
GREETER = {
    "name": "Gwen the Greeter",
    "description": "A test persona who opens every conversation with a greeting.",
    "personal_background": "Gwen keeps an inn.",
    "language_style": {"tone": "warm"},
    "knowledge_domains": {"Hospitality": ["welcomes"]},
    "greeting": GREETING,
}


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def llm(fake_llm: FakeLLM) -> FakeLLM:
    fake_llm.reset()
    return fake_llm


def personas_with(directory: Path, greeter: dict[str, Any] = GREETER) -> Path:
    """The bundled personas and ``greeter`` (as ``greeter.yaml``), in ``directory``."""
    shutil.copytree(REPO / "personas", directory)
    (directory / "greeter.yaml").write_text(yaml.safe_dump(greeter), encoding="utf-8")
    return directory


@pytest.fixture
def personas_dir(tmp_path: Path) -> Path:
    return personas_with(tmp_path / "personas")


@pytest.fixture
def data_dir(tmp_path: Path, migrated_sqlite: SqliteTemplate) -> Path:
    """The chat's data directory, its database a fresh migration's (tests/migrated.py): the
    embedded hub does not migrate it again."""
    directory = tmp_path / "data"
    migrated_sqlite.into(directory)
    return directory


@pytest.fixture(scope="module")
def hub(fake_llm: FakeLLM, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``persona-agent serve`` as a process, on the scripted LLM: its URL."""
    root = tmp_path_factory.mktemp("hub")
    personas = personas_with(root / "personas")
    llm = {"LLM_BASE_URL": fake_llm.base_url, "LLM_API_KEY": "test-key", "LLM_MAX_RETRIES": "0"}
    with hub_process(personas, root / "data", **llm) as (url, _process):
        yield url


def _interruptible() -> None:
    """Ctrl-C reaches the chat as it would a user's: the test's process may run with SIGINT
    ignored (a worker of the suite), which a child inherits across exec, and Python then
    installs no KeyboardInterrupt handler at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Chat:
    """``persona-agent chat ARGS`` in a pty; what it draws is kept on a pyte screen."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self._stream = pyte.Stream(self.screen)
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "persona_agent.cli", "chat", *args],
            env=env,
            cwd=str(cwd),
            encoding="utf-8",
            dimensions=(ROWS, COLUMNS),
            timeout=WAIT,
            preexec_fn=_interruptible,
        )
        self.child.logfile_read = self  # pexpect writes what it reads here: to the screen

    def write(self, data: str) -> None:
        self._stream.feed(data)

    def flush(self) -> None:
        pass

    def expect(self, text: str, timeout: float = WAIT) -> None:
        self.child.expect_exact(text, timeout=timeout)

    def prompt(self) -> None:
        self.expect("you> ")

    def say(self, line: str) -> None:
        """Send a line, wait for the answer to end (the next prompt)."""
        self.child.sendline(line)
        self.prompt()

    @property
    def text(self) -> str:
        """The screen, as lines of text."""
        return "\n".join(line.rstrip() for line in self.screen.display).strip()

    def quit(self) -> int:
        """Leave with Ctrl-D at the prompt; the exit status."""
        self.child.sendeof()
        self.child.expect(pexpect.EOF, timeout=WAIT)
        self.child.close()
        return int(self.child.exitstatus)

    def ended(self) -> int:
        """Wait for the chat to end by itself; the exit status."""
        self.child.expect(pexpect.EOF, timeout=WAIT)
        self.child.close()
        return int(self.child.exitstatus)


StartChat = Callable[..., Chat]


@pytest.fixture
def chat(llm: FakeLLM, data_dir: Path, personas_dir: Path, tmp_path: Path) -> Iterator[StartChat]:
    """``chat(*args)`` starts ``persona-agent chat ARGS`` on the scripted LLM, the test's data
    directory and its copy of the personas."""
    started: list[Chat] = []
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PERSONA_AGENT_", "OPENAI_"))}
    base.update(
        TERM="xterm",
        PERSONA_AGENT_LLM_BASE_URL=llm.base_url,
        PERSONA_AGENT_LLM_API_KEY="test-key",
        PERSONA_AGENT_LLM_MAX_RETRIES="0",
        PERSONA_AGENT_DATA_DIR=str(data_dir),
        PERSONA_AGENT_PERSONAS_DIR=str(personas_dir),
        PERSONA_AGENT_WATCH_PERSONAS="false",
    )

    def start(*args: str, **settings: str) -> Chat:
        """``settings``: more of the hub's settings, as ``memory="true"``."""
        env = base | {f"PERSONA_AGENT_{name.upper()}": value for name, value in settings.items()}
        session = Chat(list(args), env, tmp_path)
        started.append(session)
        return session

    yield start
    for session in started:
        if session.child.isalive():
            session.child.terminate(force=True)


def said(request: dict[str, Any]) -> list[str]:
    """What the model was sent as the user's, in order."""
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def remembered(data_dir: Path) -> dict[str, dict[str, str]]:
    data: dict[str, dict[str, str]] = json.loads(
        (data_dir / "chat-contexts.json").read_text(encoding="utf-8")
    )
    return data


def test_an_answer_streams_in_pieces_and_the_next_turn_continues_the_conversation(
    chat: StartChat, llm: FakeLLM
) -> None:
    # The model holds the rest after "three" until the test has seen it.
    llm.script(Reply("one two three four five six", hold_after=3), Reply("Seven."))
    session = chat("socrates")
    session.expect("starting the hub...")
    session.prompt()
    assert "Talking with Socrates (socrates)" in session.text

    session.child.sendline("Count for me")
    session.expect("three")
    assert "Socrates: one two three" in session.text
    assert "six" not in session.text  # the rest is still on its way
    llm.release()
    session.prompt()
    assert "Socrates: one two three four five six" in session.text

    session.say("And then?")
    assert "Socrates: Seven." in session.text
    # One conversation: the model's second request holds the first turn.
    first, second = llm.requests
    assert said(first) == ["Count for me"]
    assert said(second) == ["Count for me", "And then?"]
    assert {"role": "assistant", "content": "one two three four five six"} in second["messages"]
    assert session.quit() == 0


def test_a_message_is_acknowledged_at_once_and_the_wait_erased_when_the_answer_comes(
    chat: StartChat, llm: FakeLLM
) -> None:
    llm.script(Reply("Patience, my friend.", token_delay=0.3))
    session = chat("socrates")
    session.prompt()
    session.child.sendline("Are you there?")
    session.expect("... received (")  # drawn before the message is even sent
    session.prompt()
    assert "Socrates: Patience, my friend." in session.text
    assert "received" not in session.text  # the line went when the answer began
    assert session.quit() == 0


def test_the_conversation_goes_on_in_the_next_run(
    chat: StartChat, llm: FakeLLM, data_dir: Path, personas_dir: Path
) -> None:
    # A new user's data directory: the first run makes and migrates its database.
    (data_dir / DATA_DIR_FILE).unlink()
    first = chat("ada-lovelace", "-d", str(personas_dir))
    first.prompt()
    first.say("My name is Zed.")
    first.child.sendline("/quit")
    assert first.ended() == 0
    context = remembered(data_dir)["embedded"]["ada-lovelace"]

    again = chat("ada-lovelace")
    again.expect(f"Continuing conversation {context}")
    again.prompt()
    again.say("What is my name?")
    assert said(llm.requests[-1]) == ["My name is Zed.", "What is my name?"]
    assert again.quit() == 0


def test_new_starts_a_conversation_and_context_continues_one(
    chat: StartChat, llm: FakeLLM, hub: str, data_dir: Path
) -> None:
    first = chat("albert-einstein", "--url", hub, "--new")
    first.prompt()
    first.say("Remember the number 42.")
    assert first.quit() == 0
    context = remembered(data_dir)[hub]["albert-einstein"]  # remembered per hub URL

    fresh = chat("albert-einstein", "--url", hub, "--new")
    fresh.prompt()
    assert "Continuing" not in fresh.text
    fresh.say("Which number?")
    assert said(llm.requests[-1]) == ["Which number?"]
    fresh.child.sendline("/quit")
    assert fresh.ended() == 0
    assert remembered(data_dir)[hub]["albert-einstein"] != context

    chosen = chat("albert-einstein", "--url", hub, "--context", context)
    chosen.expect(f"Continuing conversation {context}")
    chosen.prompt()
    chosen.say("Which number, then?")
    assert said(llm.requests[-1]) == ["Remember the number 42.", "Which number, then?"]
    assert chosen.quit() == 0
    assert remembered(data_dir)[hub]["albert-einstein"] == context


def test_the_greeting_opens_a_new_conversation(chat: StartChat, llm: FakeLLM, hub: str) -> None:
    session = chat("greeter", "--url", hub, "--new")
    session.prompt()
    assert f"Gwen the Greeter: {GREETING}" in session.text
    session.say("Hello, Gwen.")
    # The hub gives the model the greeting as the persona's first turn.
    assert {"role": "assistant", "content": GREETING} in llm.requests[-1]["messages"]
    assert session.quit() == 0

    again = chat("greeter", "--url", hub)  # the same conversation: no greeting
    again.prompt()
    assert GREETING not in again.text
    again.say("/new")
    assert f"Gwen the Greeter: {GREETING}" in again.text
    assert again.quit() == 0


def test_new_and_persona_commands(chat: StartChat, llm: FakeLLM) -> None:
    session = chat("socrates")
    session.prompt()
    session.say("First question.")
    session.say("/new")
    assert "A new conversation." in session.text
    session.say("Second question.")
    assert said(llm.requests[-1]) == ["Second question."]

    session.say("/persona marie-curie")
    assert "Talking with Marie Curie (marie-curie)" in session.text
    llm.script(Reply("Radium glows."))
    session.say("What glows?")
    assert "Marie Curie: Radium glows." in session.text
    assert "Marie Curie" in llm.requests[-1]["messages"][0]["content"]  # her system prompt
    assert said(llm.requests[-1]) == ["What glows?"]

    session.say("/persona nobody")
    assert "No persona 'nobody'" in session.text
    assert "marie-curie, science-panel, socrates" in session.text  # the hub's personas, named
    session.say("/persona")
    assert "/persona ID: which persona?" in session.text
    session.say("/nonsense")
    assert "Unknown command /nonsense" in session.text
    session.say("/help")
    assert "/persona ID" in session.text
    session.say("//etc is a path")  # sent, without the first /
    assert said(llm.requests[-1])[-1] == "/etc is a path"
    assert "Marie Curie: Hello from the fake LLM." in session.text  # still her
    session.child.sendline("/quit")
    assert session.ended() == 0


def test_a_failed_answer_says_why_and_the_chat_goes_on(chat: StartChat, llm: FakeLLM) -> None:
    llm.script(Fail(500, "the model is on fire"), Reply("Better now."))
    session = chat("socrates")
    session.prompt()
    session.say("Hello?")
    assert "The answer failed: " in session.text
    session.child.send("\x15")  # Ctrl-U: away with the message offered again
    session.say("Hello again?")
    assert "Socrates: Better now." in session.text
    session.child.sendintr()  # Ctrl-C at the prompt leaves
    assert session.ended() == 0


def test_ctrl_c_cancels_the_answer_on_the_hub_and_the_chat_goes_on(
    chat: StartChat, llm: FakeLLM, hub: str, data_dir: Path
) -> None:
    # The model holds the rest after word5 (the chat cancels it meanwhile).
    llm.script(Reply(" ".join(f"word{i}" for i in range(200)), hold_after=6))
    session = chat("socrates", "--url", hub)
    session.prompt()
    assert f"Talking with Socrates (socrates) on {hub}" in session.text
    session.child.sendline("Talk for a long time.")
    session.expect("word5")
    session.child.sendintr()
    session.expect("(answer canceled)")
    session.prompt()
    llm.wait_disconnect()  # the hub closed the model's stream
    assert "word6" not in session.text

    # The task ended canceled on the hub: ListTasks in the conversation the chat remembered.
    context = remembered(data_dir)[hub]["socrates"]
    request = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"contextId": context}}
    listed = httpx.post(f"{hub}/a2a/socrates/", json=request, headers={"A2A-Version": "1.0"})
    states = [task["status"]["state"] for task in listed.json()["result"]["tasks"]]
    assert states == ["TASK_STATE_CANCELED"]

    llm.script(Reply("Still here."))
    session.say("Are you there?")
    assert "Socrates: Still here." in session.text
    assert session.quit() == 0


def test_an_unknown_persona_or_an_absent_hub_is_named(chat: StartChat, hub: str) -> None:
    unknown = chat("nobody", "--url", hub)
    assert unknown.ended() == 1
    assert f"No persona 'nobody' on the hub at {hub}" in unknown.text
    named = "ada-lovelace, albert-einstein, charles-darwin, greeter, marie-curie, science-panel"
    assert f"{named}, socrates" in unknown.text  # the bundled panel is a persona too

    absent = chat("socrates", "--url", "http://127.0.0.1:9")
    assert absent.ended() == 1
    assert "Cannot reach the hub at http://127.0.0.1:9" in absent.text


def test_agent_takes_a_persona_card_url(chat: StartChat, llm: FakeLLM, hub: str) -> None:
    card = f"{hub}/a2a/charles-darwin/.well-known/agent-card.json"
    session = chat("--agent", card)
    session.prompt()
    assert f"Talking with Charles Darwin at {card}" in session.text
    llm.script(Reply("Finches vary."))
    session.say("What varies?")
    assert "Charles Darwin: Finches vary." in session.text
    session.say("/persona socrates")
    assert "/persona needs a persona-agent hub" in session.text
    assert session.quit() == 0


def test_agent_takes_an_ai_catalog_and_asks_which_agent(
    chat: StartChat, llm: FakeLLM, hub: str
) -> None:
    catalog = f"{hub}/.well-known/ai-catalog.json"
    session = chat("--agent", catalog)
    session.expect("Talk with (number or name): ")
    assert f"The AI Catalog at {catalog} lists:" in session.text
    assert "1. persona-agent hub" in session.text  # the hub's directory agent, first
    assert "Charles Darwin (charles-darwin): " in session.text
    session.child.sendline("nobody")
    session.expect(f"No agent 'nobody' in the AI Catalog at {catalog} (it has: persona-agent-hub,")
    session.child.sendline("charles-darwin")
    session.prompt()
    card = f"{hub}/a2a/charles-darwin/.well-known/agent-card.json"
    assert f"Talking with Charles Darwin at {card}" in session.text
    llm.script(Reply("Finches vary."))
    session.say("What varies?")
    assert "Charles Darwin: Finches vary." in session.text
    assert session.quit() == 0


def test_agent_catalog_url_with_a_name_chooses_without_asking(
    chat: StartChat, llm: FakeLLM, hub: str
) -> None:
    """As docs/discovery.md has it (its address the test hub's)."""
    (command,) = commands(find("docs/discovery.md", "chat --agent"))
    *_, option, url = words(command)
    assert option == "--agent"
    session = chat("--agent", url.replace("http://127.0.0.1:8000", hub))
    session.prompt()
    assert "Talk with" not in session.text
    assert "Talking with Socrates at " in session.text
    assert session.quit() == 0


class _Echo(AgentExecutor):
    """An agent of a2a-sdk alone that answers with a message (no task), naming its turn."""

    def __init__(self) -> None:
        self.contexts: list[str] = []
        self.demo_model = False
        """Whether its answers say (cost-v1 ``demoModel``) they come from a demo model."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        assert context.context_id
        self.contexts.append(context.context_id)
        text = "".join(part.text for part in context.message.parts)
        answer = Message(
            role=Role.ROLE_AGENT,
            message_id=f"m{len(self.contexts)}",
            context_id=context.context_id,
            parts=[Part(text=f"echo {len(self.contexts)}: {text}")],
        )
        if self.demo_model:
            cost = {"kind": "cost-v1", "model": "gemma-3-270m-q4_k_m", "demoModel": True}
            answer.parts.append(Part(data=data_value(cost)))
        await event_queue.enqueue_event(answer)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


@pytest.fixture
def echo_agent() -> Iterator[tuple[str, _Echo]]:
    """Any A2A agent: the SDK's own routes, JSON-RPC only, no streaming, no greeting."""
    executor = _Echo()
    with sdk_agent(
        executor, name="Echo", description="Says it back.", skill="echo", streaming=False
    ) as url:
        yield url, executor


def test_agent_talks_with_any_a2a_agent(chat: StartChat, echo_agent: tuple[str, _Echo]) -> None:
    url, executor = echo_agent
    session = chat("--agent", url)
    session.prompt()
    assert f"Talking with Echo at {url}/.well-known/agent-card.json" in session.text
    session.say("hello")
    session.say("again")
    assert "Echo: echo 1: hello" in session.text
    assert "Echo: echo 2: again" in session.text
    first, second = executor.contexts
    assert first == second  # the second message went in the context the agent gave
    assert session.quit() == 0


def test_the_demo_models_answers_are_labelled_once(
    chat: StartChat, echo_agent: tuple[str, _Echo]
) -> None:
    url, executor = echo_agent
    executor.demo_model = True
    session = chat("--agent", url)
    session.prompt()
    session.say("hello")
    session.say("again")
    assert "Echo: echo 1: hello" in session.text
    assert "Echo: echo 2: again" in session.text
    assert session.text.count(DEMO_NOTE) == 1
    assert session.text.index(DEMO_NOTE) > session.text.index("echo 1: hello")
    assert session.quit() == 0


def test_an_answer_says_in_one_line_what_memory_did_for_it(chat: StartChat, llm: FakeLLM) -> None:
    fact = "The user's dog is called Biscuit."
    llm.script(
        Reply("Noted."),
        Reply("Let us."),
        ToolCalls([("remember", {"fact": fact})]),
        Reply("Biscuit, you said."),
    )
    # An anonymous caller's memory is the conversation's: a window of two messages leaves
    # the first turn to memory, as in the console's test (tests/console/test_memory.py).
    session = chat("socrates", memory="true", history_max_messages="2")
    session.prompt()
    session.say("My dog is called Biscuit.")
    session.say("Let us speak of virtue.")
    assert "Remembered" not in session.text  # memory did nothing for these: no line
    session.say("What is my dog called?")
    lines = session.text.splitlines()
    answer = lines.index("Socrates: Biscuit, you said.")
    note = lines[answer + 1]
    # What was recalled, then what the persona kept, cut to one short line.
    assert note.startswith(
        "Remembered (3): The user said: My dog is called Biscuit. · You said: Noted. · Kept: "
    )
    assert note.endswith("…")
    assert len(note) == REMEMBERED_WIDTH
    assert session.quit() == 0


def test_help_tells_how_to_choose_the_agent() -> None:
    result = CliRunner().invoke(app, ["chat", "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    for option in ("--url", "--agent", "--context", "--new", "--personas-dir", "--api-key"):
        assert option in result.output
    assert "/persona ID" in result.output


def test_contradicting_options_are_refused(chat: StartChat) -> None:
    both = chat("socrates", "--agent", "http://127.0.0.1:9")
    assert both.ended() == 2
    assert "--agent names the agent" in both.text
    neither = chat()
    assert neither.ended() == 2
    assert "name a persona" in neither.text


def test_a_panel_prints_each_members_answer_whole_under_its_name(
    chat: StartChat, llm: FakeLLM
) -> None:
    members = ("Albert Einstein", "Marie Curie", "Charles Darwin")
    for name in members:  # the three answer at once, word by word
        words = " ".join(f"{name.split()[0].lower()}{n}" for n in range(6))
        llm.script_for(f"You are {name}.", Reply(words, token_delay=0.05))
    session = chat("science-panel")
    session.prompt()
    session.say("What makes a good experiment?")
    for name in members:  # not interleaved: each answer whole, after its name
        words = " ".join(f"{name.split()[0].lower()}{n}" for n in range(6))
        assert f"== {name}\n{words}\n" in session.text
    assert "The answer failed" not in session.text
    assert session.quit() == 0
