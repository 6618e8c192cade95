"""What reached the model, in the console (issue 50, docs/prompt.md; Chromium at 1280 and
400 px): the Prompt button of an answer opens its prompt by section, the lore entry that
fired with its key and the entry the book's budget cut; what memory and the documents found
that their budgets left out; markup in a card's lore is shown as text, never run; a panel's
answer has a prompt for each member."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from tests.console.conftest import (
    ConsoleHub,
    ConsoleHubFactory,
    browse,
    open_console,
    screenshot,
    severe_browser_errors,
)
from tests.console.conftest import wait as wait_for
from tests.console.test_chat import last_answer, send_message
from tests.console.test_conversations import click, fits, sized, suffix, wait
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.persona_yaml import persona, write
from tests.integration.test_prompt_records import upload_market_documents

__all__ = ["sized"]

HOSTILE = (
    "Dragons sleep. <img src=x onerror=\"document.title='pwned'\">"
    '<script>document.title="pwned"</script>'
)
KEEPER = persona(
    "Lena the Lorekeeper",
    lore={
        "token_budget": 40,
        "entries": [
            {"comment": "Dragons", "keys": ["dragon"], "content": HOSTILE, "priority": 9},
            {"comment": "The castle", "keys": ["castle"], "content": "Giants built it. " * 12},
        ],
    },
)


def first(driver: webdriver.Chrome, css: str) -> WebElement | None:
    found = driver.find_elements(By.CSS_SELECTOR, css)
    return found[0] if found else None


def answered(driver: webdriver.Chrome, answer: str) -> bool:
    return last_answer(driver) == (answer, "completed")


def shows_a_cut(section: WebElement) -> bool:
    return "Cut: " in section.text


def three(driver: webdriver.Chrome, css: str) -> list[WebElement] | None:
    found = driver.find_elements(By.CSS_SELECTOR, css)
    return found if len(found) == 3 else None


@pytest.fixture(autouse=True)
def keeper(personas_dir: Path) -> None:
    write(personas_dir, "keeper", KEEPER)


async def test_an_answers_prompt_panel_shows_its_sections(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM, sized: int, tmp_path: Path
) -> None:
    llm.script(Reply("They sleep under the mountain."))

    def scenario() -> None:
        open_console(browser, hub, "chat/keeper")
        send_message(browser, "Where do the dragon and the castle sleep?")
        wait(browser, "the answer", lambda: last_answer(browser)[1] == "completed")
        click(browser, "answer", -1, "show-prompt")
        panel = wait_for(browser, "the prompt panel", lambda: first(browser, ".prompt-panel"))
        lore = panel.find_element(By.CSS_SELECTOR, '.prompt-section[data-section="lore"]')
        lore.find_element(By.TAG_NAME, "summary").click()
        wait(browser, "the lore opened", lambda: "Dragons [keys: dragon]" in lore.text)
        assert "Lore entries that fired" in lore.text
        assert "Cut: The castle [keys: castle]" in lore.text
        assert "over the book's token budget" in lore.text
        assert HOSTILE in lore.find_element(By.CSS_SELECTOR, ".prompt-text").text  # as text
        assert panel.find_elements(By.CSS_SELECTOR, "img, script") == []
        titles = [
            s.get_attribute("data-section")
            for s in panel.find_elements(By.CSS_SELECTOR, ".prompt-section")
        ]
        assert titles[:3] == ["system", "card", "lore"]
        assert titles[-1] == "conversation"
        assert browser.title != "pwned"
        browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", lore)
        screenshot(browser, tmp_path, f"console-prompt{suffix(sized)}")
        assert fits(browser)
        click(browser, "answer", -1, "show-prompt")  # and closed again
        wait(
            browser,
            "the panel closed",
            lambda: not browser.find_elements(By.CSS_SELECTOR, ".prompt-panel"),
        )
        assert severe_browser_errors(browser) == []

    await browse(scenario)


async def test_the_panel_says_what_memory_and_the_documents_budgets_left_out(
    console_hub: ConsoleHubFactory,
    browser: webdriver.Chrome,
    llm: FakeLLM,
    sized: int,
    tmp_path: Path,
    personas_dir: Path,
) -> None:
    write(personas_dir, "scribe", persona("Scribe", memory={"enabled": True, "max_items": 1}))
    llm.script(Reply("Noted."), Reply("Let us."), Reply("Three obols."))
    settings = {"memory": True, "history_max_messages": 2, "knowledge_max_passages": 1}
    async with console_hub(**settings) as hub:
        await upload_market_documents(hub.http, "scribe")

        def scenario() -> None:
            open_console(browser, hub, "chat/scribe")
            # The window of two messages leaves the first turn to memory.
            for said, answer in (
                ("My dog is called Biscuit.", "Noted."),
                ("Let us speak of the weather.", "Let us."),
                ("What does my dog pay in obols a day?", "Three obols."),
            ):
                send_message(browser, said)
                wait(browser, "the answer", partial(answered, browser, answer))
            click(browser, "answer", -1, "show-prompt")
            panel = wait_for(browser, "the prompt panel", lambda: first(browser, ".prompt-panel"))
            for name in ("memory", "knowledge"):
                part = panel.find_element(
                    By.CSS_SELECTOR, f'.prompt-section[data-section="{name}"]'
                )
                summary = part.find_element(By.TAG_NAME, "summary")
                assert summary.text.endswith("· 1 cut"), summary.text
                summary.click()
                wait(browser, f"the {name} opened", partial(shows_a_cut, part))
            memory = panel.find_element(By.CSS_SELECTOR, '.prompt-section[data-section="memory"]')
            assert "over memory's limit of 1 items a turn" in memory.text
            cut = memory.find_element(By.CSS_SELECTOR, ".prompt-cut .prompt-text").text
            assert cut in ("The user said: My dog is called Biscuit.", "You said: Noted.")
            knowledge = panel.find_element(
                By.CSS_SELECTOR, '.prompt-section[data-section="knowledge"]'
            )
            assert "over the knowledge limit of 1 passages a turn" in knowledge.text
            assert "obols a day" in knowledge.find_element(By.CSS_SELECTOR, ".prompt-cut").text
            browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", memory)
            screenshot(browser, tmp_path, f"console-prompt-cut{suffix(sized)}")
            assert fits(browser)
            assert severe_browser_errors(browser) == []

        await browse(scenario)


async def test_a_panels_answer_has_a_prompt_for_each_member(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    llm.script_for("You are Albert Einstein.", Reply("Imagination."))
    llm.script_for("You are Marie Curie.", Reply("Patience."))
    llm.script_for("You are Charles Darwin.", Reply("Variation."))

    def scenario() -> None:
        open_console(browser, hub, "chat/science-panel")
        send_message(browser, "What drives science?")
        wait(browser, "the panel's answer", lambda: last_answer(browser)[1] == "completed")
        buttons = wait_for(
            browser,
            "a prompt button per member",
            lambda: three(browser, ".member-prompts .show-prompt"),
        )
        assert {b.text for b in buttons} == {
            "Prompt: Albert Einstein",
            "Prompt: Marie Curie",
            "Prompt: Charles Darwin",
        }
        curie = next(b for b in buttons if b.text.endswith("Marie Curie"))
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", curie)
        curie.click()
        panel = wait_for(browser, "Marie Curie's prompt", lambda: first(browser, ".prompt-panel"))
        conversation = panel.find_element(
            By.CSS_SELECTOR, '.prompt-section[data-section="conversation"]'
        )
        conversation.find_element(By.TAG_NAME, "summary").click()
        wait(browser, "the question in it", lambda: "What drives science?" in conversation.text)
        assert severe_browser_errors(browser) == []

    await browse(scenario)
