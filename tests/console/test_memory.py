"""What memory did for an answer, in the console (docs/memory.md): a folded "Remembered"
note under the answer, from its memory-v1 part, as it streams and when the conversation
is read back from the hub."""

from __future__ import annotations

from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.console.conftest import (
    ConsoleHubFactory,
    browse,
    find,
    go,
    open_console,
    severe_browser_errors,
    wait,
)
from tests.console.test_chat import context_of, last_answer, send_message
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls

FACT = "The user's dog is called Biscuit."


def remembered(driver: webdriver.Chrome) -> list[str]:
    """The items of the last answer's "Remembered" note, opened (none: no note)."""
    answers = driver.find_elements(By.CSS_SELECTOR, "#transcript .turn.agent:not(.greeting)")
    notes = answers[-1].find_elements(By.CSS_SELECTOR, "details.remembered") if answers else []
    if not notes:
        return []
    if notes[0].get_attribute("open") is None:
        notes[0].find_element(By.CSS_SELECTOR, "summary").click()
    return [item.text for item in notes[0].find_elements(By.CSS_SELECTOR, "li")]


async def test_an_answer_shows_what_memory_recalled_and_kept_for_it(
    console_hub: ConsoleHubFactory, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    llm.script(
        Reply("Noted."),
        Reply("Let us."),
        ToolCalls([("remember", {"fact": FACT})]),
        Reply("Biscuit, you said."),
    )
    # An anonymous caller's memory is the conversation's: the window of two messages
    # leaves the first turn to memory.
    async with console_hub(memory=True, history_max_messages=2) as hub:

        def scenario() -> None:
            open_console(browser, hub, "chat/socrates")
            send_message(browser, "My dog is called Biscuit.")
            wait(browser, "the answer", lambda: last_answer(browser) == ("Noted.", "completed"))
            assert remembered(browser) == []  # memory did nothing for it: no note
            send_message(browser, "Let us speak of virtue.")
            wait(browser, "the answer", lambda: last_answer(browser) == ("Let us.", "completed"))
            send_message(browser, "What is my dog called?")
            done = ("Biscuit, you said.", "completed")
            wait(browser, "the answer", lambda: last_answer(browser) == done)
            note = find(browser, "#transcript .turn.agent:last-child details.remembered summary")
            assert note.text.startswith("Remembered (")
            items = remembered(browser)
            assert "The user said: My dog is called Biscuit." in items
            assert f"Kept: {FACT}" in items
            # Read back from the hub (ListTasks of the context): the same note.
            context = context_of(browser)
            go(browser, "")
            go(browser, f"chat/socrates/{context}")
            wait(browser, "the turns", lambda: last_answer(browser) == done)
            assert remembered(browser) == items
            assert severe_browser_errors(browser) == []

        await browse(scenario)
