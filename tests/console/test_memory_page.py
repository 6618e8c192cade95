"""Memory a user can see, in the console (issue 50.5): the page of what a persona remembers
of the caller (forget one, forget all), the chat's note when the hub cannot tell who the
caller is, and an anonymous caller's user persona kept by the browser for every new
conversation."""

from __future__ import annotations

from pathlib import Path

from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.console.conftest import (
    ConsoleHub,
    ConsoleHubFactory,
    browse,
    find,
    go,
    open_console,
    screenshot,
    severe_browser_errors,
    wait,
)
from tests.console.test_chat import last_answer, send_message
from tests.console.test_conversations import fits, sized, suffix
from tests.fakes.fake_llm import FakeLLM, Reply

__all__ = ["sized"]

KEY = "console-memory-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}


def memories(hub: ConsoleHub) -> list[str]:
    """What Socrates remembers of the key's caller, by REST."""
    page = hub.blocking.get("/api/v1/personas/socrates/memories", headers=AUTH)
    assert page.status_code == 200, page.text
    return [item["text"] for item in page.json()["items"]]


def shown(driver: webdriver.Chrome) -> list[str]:
    """The memories the page lists (read at once: forgetting removes them as it goes)."""
    texts: list[str] = driver.execute_script(
        "return [...document.querySelectorAll('#memory-list .memory-text')]"
        ".map((e) => e.textContent)"
    )
    return texts


async def test_the_memory_page_lists_and_forgets_what_the_persona_remembers(
    console_hub: ConsoleHubFactory,
    browser: webdriver.Chrome,
    llm: FakeLLM,
    sized: int,
    tmp_path: Path,
) -> None:
    llm.script(Reply("Noted."), Reply("A fine dog."))
    async with console_hub(memory=True, api_keys=KEY) as hub:
        state = (await hub.http.get("/api/v1/memory", headers=AUTH)).json()
        assert state["on"] is True
        assert state["caller"].startswith("key:")

        def scenario() -> None:
            open_console(browser, hub)
            browser.execute_script(
                "sessionStorage.setItem('persona-agent.apiKey', arguments[0])", KEY
            )
            go(browser, "chat/socrates")
            assert find(browser, "#memory-note").get_attribute("hidden") is not None  # known
            send_message(browser, "My dog is called Biscuit.")
            wait(browser, "the answer", lambda: last_answer(browser) == ("Noted.", "completed"))
            send_message(browser, "He likes the sea.")
            wait(browser, "the answer", lambda: last_answer(browser)[0] == "A fine dog.")
            wait(browser, "four memories", lambda: len(memories(hub)) == 4)

            find(browser, "#memory-link").click()
            wait(browser, "the memories", lambda: len(shown(browser)) == 4)
            assert "What Socrates remembers of you" in find(browser, ".memory-page h1").text
            assert shown(browser)[0] == "A fine dog."  # newest first
            assert "4 memories, newest first." in find(browser, "#memory-note").text
            screenshot(browser, tmp_path, f"console-memory{suffix(sized)}")
            assert fits(browser)

            browser.find_elements(By.CSS_SELECTOR, "#memory-list .forget-memory")[0].click()
            wait(browser, "one forgotten", lambda: len(shown(browser)) == 3)
            assert "A fine dog." not in memories(hub)
            assert len(memories(hub)) == 3

            find(browser, "#forget-all").click()
            find(browser, "#confirm-ok").click()
            wait(browser, "all forgotten", lambda: shown(browser) == [])
            assert "Socrates remembers nothing of you." in find(browser, "#memory-note").text
            assert memories(hub) == []
            # (the gallery's reads before the key was set, and no saved user persona, fail)
            assert [e for e in severe_browser_errors(browser) if "/memor" in e] == []

        await browse(scenario)


async def test_an_anonymous_caller_is_told_memory_lasts_one_conversation(
    console_hub: ConsoleHubFactory, browser: webdriver.Chrome
) -> None:
    async with console_hub(memory=True) as hub:

        def scenario() -> None:
            open_console(browser, hub, "chat/socrates")
            note = find(browser, "#memory-note")
            wait(browser, "the memory note", lambda: note.text)
            assert "Memory is on, but the hub does not know who you are (no API key)" in note.text
            assert "Socrates remembers within this conversation only" in note.text
            go(browser, "memory/socrates")
            wait(browser, "the page's note", lambda: find(browser, "#memory-note").text)
            assert "remembers within one conversation only" in find(browser, "#memory-note").text
            assert shown(browser) == []
            assert severe_browser_errors(browser) == []

        await browse(scenario)

    async with console_hub() as hub:  # memory off: the chat says nothing of it

        def quiet() -> None:
            open_console(browser, hub, "chat/socrates")
            assert find(browser, "#memory-note").get_attribute("hidden") is not None

        await browse(quiet)


async def test_an_anonymous_user_persona_lasts_for_the_browser(
    console_hub: ConsoleHubFactory, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    llm.script(Reply("Hello, Ada."), Reply("Hello again, Ada."))
    async with console_hub() as hub:

        def scenario() -> None:
            open_console(browser, hub, "chat/socrates")
            find(browser, "#user-persona").click()
            find(browser, "#user-name").send_keys("Ada")
            find(browser, "#user-description").send_keys("A mathematician.")
            find(browser, "#user-scope option[value=saved]").click()
            find(browser, "#user-save").click()
            wait(browser, "the name", lambda: find(browser, "#user-persona").text == "You: Ada")
            send_message(browser, "Who am I?")
            wait(browser, "the answer", lambda: last_answer(browser)[0] == "Hello, Ada.")
            go(browser, "chat/socrates")  # a new conversation, the page loaded again
            open_console(browser, hub, "chat/socrates")
            wait(browser, "the name", lambda: find(browser, "#user-persona").text == "You: Ada")
            send_message(browser, "And now?")
            wait(browser, "the answer", lambda: last_answer(browser)[0] == "Hello again, Ada.")

        await browse(scenario)
    first, second = llm.requests
    assert "Ada" in first["messages"][0]["content"]
    assert "Ada" in second["messages"][0]["content"]  # the new conversation knows her too
    assert "A mathematician." in second["messages"][0]["content"]
