"""The terminal chat as a user sees it (issue 50): answers and greetings styled where the
terminal can show them, and nothing the user typed lost to a refusal or to an answer being
written. In a real pty (pexpect), its screen read back with its attributes (pyte)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pyte.screens
import pytest
from PIL import Image

from tests.cli import test_chat as base
from tests.fakes.fake_llm import Fail, FakeLLM, Reply
from tests.servers.hub_process import hub_process

fake_llm = base.fake_llm
llm = base.llm
data_dir = base.data_dir
chat = base.chat
StartChat = base.StartChat

GREETING = '*Gwen waves from the bar* "Welcome!" Sit **anywhere**.'


@pytest.fixture
def personas_dir(tmp_path: Path) -> Path:
    return base.personas_with(tmp_path / "personas", {**base.GREETER, "greeting": GREETING})


def cells(session: base.Chat, words: str) -> list[pyte.screens.Char]:
    """The screen's characters of the first line holding ``words``, from where they begin."""
    for row, line in enumerate(session.screen.display):
        if (column := line.find(words)) >= 0:
            data = session.screen.buffer[row]
            return [data[x] for x in range(column, column + len(words))]
    raise AssertionError(f"{words!r} is not on the screen:\n{session.text}")


@pytest.fixture
def colors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.fixture
def no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")


def test_greetings_and_answers_are_styled_on_a_terminal(
    colors: None, chat: StartChat, llm: FakeLLM
) -> None:
    llm.script(Reply("*nods slowly* A **fine** question.\n- first\n- second"))
    session = chat("greeter", "--new")
    session.prompt()
    assert 'Gwen the Greeter: Gwen waves from the bar "Welcome!" Sit anywhere.' in session.text
    assert all(cell.italics for cell in cells(session, "Gwen waves from the bar"))
    assert all(cell.bold for cell in cells(session, "anywhere"))
    assert not any(cell.italics for cell in cells(session, "Sit"))
    session.say("Is it?")
    assert "Gwen the Greeter: nods slowly A fine question.\n• first\n• second" in session.text
    assert all(cell.italics for cell in cells(session, "nods slowly"))
    assert all(cell.bold for cell in cells(session, "fine"))
    assert session.quit() == 0


def test_no_color_shows_the_text_as_written(no_color: None, chat: StartChat) -> None:
    session = chat("greeter", "--new")
    session.prompt()
    assert f"Gwen the Greeter: {GREETING}" in session.text
    assert not any(cell.italics for cell in cells(session, "Gwen waves"))
    assert session.quit() == 0


def test_a_refused_message_is_kept_and_its_files_stay_attached(
    chat: StartChat, llm: FakeLLM, tmp_path: Path
) -> None:
    picture = tmp_path / "chart.png"
    Image.new("RGB", (40, 30), (20, 120, 200)).save(picture, format="PNG")
    session = chat("socrates", vision_models="no-such-model")  # his model does not see
    session.prompt()
    session.say(f"/attach {picture}")
    taken = "text and documents (Markdown, CSV, JSON, YAML, XML, PDF, HTML)"
    assert f"(Socrates does not take an image (PNG) (chart.png): it takes {taken}." in session.text
    session.say("What is in this chart?")
    assert "does not see images" in session.text  # the hub's refusal
    assert "(your message is kept; 1 file still attached: it is on the prompt again" in (
        session.text
    )
    session.expect("What is in this chart?")  # put on the prompt after it is drawn
    assert session.text.endswith("you> What is in this chart?")
    assert llm.requests == []
    session.child.send("\x15")  # Ctrl-U: the line emptied
    session.say("/attach")
    assert "  1. chart.png (image/png" in session.text
    assert f"(Socrates takes {taken})" in session.text
    session.say("/detach")
    assert "(1 file detached)" in session.text
    assert session.quit() == 0


def test_a_failed_answer_offers_the_message_again(chat: StartChat, llm: FakeLLM) -> None:
    llm.script(Fail(500, "the model is on fire"), Reply("Better now."))
    session = chat("socrates")
    session.prompt()
    session.say("Hello?")
    assert "The answer failed: " in session.text
    session.expect("Hello?")  # put on the prompt after it is drawn
    assert session.text.endswith("you> Hello?")
    session.say("")  # Enter: the message offered again is sent
    assert "Socrates: Better now." in session.text
    assert base.said(llm.requests[-1])[-1] == "Hello?"
    assert session.quit() == 0


def test_keys_typed_while_an_answer_is_written_wait_for_the_prompt(
    chat: StartChat, llm: FakeLLM
) -> None:
    llm.script(Reply("one two three four", hold_after=2), Reply("Noted."))
    session = chat("socrates")
    session.prompt()
    session.child.sendline("Count")
    session.expect("two")
    session.child.send("and then")  # typed while the answer is written
    llm.release()
    session.prompt()
    assert "Socrates: one two three four\nyou>" in session.text  # not inside the answer
    session.expect("and then")  # the next prompt shows them, as typed
    assert session.text.endswith("you> and then")
    session.say("?")
    assert base.said(llm.requests[-1])[-1] == "and then?"
    assert session.quit() == 0


def test_memory_on_for_an_anonymous_caller_is_said_in_the_chat_and_the_log(
    chat: StartChat, data_dir: Path
) -> None:
    session = chat("socrates", memory="true", memory_embeddings="hashing")
    session.prompt()
    assert "(memory is on, but the hub does not know who you are (no API key): Socrates" in (
        session.text
    )
    assert session.quit() == 0
    log = (data_dir / "chat-hub.log").read_text(encoding="utf-8")
    assert "Memory is on, within one conversation at a time: no API keys or OIDC" in log

    quiet = chat("socrates", "--new")  # memory off: nothing said
    quiet.prompt()
    assert "memory is on" not in quiet.text
    assert quiet.quit() == 0


@pytest.fixture(scope="module")
def memory_hub(fake_llm: FakeLLM, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``persona-agent serve`` as a process with memory on and no API keys: its URL."""
    root = tmp_path_factory.mktemp("memory-hub")
    settings = {
        "LLM_BASE_URL": fake_llm.base_url,
        "LLM_API_KEY": "test-key",
        "MEMORY": "true",
        "MEMORY_EMBEDDINGS": "hashing",
    }
    with hub_process(base.personas_with(root / "personas"), root / "data", **settings) as (
        url,
        _process,
    ):
        yield url


def test_memory_on_for_an_anonymous_caller_is_said_against_a_running_hub(
    chat: StartChat, memory_hub: str
) -> None:
    state = httpx.get(f"{memory_hub}/api/v1/memory").json()
    assert state == {"on": True, "caller": None}  # what the chat asks at start
    session = chat("socrates", "--url", memory_hub, "--new")
    session.prompt()
    assert "(memory is on, but the hub does not know who you are (no API key): Socrates" in (
        session.text
    )
    assert session.quit() == 0
