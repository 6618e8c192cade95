"""The console on a hub that needs API keys: a 401 asks for the key, which is kept in the
tab's sessionStorage and sent with every request (A2A and the REST API alike)."""

from __future__ import annotations

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.console.conftest import (
    ConsoleHubFactory,
    browse,
    find,
    go,
    open_console,
    wait,
)
from tests.console.test_chat import last_answer, send_message
from tests.console.test_editor import checks
from tests.fakes.fake_llm import FakeLLM, Reply

KEY = "console-test-key-0123456789"


def answer_key_prompt(driver: webdriver.Chrome, asked: str, key: str | None) -> None:
    """Answer the key dialog once it asks a question with ``asked`` in it (None: cancel)."""
    wait(
        driver,
        f"the key dialog asking {asked!r}",
        lambda: (
            driver.find_elements(By.CSS_SELECTOR, "#key-dialog[open]")
            and asked in find(driver, "#key-dialog-message").text
        ),
    )
    if key is None:
        find(driver, "#key-dialog-cancel").click()
    else:
        find(driver, "#key-dialog-input").send_keys(key, Keys.ENTER)  # Enter: use it


def stored_key(driver: webdriver.Chrome) -> tuple[str | None, str | None]:
    """The key in sessionStorage, and whatever localStorage holds under its name."""
    return (
        driver.execute_script("return sessionStorage.getItem('persona-agent.apiKey')"),
        driver.execute_script("return localStorage.getItem('persona-agent.apiKey')"),
    )


async def test_the_key_is_asked_for_kept_in_the_tab_and_sent(
    console_hub: ConsoleHubFactory, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    llm.script(Reply("Only with a key."))
    async with console_hub(api_keys=KEY, a2a_access="authenticated") as hub:

        def scenario() -> None:
            open_console(browser, hub)  # discovery and cards are public
            find(browser, '.persona[data-persona-id="socrates"][data-card-version]')
            assert not browser.find_elements(By.CSS_SELECTOR, "#key-dialog[open]")

            go(browser, "chat/socrates")
            send_message(browser, "Who may talk to you?")
            answer_key_prompt(browser, "needs an API key", "a-wrong-key")
            answer_key_prompt(browser, "refused the key", KEY)
            wait(
                browser,
                "the answer",
                lambda: last_answer(browser) == ("Only with a key.", "completed"),
            )
            assert stored_key(browser) == (KEY, None)
            assert find(browser, "#key-state").text == "key set for this tab"

            # The REST API takes the same key: the editor loads and saves without asking.
            go(browser, "edit/hermit")
            checks(browser, "valid")
            find(browser, "#save").click()
            wait(browser, "the save", lambda: "Saved" in find(browser, "#save-status").text)
            assert not browser.find_elements(By.CSS_SELECTOR, "#key-dialog[open]")

            # Forgotten, the key is asked for again; refused, the page says why.
            find(browser, "#key-forget").click()
            assert stored_key(browser) == (None, None)
            go(browser, "edit/socrates", ready=False)
            answer_key_prompt(browser, "needs an API key", None)
            assert "Authentication required" in find(browser, ".editor .error-box").text

            # Given in the bar at the top, it is used from then on.
            find(browser, "#key-input").send_keys(KEY)
            find(browser, "#key-use").click()
            find(browser, '.editor[data-persona-id="socrates"]')
            checks(browser, "valid")
            assert stored_key(browser) == (KEY, None)

        await browse(scenario)
    assert llm.requests[-1]["messages"][-1]["content"] == "Who may talk to you?"
