"""A message whose answer was deleted, in the console (issue 50.7): it offers *Answer*,
which answers it (REST regenerate) without replacing any earlier answer."""

from __future__ import annotations

from selenium import webdriver

from tests.console.conftest import (
    ConsoleHub,
    browse,
    find,
    open_console,
    severe_browser_errors,
    wait,
)
from tests.console.test_chat import last_answer, send_message, user_bubbles
from tests.console.test_conversations import click
from tests.fakes.fake_llm import FakeLLM, Reply


def answers(driver: webdriver.Chrome) -> list[str]:
    """The answers' texts, read at once (the transcript is redrawn as the turns change)."""
    texts: list[str] = driver.execute_script(
        "return [...document.querySelectorAll('#transcript .turn.agent:not(.greeting) .text')]"
        ".map((e) => e.textContent.trim())"
    )
    return texts


async def test_a_message_left_unanswered_is_answered_again(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    llm.script(Reply("First."), Reply("Second."), Reply("Second, again."))

    def scenario() -> None:
        open_console(browser, hub, "chat/socrates")
        send_message(browser, "One?")
        wait(browser, "the answer", lambda: last_answer(browser) == ("First.", "completed"))
        send_message(browser, "Two?")
        wait(browser, "the answer", lambda: last_answer(browser) == ("Second.", "completed"))
        click(browser, "answer", -1, "delete-message")
        find(browser, "#confirm-dialog[open] #confirm-ok").click()
        wait(browser, "the answer deleted", lambda: answers(browser) == ["First."])
        click(browser, "user", -1, "answer-again")
        wait(
            browser,
            "the new answer",
            lambda: answers(browser) == ["First.", "Second, again."],
        )
        assert user_bubbles(browser) == ["One?", "Two?"]
        assert severe_browser_errors(browser) == []

    await browse(scenario)
    messages = llm.requests[-1]["messages"][1:]
    assert [(m["role"], m["content"]) for m in messages][-3:] == [
        ("user", "One?"),
        ("assistant", "First."),
        ("user", "Two?"),
    ]
