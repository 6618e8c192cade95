"""Every command the terminal chat takes is named by ``chat --help`` and by ``/help`` in the
chat (issue 50): the set is the one the chat dispatches on, so a command added without its
help line fails here."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from persona_agent.cli import app
from persona_agent.cli.terminal.chat_repl import ACCEPTED, HELP
from tests.cli import test_chat as base

fake_llm = base.fake_llm
llm = base.llm
data_dir = base.data_dir
personas_dir = base.personas_dir
chat = base.chat
StartChat = base.StartChat


def unnamed(text: str) -> list[str]:
    """The commands ``text`` does not name (as a word of its own: ``/me``, not in ``/message``)."""
    return sorted(c for c in ACCEPTED if not re.search(rf"{re.escape(c)}(?![\w-])", text))


def test_the_commands_include_those_of_the_conversation_and_the_files() -> None:
    for command in ("/help", "/quit", "/exit", "/prompt", "/history", "/attach", "/voice"):
        assert command in ACCEPTED


def test_chat_help_names_every_command() -> None:
    result = CliRunner().invoke(app, ["chat", "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert unnamed(result.output) == []
    assert "/prompt (what reached the model for" in result.output


def test_help_in_the_chat_has_a_line_for_each_command() -> None:
    assert unnamed(HELP) == []


def test_help_typed_in_the_chat_names_every_command(chat: StartChat) -> None:
    session = chat("socrates")
    session.prompt()
    session.say("/help")
    shown = session.text
    assert unnamed(shown) == []
    assert "/prompt          what reached the model for the last answer" in shown
    session.say("/nonsense")
    assert "Unknown command /nonsense: /help lists them." in session.text
    assert session.quit() == 0
