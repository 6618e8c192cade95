"""Nothing the user wrote is lost (Chromium): the composer says what the persona's model
takes and refuses a picture for one that cannot see, in words, before anything is sent; a
message the hub refuses goes back into the composer with its files; and a turn a killed hub
never answered is shown again after the restart, with a button that sends it again."""

from __future__ import annotations

import asyncio
import base64
import uuid
from pathlib import Path
from typing import Any

import httpx
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.console.conftest import (
    ConsoleHub,
    ConsoleHubFactory,
    browse,
    find,
    open_console,
    screenshot,
    severe_browser_errors,
    wait,
)
from tests.console.test_attachments import DROP, NOTES, PASTE, png, previews
from tests.console.test_chat import last_answer, send_message, user_bubbles
from tests.console.test_conversations import fits, sized, suffix
from tests.fakes.fake_llm import FakeLLM, Hang, Reply
from tests.servers.hub_process import hub_process

__all__ = ["sized"]

BLIND = "Socrates's model cannot see images; send text or a document."
TYPED = "What do you make of my notes?"


def composer(driver: webdriver.Chrome) -> tuple[str, list[str]]:
    """What the composer holds: the field's text and the attachments' previews."""
    return str(find(driver, "#message-input").get_property("value")), previews(driver)


async def test_a_persona_that_cannot_see_says_so_and_an_image_is_refused_in_words(
    console_hub: ConsoleHubFactory,
    browser: webdriver.Chrome,
    llm: FakeLLM,
    sized: int,
    tmp_path: Path,
) -> None:
    def scenario(hub: ConsoleHub) -> None:
        open_console(browser, hub, "chat/socrates")
        hint = find(browser, "#attach-hint")
        wait(browser, "what Socrates takes", lambda: hint.is_displayed())
        assert hint.text == "Text and documents only: Socrates's model cannot see images."
        assert "image/" not in (find(browser, "#attach-input").get_attribute("accept") or "")
        composer_element = find(browser, "#composer")
        browser.execute_script(DROP, composer_element, "notes.md", "text/markdown", NOTES)
        wait(
            browser,
            "the document attached",
            lambda: previews(browser) == [f"notes.md · {len(NOTES)} B"],
        )
        find(browser, "#message-input").send_keys(TYPED)
        before = composer(browser)
        field = find(browser, "#message-input")
        encoded = base64.b64encode(png()).decode()
        browser.execute_script(PASTE, field, "chart.png", "image/png", encoded)
        notice = find(browser, "#attach-notice")
        wait(browser, "the refusal", lambda: notice.is_displayed() and notice.text)
        assert notice.text == BLIND
        assert composer(browser) == before  # the image refused, nothing else changed
        screenshot(browser, tmp_path, f"console-attach-refused{suffix(sized)}")
        assert fits(browser)
        assert severe_browser_errors(browser) == []

    async with console_hub(vision_models="") as hub:  # no model sees images
        await browse(scenario, hub)
    assert llm.requests == []


async def test_a_message_the_hub_refuses_stays_in_the_composer(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    """A file the hub does not read (a spreadsheet) refuses the whole message: its text
    and every file, the ones that would have been read too, are back in the composer."""

    def scenario() -> tuple[str, list[str], str]:
        open_console(browser, hub, "chat/socrates")
        composer_element = find(browser, "#composer")
        browser.execute_script(DROP, composer_element, "notes.md", "text/markdown", NOTES)
        browser.execute_script(
            DROP, composer_element, "sheet.xlsx", "application/vnd.ms-excel", "not read"
        )
        wait(browser, "two files attached", lambda: len(previews(browser)) == 2)
        before = previews(browser)
        send_message(browser, TYPED)
        wait(browser, "the refusal", lambda: last_answer(browser)[1] == "failed")
        wait(browser, "the message back", lambda: composer(browser) == (TYPED, before))
        note = find(browser, "#transcript-note").text
        meta = browser.find_elements(By.CSS_SELECTOR, "#transcript .turn.agent .meta")[-1].text
        assert find(browser, "#send").is_enabled()
        return note, before, meta

    note, before, meta = await browse(scenario)
    assert before == [f"notes.md · {len(NOTES)} B", "sheet.xlsx · 8 B"]
    assert note == "Your message was not taken: it is back in the message field."
    assert "application/vnd.ms-excel" in meta  # the hub's reason, naming the part
    assert llm.requests == []


def lost_turn(personas_dir: Path, data_dir: Path, llm: FakeLLM) -> str:
    """A conversation with socrates on a real hub process: one answered turn, then one
    the hub is killed (SIGKILL) in the middle of. Its contextId."""
    llm.script(Reply("Know thyself."), Hang())
    settings = {"LLM_BASE_URL": llm.base_url, "LLM_API_KEY": "test", "LLM_MAX_RETRIES": "0"}
    with hub_process(personas_dir, data_dir, **settings) as (url, process):

        def send(text: str, context: str | None, wait_for_it: bool) -> dict[str, Any]:
            message: dict[str, Any] = {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            }
            if context:
                message["contextId"] = context
            params = {"message": message, "configuration": {"returnImmediately": not wait_for_it}}
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
            response = httpx.post(
                f"{url}/a2a/socrates/", json=body, headers={"A2A-Version": "1.0"}, timeout=60
            )
            task: dict[str, Any] = response.json()["result"]["task"]
            return task

        first = send("Who are you?", None, True)
        assert first["status"]["state"] == "TASK_STATE_COMPLETED", first
        context: str = first["contextId"]
        send("What is virtue?", context, False)
        llm.wait_requests(2, timeout=60)  # the model is writing the second answer
        process.kill()
        process.wait(timeout=30)
    return context


async def test_a_turn_lost_to_a_killed_hub_is_shown_after_the_restart_and_sent_again(
    console_hub: ConsoleHubFactory,
    browser: webdriver.Chrome,
    llm: FakeLLM,
    personas_dir: Path,
    sized: int,
    tmp_path: Path,
) -> None:
    context = await asyncio.to_thread(lost_turn, personas_dir, tmp_path / "data", llm)
    llm.script(Reply("Virtue is knowledge."))

    def scenario(hub: ConsoleHub) -> tuple[list[str], str, list[str]]:
        browser.get(f"{hub.url}/console/#/chat/socrates/{context}")
        # Joined: this browser's storage (the new hub's origin) does not know it.
        find(browser, "#confirm-dialog[open] #confirm-ok").click()
        find(browser, "#view > .page[data-ready]")
        lost = find(browser, '#transcript .turn.agent[data-lost="true"]')
        shown = user_bubbles(browser)
        reason = lost.find_element(By.CSS_SELECTOR, ".meta").text
        screenshot(browser, tmp_path, f"console-lost-turn{suffix(sized)}")
        assert fits(browser)
        lost.find_element(By.CSS_SELECTOR, ".send-again").click()
        wait(
            browser,
            "the answer",
            lambda: last_answer(browser) == ("Virtue is knowledge.", "completed"),
        )
        assert not browser.find_elements(By.CSS_SELECTOR, '[data-lost="true"]')
        assert severe_browser_errors(browser) == []
        return shown, reason, user_bubbles(browser)

    async with console_hub() as hub:  # the same data directory: the killed hub's tasks
        shown, reason, after = await browse(scenario, hub)
    assert shown == ["Who are you?", "What is virtue?"]
    assert "send the message again" in reason
    assert after == ["Who are you?", "What is virtue?"]
    # Sent again as it was: the model read the question after the answered turn.
    last = [m for m in llm.requests[-1]["messages"] if m["role"] == "user"]
    assert last[-1]["content"] == "What is virtue?"
