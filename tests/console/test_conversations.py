"""A stored conversation steered in the console (Chromium), at 1280 and 400 px: ‹ 1/2 ›
between an answer's alternatives and regenerate, edit in place and delete, fork, the
greeting picker of a character card with alternate greetings, and who the user is.

What the hub then keeps is read back over its REST API (/api/v1/conversations), and what
the model was sent from the scripted LLM's recorded requests."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from tests.console.conftest import (
    ConsoleHub,
    browse,
    find,
    open_console,
    screenshot,
    severe_browser_errors,
)
from tests.console.conftest import wait as wait_for
from tests.console.test_chat import (
    TAUGHT,
    VIRTUE,
    agent_bubbles,
    context_of,
    last_answer,
    partial_answer,
    send_message,
    user_bubbles,
)
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.personas.cards import MIRA_V2

_T = TypeVar("_T")
MORE = " Shall we ask Meno?"
HABIT = "Virtue is a habit of the soul, practised until it is second nature."
MIRA_FIRST = "*Captain Mira Voss looks up from the star chart.* So you're the new mechanic, User?"
MIRA_OTHER = "*The airlock hisses.* You're late, User."


def wait(driver: webdriver.Chrome, what: str, condition: Callable[[], _T]) -> _T:
    """:func:`~tests.console.conftest.wait`, through the moments a bubble is replaced (the
    conversation shown again after each operation): an element gone stale reads as not yet."""

    def settled() -> _T | None:
        try:
            return condition()
        except StaleElementReferenceException:
            return None

    return wait_for(driver, what, settled)


@pytest.fixture(params=[1280, 400], ids=["1280px", "400px"])
def sized(request: pytest.FixtureRequest, browser: webdriver.Chrome) -> Iterator[int]:
    """The browser's window at each width (back to 1280 after the test): the width."""
    width: int = request.param
    browser.set_window_size(width, 860)
    try:
        yield width
    finally:
        browser.set_window_size(1280, 860)


def suffix(width: int) -> str:
    return "" if width == 1280 else f"-{width}"


def turns(driver: webdriver.Chrome, kind: str) -> list[WebElement]:
    """The transcript's bubbles of one kind: user, answer, greeting."""
    return driver.find_elements(By.CSS_SELECTOR, f'#transcript .turn[data-kind="{kind}"]')


def click(driver: webdriver.Chrome, kind: str, index: int, action: str) -> None:
    """Click an action (regenerate, edit, fork, ...) of the ``index``-th bubble of ``kind``,
    once the bubble has it (its turn read back from the hub)."""

    def button() -> WebElement | None:
        shown = turns(driver, kind)
        found = (
            shown[index].find_elements(By.CSS_SELECTOR, f".turn-actions .{action}") if shown else []
        )
        return found[0] if found and found[0].is_enabled() else None

    def clicked() -> bool:
        element = button()
        if element is None:
            return False
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        element.click()
        return True

    wait(driver, f"the {action} button of {kind} {index} clicked", clicked)


def swipe_count(driver: webdriver.Chrome, kind: str = "answer") -> str:
    """The ‹ k/n › of the last bubble of ``kind``, or ''."""
    shown = turns(driver, kind)
    counts = shown[-1].find_elements(By.CSS_SELECTOR, ".swipe-count") if shown else []
    return counts[0].text if counts else ""


def fits(driver: webdriver.Chrome) -> bool:
    """Nothing wider than the window."""
    return bool(
        driver.execute_script(
            "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
    )


def prompt(request: dict[str, Any]) -> list[tuple[str, str]]:
    """The conversation the model was sent (not the system prompt)."""
    return [(m["role"], m["content"]) for m in request["messages"] if m["role"] != "system"]


async def test_regenerate_and_swipe_between_answers(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM, sized: int, tmp_path: Path
) -> None:
    llm.script(Reply(VIRTUE), Reply(HABIT), Reply(TAUGHT), Reply(MORE))

    def scenario() -> str:
        open_console(browser, hub, "chat/socrates")
        send_message(browser, "What is virtue?")
        wait(browser, "the answer", lambda: last_answer(browser) == (VIRTUE, "completed"))
        wait(browser, "one answer of one", lambda: swipe_count(browser) == "1/1")
        click(browser, "answer", -1, "regenerate")
        wait(browser, "another answer", lambda: last_answer(browser) == (HABIT, "completed"))
        assert swipe_count(browser) == "2/2"
        screenshot(browser, tmp_path, f"console-swipes{suffix(sized)}")
        click(browser, "answer", -1, "swipe-prev")
        wait(browser, "the first answer again", lambda: last_answer(browser)[0] == VIRTUE)
        assert swipe_count(browser) == "1/2"
        assert fits(browser)
        send_message(browser, "Can it be taught?")
        wait(browser, "the next answer", lambda: last_answer(browser) == (TAUGHT, "completed"))
        assert [text for text, _ in agent_bubbles(browser)] == [VIRTUE, TAUGHT]
        click(browser, "answer", -1, "continue")  # the last answer goes on
        wait(browser, "the answer continued", lambda: last_answer(browser)[0] == TAUGHT + MORE)
        assert severe_browser_errors(browser) == []
        return context_of(browser)

    context = await browse(scenario)
    assert "Continue your last message" in str(llm.requests[-1]["messages"][-1]["content"])
    # Regenerating asked with the conversation up to the user's message; the selected
    # branch (the first answer) went on.
    assert prompt(llm.requests[1]) == [("user", "What is virtue?")]
    assert prompt(llm.requests[2]) == [
        ("user", "What is virtue?"),
        ("assistant", VIRTUE),
        ("user", "Can it be taught?"),
    ]
    stored = (await hub.http.get(f"/api/v1/conversations/socrates/{context}")).json()
    swipes = stored["messages"][1]["swipes"]
    assert (swipes["selected"], swipes["count"], swipes["texts"]) == (0, 2, [VIRTUE, HABIT])


async def test_regenerate_streams_like_a_first_answer(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM, sized: int, tmp_path: Path
) -> None:
    """Regenerate (issue 50.4): the new answer's tokens are shown as they come, in place of
    the one regenerated, then its tokens and time as a first answer's, the second of two."""
    llm.script(Reply(VIRTUE), Reply(HABIT, token_delay=0.05, hold_after=4))

    def scenario() -> None:
        open_console(browser, hub, "chat/socrates")
        send_message(browser, "What is virtue?")
        wait(browser, "the answer", lambda: last_answer(browser) == (VIRTUE, "completed"))
        click(browser, "answer", -1, "regenerate")
        llm.wait_held(timeout=60)
        partial = wait_for(browser, "the new answer as it comes", lambda: partial_answer(browser))
        assert HABIT.startswith(partial)
        assert len(partial) < len(HABIT)
        assert len(agent_bubbles(browser)) == 1  # in place of the answer regenerated
        screenshot(browser, tmp_path, f"console-regenerate-streaming{suffix(sized)}")
        assert fits(browser)
        llm.release()
        wait(browser, "the whole answer", lambda: last_answer(browser) == (HABIT, "completed"))
        meta = find(browser, "#transcript .turn.agent:not(.greeting) .meta").text
        assert re.fullmatch(r"\d+ tokens · \d+\.\d s( · .+)?", meta), meta
        assert swipe_count(browser) == "2/2"
        assert severe_browser_errors(browser) == []

    await browse(scenario)


async def test_edit_in_place_and_delete(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM, sized: int, tmp_path: Path
) -> None:
    llm.script(Reply(VIRTUE), Reply(TAUGHT))

    def edit(kind: str, text: str) -> None:
        click(browser, kind, -1, "edit")
        field = find(browser, "#transcript .edit-form textarea")
        field.clear()
        field.send_keys(text)
        find(browser, "#transcript .edit-form .edit-save").click()

    def scenario() -> str:
        open_console(browser, hub, "chat/socrates")
        send_message(browser, "What is virtue?")
        wait(browser, "the answer", lambda: last_answer(browser) == (VIRTUE, "completed"))
        edit("user", "What is courage?")
        wait(browser, "the edited message", lambda: user_bubbles(browser) == ["What is courage?"])
        edit("answer", "Courage is knowing what not to fear.")
        wait(
            browser,
            "the edited answer",
            lambda: last_answer(browser)[0] == "Courage is knowing what not to fear.",
        )
        screenshot(browser, tmp_path, f"console-edit{suffix(sized)}")
        assert fits(browser)
        click(browser, "answer", -1, "delete-message")
        find(browser, "#confirm-dialog[open] #confirm-ok").click()
        wait(browser, "the answer deleted", lambda: agent_bubbles(browser) == [])
        assert user_bubbles(browser) == ["What is courage?"]
        send_message(browser, "Then teach me.")
        wait(browser, "the next answer", lambda: last_answer(browser) == (TAUGHT, "completed"))
        assert severe_browser_errors(browser) == []
        return context_of(browser)

    context = await browse(scenario)
    assert prompt(llm.requests[-1]) == [
        ("user", "What is courage?"),
        ("user", "Then teach me."),
    ]
    stored = (await hub.http.get(f"/api/v1/conversations/socrates/{context}")).json()
    assert [m["content"] for m in stored["messages"]] == [
        "What is courage?",
        "Then teach me.",
        TAUGHT,
    ]


async def test_fork_opens_a_new_conversation_up_to_a_message(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM, sized: int, tmp_path: Path
) -> None:
    llm.script(Reply(VIRTUE), Reply(TAUGHT), Reply(HABIT))

    def scenario() -> tuple[str, str]:
        open_console(browser, hub, "chat/socrates")
        send_message(browser, "What is virtue?")
        wait(browser, "the answer", lambda: last_answer(browser) == (VIRTUE, "completed"))
        send_message(browser, "Can it be taught?")
        wait(browser, "the answer", lambda: last_answer(browser) == (TAUGHT, "completed"))
        first = context_of(browser)
        click(browser, "answer", 0, "fork")
        wait(browser, "the fork opened", lambda: context_of(browser) not in ("", first))
        forked = context_of(browser)
        wait(browser, "the fork's turns", lambda: agent_bubbles(browser) == [(VIRTUE, "completed")])
        assert user_bubbles(browser) == ["What is virtue?"]
        listed = browser.find_elements(
            By.CSS_SELECTOR, f'#conversation-list li[data-context-id="{forked}"]'
        )
        assert len(listed) == 1  # this browser knows it: no question before joining
        screenshot(browser, tmp_path, f"console-fork{suffix(sized)}")
        assert fits(browser)
        send_message(browser, "Is it a habit?")
        wait(browser, "the fork's answer", lambda: last_answer(browser) == (HABIT, "completed"))
        assert severe_browser_errors(browser) == []
        return first, forked

    first, _forked = await browse(scenario)
    assert prompt(llm.requests[-1]) == [
        ("user", "What is virtue?"),
        ("assistant", VIRTUE),
        ("user", "Is it a habit?"),
    ]
    original = (await hub.http.get(f"/api/v1/conversations/socrates/{first}")).json()
    assert len(original["messages"]) == 4  # the conversation forked from is whole


async def test_the_greeting_picker_opens_with_an_alternate_greeting(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM, sized: int, tmp_path: Path
) -> None:
    upload = await hub.http.post(
        "/api/v1/personas/upload",
        headers={"X-Requested-With": "tests"},
        files={"file": ("mira.json", json.dumps(MIRA_V2).encode())},
        params={"id": "mira"},
    )
    assert upload.status_code == 201, upload.text
    llm.script(Reply("Get to the reactor."))

    def greeting() -> str:
        """The greeting as written (its *actions* are shown in italics, without asterisks)."""
        shown = turns(browser, "greeting")
        if not shown or not shown[0].find_elements(By.CSS_SELECTOR, ".text em"):
            return ""
        source: str = browser.execute_script("return arguments[0].source", shown[0])
        return source

    def scenario() -> str:
        open_console(browser, hub, "chat/mira")
        wait(browser, "the first greeting", lambda: greeting() == MIRA_FIRST)
        assert swipe_count(browser, "greeting") == "1/2"
        find(browser, ".greeting-picker .swipe-next").click()
        wait(browser, "the other greeting", lambda: greeting() == MIRA_OTHER)
        assert swipe_count(browser, "greeting") == "2/2"
        screenshot(browser, tmp_path, f"console-greetings{suffix(sized)}")
        assert fits(browser)
        send_message(browser, "Sorry, captain.")
        wait(
            browser,
            "the answer",
            lambda: last_answer(browser) == ("Get to the reactor.", "completed"),
        )
        assert greeting() == MIRA_OTHER
        assert not browser.find_elements(By.CSS_SELECTOR, ".greeting-picker")
        assert severe_browser_errors(browser) == []
        return context_of(browser)

    context = await browse(scenario)
    assert prompt(llm.requests[-1])[:2] == [("assistant", MIRA_OTHER), ("user", "Sorry, captain.")]
    stored = (await hub.http.get(f"/api/v1/conversations/mira/{context}")).json()
    assert stored["messages"][0]["content"] == MIRA_OTHER


async def test_who_the_user_is_goes_into_the_prompt(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    llm.script(Reply("Welcome aboard, Ann."))

    def scenario() -> str:
        open_console(browser, hub, "chat/socrates")
        find(browser, "#user-persona").click()
        find(browser, "#user-dialog[open] #user-name").send_keys("Ann")
        find(browser, "#user-description").send_keys("A sailor who collects maps.")
        saved = find(browser, "#user-scope option[value='saved']")
        # an anonymous caller's saved user persona is the browser's (test_memory_page.py)
        assert "all my conversations in this browser" in saved.text
        find(browser, "#user-save").click()
        wait(
            browser,
            "the dialog closed",
            lambda: not browser.find_elements(By.CSS_SELECTOR, "#user-dialog"),
        )
        assert find(browser, "#user-persona").text == "You: Ann"
        send_message(browser, "Hello!")
        wait(
            browser,
            "the answer",
            lambda: last_answer(browser) == ("Welcome aboard, Ann.", "completed"),
        )
        assert find(browser, "#user-persona").text == "You: Ann"
        assert severe_browser_errors(browser) == []
        return context_of(browser)

    context = await browse(scenario)
    system = llm.requests[-1]["messages"][0]["content"]
    assert "A sailor who collects maps." in system
    user = (await hub.http.get(f"/api/v1/conversations/socrates/{context}/user")).json()
    assert user == {"name": "Ann", "description": "A sailor who collects maps."}
