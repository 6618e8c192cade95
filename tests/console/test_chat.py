"""The console's gallery and chat in Chromium: personas with their cards, an answer streamed
through the persona's A2A HTTP+JSON endpoint, cancel, and conversations resumed."""

from __future__ import annotations

import asyncio
import copy
import json
import re
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.expected_conditions import staleness_of

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
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.personas.cards import ORLA_V3, card_png, picture

VIRTUE = (
    "Let us examine it together, my friend. When you say virtue, do you mean one thing or "
    "many? For if it is one thing, we should be able to say what it is; and if it is many, "
    "what they share."
)
TAUGHT = (
    "If virtue is knowledge, it can be taught. Yet where are its teachers? Name me one, "
    "and we shall go and ask him together."
)
LONG = " ".join(f"word{n}" for n in range(80))


def agent_bubbles(driver: webdriver.Chrome) -> list[tuple[str, str]]:
    """Each answer of the transcript (not the greeting): its text and its state."""
    return [
        (
            bubble.find_element(By.CSS_SELECTOR, ".text").text,
            bubble.get_attribute("data-state") or "",
        )
        for bubble in driver.find_elements(
            By.CSS_SELECTOR, "#transcript .turn.agent:not(.greeting)"
        )
    ]


def user_bubbles(driver: webdriver.Chrome) -> list[str]:
    """The text of each message of the user's (not its actions)."""
    return [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#transcript .turn.user > .text")]


def last_answer(driver: webdriver.Chrome) -> tuple[str, str]:
    bubbles = agent_bubbles(driver)
    return bubbles[-1] if bubbles else ("", "")


def partial_answer(driver: webdriver.Chrome) -> str | None:
    """The answer's text while it is still coming."""
    text, state = last_answer(driver)
    return text if text and state == "working" else None


def canceled_answer(driver: webdriver.Chrome) -> str | None:
    """The answer's text once it is canceled."""
    text, state = last_answer(driver)
    return text if state == "canceled" else None


def send_message(driver: webdriver.Chrome, text: str) -> None:
    find(driver, "#message-input").send_keys(text)
    find(driver, "#send").click()


def context_of(driver: webdriver.Chrome) -> str:
    """The conversation's contextId, from the address (#/chat/{id}/{contextId})."""
    parts = str(driver.execute_script("return location.hash")).split("/")
    return parts[3] if len(parts) > 3 else ""


async def test_the_gallery_shows_every_persona_with_its_card(
    hub: ConsoleHub, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    # One persona with a picture (a PNG character card), the others without.
    upload = await hub.http.post(
        "/api/v1/personas/upload",
        headers={"X-Requested-With": "tests"},
        files={"file": ("orla.png", card_png(ORLA_V3, picture((64, 64))))},
        params={"id": "orla"},
    )
    assert upload.status_code == 201, upload.text
    # A second card of the same name, without creator's notes, its traits in brackets.
    twin = copy.deepcopy(ORLA_V3)
    twin["data"]["creator_notes"] = ""
    twin["data"]["description"] = (
        "[{{char}}'s traits: calm, watchful]\n{{char}} keeps the lamp. She sings."
    )
    second = await hub.http.post(
        "/api/v1/personas/upload",
        headers={"X-Requested-With": "tests"},
        files={"file": ("twin.json", json.dumps(twin).encode())},
        params={"id": "orla-twin"},
    )
    assert second.status_code == 201, second.text
    personas = (await hub.http.get("/a2a/personas")).json()
    summaries = {
        "orla": "A gentle character.",  # its card's creator's notes
        "orla-twin": "Orla of the Lighthouse keeps the lamp.",  # the first sentence
    }

    def scenario() -> None:
        browser.get(f"{hub.url}/")  # the hub's root sends a browser to the console
        find(browser, "#persona-grid[data-loaded]")
        assert browser.current_url == f"{hub.url}/console/"
        tiles = browser.find_elements(By.CSS_SELECTOR, "#persona-grid .persona")
        assert [t.get_attribute("data-persona-id") for t in tiles] == [p["id"] for p in personas]
        for persona in personas:  # each tile shows its card (its version says which)
            card = hub.card(persona["id"])
            assert card is not None
            tile = find(browser, f'.persona[data-persona-id="{persona["id"]}"][data-card-version]')
            assert tile.get_attribute("data-card-version") == card["version"]
            name = tile.find_element(By.CSS_SELECTOR, ".name").text
            ids = tile.find_elements(By.CSS_SELECTOR, ".persona-id")  # where names repeat
            if persona["id"] in summaries:
                assert name == f"{persona['name']}\n{persona['id']}"
                assert [shown.text for shown in ids] == [persona["id"]]
            else:
                assert name == persona["name"]
                assert ids == []
            description = tile.find_element(By.CSS_SELECTOR, ".description")
            assert description.get_attribute("title") == card["description"]
            summary = str(description.get_attribute("textContent"))
            if persona["id"] in summaries:
                assert summary == summaries[persona["id"]]
            else:  # its first sentence
                assert card["description"].startswith(summary)
                assert summary.endswith((".", "!", "?")), summary
        orla = find(browser, '.persona[data-persona-id="orla"] img.avatar')
        assert "/a2a/orla/avatar" in (orla.get_attribute("src") or "")
        wait(
            browser,
            "Orla's picture",
            lambda: browser.execute_script("return arguments[0].naturalWidth", orla),
        )
        assert find(browser, '.persona[data-persona-id="socrates"] .avatar.placeholder').text == "S"

        find(browser, "#persona-filter").send_keys("lighthouse")
        wait(
            browser,
            "only the two Orlas",
            lambda: len(browser.find_elements(By.CSS_SELECTOR, "#persona-grid .persona")) == 2,
        )
        assert severe_browser_errors(browser) == []
        # The picture for the docs: the bundled personas, and Orla with her picture.
        for test_persona in ("hermit", "toolsmith"):
            hub.blocking.delete(f"/api/v1/personas/{test_persona}")
        go(browser, "chat/socrates")
        go(browser, "")
        find(browser, '.persona[data-persona-id="socrates"][data-card-version]')
        screenshot(browser, tmp_path, "console-gallery")

    await browse(scenario)


async def test_the_answer_says_at_once_what_happens_and_for_how_long(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    # The model writes nothing until the test has seen the waiting line.
    llm.script(Reply("Slowly.", chunks=["Slowly", "."], hold_after=0))

    def scenario() -> None:
        open_console(browser, hub, "chat/socrates")
        send_message(browser, "Are you there?")
        meta = "#transcript .turn.agent .meta"
        waiting = wait(browser, "the waiting line", lambda: find(browser, meta).text or None)
        assert re.fullmatch(r"(submitted|working) · received · \d+\.\d s", waiting), waiting
        llm.release()
        wait(browser, "the answer", lambda: last_answer(browser) == ("Slowly.", "completed"))
        assert "received" not in find(browser, meta).text  # the cost line, once final

    await browse(scenario)


async def test_a_chat_streams_the_answer_as_it_comes(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    llm.script(Reply(VIRTUE, token_delay=0.08, hold_after=5))  # the rest once a part is seen

    def scenario() -> None:
        open_console(browser, hub, "chat/socrates")
        assert find(browser, ".persona-name").text == "Socrates"
        send_message(browser, "What is virtue?")
        # Part of the answer is on the page while the rest is still coming.
        partial = wait(browser, "a partial answer", lambda: partial_answer(browser))
        assert VIRTUE.startswith(partial)
        assert len(partial) < len(VIRTUE)
        llm.release()
        wait(browser, "the whole answer", lambda: last_answer(browser) == (VIRTUE, "completed"))
        assert "tokens" in find(browser, "#transcript .turn.agent .meta").text
        # The conversation is listed, and named in the address.
        context = wait(browser, "the contextId in the address", lambda: context_of(browser))
        listed = find(browser, f'#conversation-list li[data-context-id="{context}"]')
        assert listed.text.startswith("What is virtue?")
        assert severe_browser_errors(browser) == []

    await browse(scenario)
    assert llm.requests[-1]["messages"][-1] == {"role": "user", "content": "What is virtue?"}


async def test_cancel_stops_a_slow_answer(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    llm.script(Reply(LONG, hold_after=5))  # the rest held: the answer is canceled meanwhile

    def scenario() -> str:
        open_console(browser, hub, "chat/socrates")
        send_message(browser, "Tell me everything.")
        wait(browser, "a partial answer", lambda: partial_answer(browser))
        cancel = find(browser, "#cancel")
        wait(browser, "the cancel button", cancel.is_enabled)
        cancel.click()
        text = wait(browser, "the answer canceled", lambda: canceled_answer(browser))
        assert LONG.startswith(text)
        assert 0 < len(text) < len(LONG)
        assert not find(browser, "#cancel").is_displayed()
        assert find(browser, "#send").is_enabled()
        return context_of(browser)

    context = await browse(scenario)
    await asyncio.to_thread(llm.wait_disconnect)  # the model's stream was closed
    listed = await hub.http.get(
        "/a2a/socrates/tasks", params={"contextId": context}, headers={"A2A-Version": "1.0"}
    )
    assert [task["status"]["state"] for task in listed.json()["tasks"]] == ["TASK_STATE_CANCELED"]


async def test_a_conversation_is_resumed_with_its_turns(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM, tmp_path: Path
) -> None:
    llm.script(Reply(VIRTUE), Reply(TAUGHT))

    def scenario() -> str:
        open_console(browser, hub, "chat/socrates")
        send_message(browser, "What is virtue?")
        wait(browser, "the answer", lambda: last_answer(browser) == (VIRTUE, "completed"))
        context = context_of(browser)
        go(browser, "")
        go(browser, "chat/socrates")  # a new conversation, the other one listed
        assert agent_bubbles(browser) == []
        find(browser, f'#conversation-list li[data-context-id="{context}"] a').click()
        wait(browser, "the earlier turn", lambda: agent_bubbles(browser) == [(VIRTUE, "completed")])
        assert user_bubbles(browser) == ["What is virtue?"]
        send_message(browser, "Then can virtue be taught?")
        wait(
            browser,
            "the second answer",
            lambda: agent_bubbles(browser) == [(VIRTUE, "completed"), (TAUGHT, "completed")],
        )
        assert context_of(browser) == context
        screenshot(browser, tmp_path, "console-chat")
        # Another browser (none of this one's storage) resumes from the address alone:
        # the turns come from the hub (ListTasks of the context).
        browser.execute_script("localStorage.clear()")
        browser.refresh()
        find(browser, "#confirm-dialog[open]")  # once the user agrees to join it
        assert context in find(browser, "#confirm-message").text
        find(browser, "#confirm-dialog[open] #confirm-ok").click()
        find(browser, "#view > .page[data-ready]")
        assert agent_bubbles(browser) == [(VIRTUE, "completed"), (TAUGHT, "completed")]
        assert user_bubbles(browser) == ["What is virtue?", "Then can virtue be taught?"]
        assert find(browser, "#transcript-note").get_attribute("textContent") == ""
        assert severe_browser_errors(browser) == []
        return context

    await browse(scenario)
    history = llm.requests[-1]["messages"]  # the hub continued the conversation
    assert {"role": "user", "content": "What is virtue?"} in history
    assert {"role": "assistant", "content": VIRTUE} in history


async def test_a_link_to_a_conversation_started_elsewhere_asks_before_joining(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    # Someone else's conversation, whose contextId they put in a link.
    llm.script(Reply("The plan is on."))
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Plan?"}]}
        },
    }
    sent = await hub.http.post("/a2a/socrates/", json=body, headers={"A2A-Version": "1.0"})
    context = sent.json()["result"]["task"]["contextId"]
    llm.script(Reply("A fresh start."), Reply(VIRTUE))

    def scenario() -> None:
        open_console(browser, hub, "")
        go(browser, f"chat/socrates/{context}", ready=False)
        find(browser, "#confirm-dialog[open]")
        message = find(browser, "#confirm-message").text
        assert context in message
        assert "Socrates" in message
        assert user_bubbles(browser) == []  # nothing of it is read meanwhile
        assert find(browser, "#send").get_attribute("disabled") is not None
        asked = find(browser, "#view > .page")
        find(browser, "#confirm-cancel").click()  # a new conversation instead
        wait(browser, "a new conversation", lambda: staleness_of(asked)(browser))
        find(browser, "#view > .page[data-ready]")
        assert context_of(browser) == ""
        assert user_bubbles(browser) == []
        send_message(browser, "Who are you?")
        wait(browser, "the answer", lambda: last_answer(browser) == ("A fresh start.", "completed"))
        assert context_of(browser) not in ("", context)

        go(browser, f"chat/socrates/{context}", ready=False)  # asked again: not joined
        find(browser, "#confirm-dialog[open] #confirm-ok").click()
        wait(browser, "its turn", lambda: user_bubbles(browser) == ["Plan?"])
        send_message(browser, "What is virtue?")
        wait(browser, "the answer", lambda: last_answer(browser) == (VIRTUE, "completed"))
        assert context_of(browser) == context
        browser.refresh()  # joined: this browser knows it now
        find(browser, "#view > .page[data-ready]")
        assert user_bubbles(browser) == ["Plan?", "What is virtue?"]
        assert not browser.find_elements(By.CSS_SELECTOR, "#confirm-dialog[open]")

    await browse(scenario)
    assert "The plan is on." not in str(llm.requests[1]["messages"])  # the new conversation
    assert "The plan is on." in str(llm.requests[2]["messages"])  # the joined one


async def test_without_task_listing_the_hub_or_the_browser_keeps_the_transcript(
    console_hub: ConsoleHubFactory, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    llm.script(Reply(VIRTUE))
    async with console_hub(task_listing="off") as hub:

        def scenario() -> str:
            open_console(browser, hub, "chat/socrates")
            send_message(browser, "What is virtue?")
            wait(browser, "the answer", lambda: last_answer(browser) == (VIRTUE, "completed"))
            browser.refresh()  # the stored conversation (REST), tasks or not
            find(browser, "#view > .page[data-ready]")
            assert agent_bubbles(browser) == [(VIRTUE, "completed")]
            assert find(browser, "#transcript-note").get_attribute("textContent") == ""
            return context_of(browser)

        context = await browse(scenario)
        gone = await hub.http.delete(f"/api/v1/conversations/socrates/{context}")
        assert gone.status_code == 204

        def without_the_hubs_copy() -> None:
            browser.refresh()  # neither tasks nor the stored conversation: the browser's copy
            find(browser, "#view > .page[data-ready]")
            assert agent_bubbles(browser) == [(VIRTUE, "completed")]
            assert "this browser's copy" in find(browser, "#transcript-note").text

        await browse(without_the_hubs_copy)


async def test_a_greeting_opens_the_conversation(
    hub: ConsoleHub, browser: webdriver.Chrome
) -> None:
    upload = await hub.http.post(
        "/api/v1/personas/upload",
        headers={"X-Requested-With": "tests"},
        files={"file": ("orla.png", card_png(ORLA_V3, picture()))},
        params={"id": "orla"},
    )
    assert upload.status_code == 201, upload.text

    def scenario() -> None:
        open_console(browser, hub, "chat/orla")
        greeting = find(browser, "#transcript .turn.greeting").text
        assert greeting.startswith("Mind the steps")

    await browse(scenario)


async def test_a_panel_shows_each_members_answer_under_its_name(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM
) -> None:
    members = ("Albert Einstein", "Marie Curie", "Charles Darwin")
    for name in members:
        llm.script_for(f"You are {name}.", Reply(f"{name} answers, slowly.", token_delay=0.05))

    def answered(text: str) -> bool:
        return all(f"{name}\n{name} answers, slowly." in text for name in members)

    def scenario() -> None:
        open_console(browser, hub, "chat/science-panel")
        send_message(browser, "What makes a good experiment?")
        wait(browser, "three answers", lambda: answered(last_answer(browser)[0]))
        wait(browser, "the panel done", lambda: last_answer(browser)[1] == "completed")
        context = context_of(browser)
        go(browser, "")
        go(browser, f"chat/science-panel/{context}")  # resumed: the hub's copy of the turn
        wait(browser, "the turn resumed", lambda: answered(last_answer(browser)[0]))
        assert severe_browser_errors(browser) == []

    await browse(scenario)
