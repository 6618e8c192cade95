"""The terminal chat as a user sees it (issue 50): answers and greetings styled where the
terminal can show them, and nothing the user typed lost to a refusal or to an answer being
written. In a real pty (pexpect), its screen read back with its attributes (pyte)."""

from __future__ import annotations

from pathlib import Path

import pyte.screens
import pytest

from tests.cli import test_chat as base
from tests.fakes.fake_llm import FakeLLM, Reply

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
