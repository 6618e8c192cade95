"""A character card's lists in the console's editor (issue 50.6), in Chromium: its other
greetings and its lorebook (keys, regex keys, constant, order, depth, enabled) as forms,
checked as they are typed, saved into the card's JSON with everything else as it was."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.console.conftest import (
    ConsoleHub,
    browse,
    find,
    open_console,
    screenshot,
    severe_browser_errors,
    wait,
)
from tests.console.test_conversations import fits, sized, suffix
from tests.console.test_editor import checks, set_text
from tests.personas.cards import MIRA_V2

__all__ = ["sized"]

MIRA = "captain-mira-voss"


async def test_greetings_and_lorebook_are_edited_as_forms(
    hub: ConsoleHub, browser: webdriver.Chrome, sized: int, tmp_path: Path
) -> None:
    uploaded = json.dumps(MIRA_V2, indent=2, ensure_ascii=False).encode()
    response = await hub.http.post(
        "/api/v1/personas/upload",
        headers={"X-Requested-With": "tests"},
        files={"file": ("mira.json", uploaded)},
    )
    assert response.status_code == 201, response.text
    stored = hub.settings.personas_dir / f"{MIRA}.json"

    def scenario() -> None:
        open_console(browser, hub, f"edit/{MIRA}")
        checks(browser, "valid")
        greetings = browser.find_elements(By.CSS_SELECTOR, "#card-greetings textarea.greeting")
        assert [g.get_property("value") for g in greetings] == MIRA_V2["data"][
            "alternate_greetings"
        ]
        entries = browser.find_elements(By.CSS_SELECTOR, "#card-lorebook .lore-entry")
        assert len(entries) == 2
        assert entries[0].find_element(By.CSS_SELECTOR, ".lore-keys").get_property("value") == (
            "Kestrel, the ship"
        )
        assert entries[0].find_element(By.CSS_SELECTOR, ".lore-depth").get_property("value") == "4"

        find(browser, "#add-greeting").click()
        last = browser.find_elements(By.CSS_SELECTOR, "#card-greetings textarea.greeting")[-1]
        set_text(browser, last, "*She waves.* Back so soon?")
        halden = browser.find_elements(By.CSS_SELECTOR, "#card-lorebook .lore-entry")[1]
        halden.find_element(By.CSS_SELECTOR, ".lore-constant").click()
        set_text(browser, halden.find_element(By.CSS_SELECTOR, ".lore-depth"), "3")
        find(browser, "#add-entry").click()
        new = browser.find_elements(By.CSS_SELECTOR, "#card-lorebook .lore-entry")[-1]
        set_text(browser, new.find_element(By.CSS_SELECTOR, ".lore-keys"), "reactor, /eng(ine)?s?/")
        new.find_element(By.CSS_SELECTOR, ".lore-regex").click()
        set_text(browser, new.find_element(By.CSS_SELECTOR, ".lore-content"), "It hums in B-flat.")
        set_text(browser, new.find_element(By.CSS_SELECTOR, ".lore-order"), "7")
        checks(browser, "valid")  # checked as typed, by the hub's own validator
        for part in ("greetings", "lorebook"):
            browser.execute_script(
                "arguments[0].scrollIntoView({block: 'start'})", find(browser, f"#card-{part}")
            )
            screenshot(browser, tmp_path, f"console-card-{part}{suffix(sized)}")
        assert fits(browser)
        find(browser, "#save").click()
        wait(browser, "the save", lambda: "Saved" in find(browser, "#save-status").text)
        assert severe_browser_errors(browser) == []

    await browse(scenario)
    card = json.loads(await asyncio.to_thread(stored.read_bytes))
    data = card["data"]
    assert data["alternate_greetings"] == [
        *MIRA_V2["data"]["alternate_greetings"],
        "*She waves.* Back so soon?",
    ]
    kestrel, halden, reactor = data["character_book"]["entries"]
    assert kestrel == MIRA_V2["data"]["character_book"]["entries"][0]  # untouched, every field kept
    assert halden["constant"] is True
    assert halden["extensions"]["depth"] == 3
    assert halden["priority"] == 5  # a field the form does not show, kept
    assert reactor["keys"] == ["reactor", "/eng(ine)?s?/"]
    assert reactor["use_regex"] is True
    assert reactor["content"] == "It hums in B-flat."
    assert reactor["insertion_order"] == 7
    assert reactor["enabled"] is True
    assert data["character_book"]["name"] == "Kestrel lore"
    # The rest of the card as uploaded (its top-level V2 copy included).
    assert card["spec"] == MIRA_V2["spec"]
    assert data["personality"] == MIRA_V2["data"]["personality"]
