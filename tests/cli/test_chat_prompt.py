"""The terminal chat's ``/prompt`` (issue 50, docs/prompt.md), in a real pty against
``persona-agent serve`` as a process on the scripted LLM: the last answer's prompt by
section, the lore entry that fired with its key, the entry the book's budget cut."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from persona_agent.cli.terminal.chat_prompt import show_prompt
from tests.cli.test_chat import StartChat, chat, data_dir, fake_llm, llm, personas_with
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.servers.hub_process import hub_process

__all__ = ["chat", "data_dir", "fake_llm", "llm"]

KEEPER = {
    "name": "Lena the Lorekeeper",
    "description": "Lena keeps the lore of the valley.",
    "personal_background": "Lena was born in the valley.",
    "language_style": {"tone": "calm"},
    "knowledge_domains": {"Lore": ["dragons"]},
    "lore": {
        "token_budget": 20,
        "entries": [
            {"comment": "Dragons", "keys": ["dragon"], "content": "Dragons sleep.", "priority": 9},
            {"comment": "The castle", "keys": ["castle"], "content": "Giants built it. " * 8},
        ],
    },
}


@pytest.fixture
def personas_dir(tmp_path: Path) -> Path:
    return personas_with(tmp_path / "personas", KEEPER)


@pytest.fixture(scope="module")
def hub(fake_llm: FakeLLM, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``persona-agent serve`` as a process, on the scripted LLM: its URL."""
    root = tmp_path_factory.mktemp("hub")
    personas = personas_with(root / "personas", KEEPER)
    llm = {"LLM_BASE_URL": fake_llm.base_url, "LLM_API_KEY": "test-key", "LLM_MAX_RETRIES": "0"}
    with hub_process(personas, root / "data", **llm) as (url, _process):
        yield url


def test_prompt_shows_the_last_answers_prompt_by_section(
    chat: StartChat, llm: FakeLLM, hub: str
) -> None:
    session = chat("greeter", "--url", hub, "--new")
    session.prompt()
    session.say("/prompt")
    assert "no conversation yet: send a first message" in session.text
    llm.script(Reply("They sleep."))
    session.say("Where is the dragon, and the castle?")
    session.child.sendline("/prompt")
    session.expect("The prompt of the last answer")
    session.expect("System prompt (~")
    session.expect("Card fields (~")
    session.expect("Lore entries that fired (~4 tokens)")
    session.expect("Dragons [keys: dragon]: Dragons sleep.")
    session.expect("cut: The castle [keys: castle], ~34 tokens: over the book's token budget")
    session.expect("Conversation turns (~")
    session.expect("User: Where is the dragon, and the castle?")
    session.prompt()
    assert session.quit() == 0


def test_prompt_prints_what_memorys_and_the_documents_budgets_left_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A record as the hub serves it (tests/integration/test_prompt_records.py makes one):
    a memory and a passage left out are printed with their reason and their text."""
    cut = {"label": "Memory", "tokens": 4, "reason": "over memory's limit of 1 items a turn"}
    passage = {
        "label": "fish.md, passage 1",
        "tokens": 14,
        "reason": "over the knowledge limit of 1 passages a turn",
        "text": "A fishmonger pays two obols a day.\nIn the northern stoa.",
    }
    record = {
        "model": "gpt-4o-mini",
        "messages": 4,
        "tokens": 30,
        "promptTokens": 28,
        "modelCalls": 1,
        "sections": [
            {
                "title": "Memory recalled",
                "tokens": 10,
                "items": [{"label": "Memory 1", "tokens": 10, "text": "The user said: Biscuit."}],
                "cut": [{**cut, "text": "You said: Noted."}],
            },
            {"title": "Knowledge passages", "tokens": 0, "items": [], "cut": [passage]},
        ],
    }
    show_prompt(record)
    printed = capsys.readouterr().out
    assert "── Memory recalled (~10 tokens)\n  Memory 1: The user said: Biscuit.\n" in printed
    assert "  cut: Memory, ~4 tokens: over memory's limit of 1 items a turn\n" in printed
    assert "    You said: Noted.\n" in printed
    assert "  cut: fish.md, passage 1, ~14 tokens: over the knowledge limit" in printed
    assert "    A fishmonger pays two obols a day.\n    In the northern stoa.\n" in printed
