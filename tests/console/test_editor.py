"""The console's persona editor in Chromium: the YAML file checked as it is typed by the
hub's validator, saved with If-Match, created, refused when stale, deleted; each change seen
on the persona's agent card, as any A2A client sees it."""

from __future__ import annotations

from pathlib import Path

import yaml
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from tests.console.conftest import (
    ConsoleHub,
    browse,
    find,
    open_console,
    screenshot,
    severe_browser_errors,
    wait,
)

NEW_DESCRIPTION = "A hermit who has taken up correspondence, briefly."


def set_text(driver: webdriver.Chrome, area: WebElement, text: str) -> None:
    """Replace the text area's text as typing would (an input event)."""
    driver.execute_script(
        "arguments[0].value = arguments[1];"
        "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));",
        area,
        text,
    )


def checks(driver: webdriver.Chrome, state: str) -> list[str]:
    """The editor's problems, once its checks say ``state`` (valid, invalid)."""
    find(driver, f'#validation[data-state="{state}"]')
    return [item.text for item in driver.find_elements(By.CSS_SELECTOR, "#problems li")]


def editor_text(driver: webdriver.Chrome) -> str:
    return str(find(driver, "#persona-yaml").get_property("value"))


async def test_an_edit_reaches_the_card(
    hub: ConsoleHub, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    def scenario() -> None:
        open_console(browser, hub, "edit/hermit")
        assert checks(browser, "valid") == []
        data = yaml.safe_load(editor_text(browser))
        assert data["name"] == "Hal the Hermit"
        assert "id" not in data  # the file names the persona, as on disk
        before = hub.card("hermit")
        assert before is not None

        data["description"] = NEW_DESCRIPTION
        set_text(browser, find(browser, "#persona-yaml"), yaml.safe_dump(data, sort_keys=False))
        assert checks(browser, "valid") == []
        find(browser, "#save").click()
        wait(browser, "the save", lambda: "Saved" in find(browser, "#save-status").text)
        after = hub.card("hermit")
        assert after is not None
        assert after["description"] == NEW_DESCRIPTION
        assert after["version"] != before["version"]
        # The gallery shows the card as it is now.
        find(browser, "a.brand").click()
        tile = find(browser, '.persona[data-persona-id="hermit"][data-card-version]')
        assert tile.find_element(By.CSS_SELECTOR, ".description").text == NEW_DESCRIPTION
        assert severe_browser_errors(browser) == []

        open_console(browser, hub, "edit/socrates")
        checks(browser, "valid")
        screenshot(browser, tmp_path, "console-editor")

    await browse(scenario)


async def test_problems_are_shown_as_the_text_is_typed(
    hub: ConsoleHub, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    def scenario() -> None:
        open_console(browser, hub, "edit/hermit")
        area = find(browser, "#persona-yaml")
        good = editor_text(browser)
        checks(browser, "valid")

        set_text(browser, area, good.replace("name: Hal the Hermit", "name: [Hal the Hermit"))
        problems = checks(browser, "invalid")
        assert len(problems) == 1
        after_name = good.splitlines().index("name: Hal the Hermit") + 2  # the file as written
        assert problems[0].startswith(f"YAML syntax error at line {after_name}, column ")
        assert not find(browser, "#save").is_enabled()

        data = yaml.safe_load(good)
        del data["description"]
        data["mood"] = "grumpy"
        set_text(browser, area, yaml.safe_dump(data))
        assert sorted(checks(browser, "invalid")) == [
            "description: Field required",
            "mood: unknown field",
        ]
        screenshot(browser, tmp_path, "console-editor-problems")

        set_text(browser, area, good)
        assert checks(browser, "valid") == []
        assert find(browser, "#save").is_enabled()

    await browse(scenario)
    # Checking saved nothing.
    persona = (await hub.http.get("/api/v1/personas/hermit")).json()
    assert persona["description"] == "A test persona with no tools at all."


async def test_a_new_persona_is_created(hub: ConsoleHub, browser: webdriver.Chrome) -> None:
    def scenario() -> None:
        open_console(browser, hub, "new")
        name = find(browser, "#persona-name")
        identifier = find(browser, "#persona-id")
        # The name comes first; the id follows it until the id is typed.
        assert name.get_property("value") == "Grace Hopper"
        assert identifier.get_property("value") == "grace-hopper"
        assert checks(browser, "valid") == []
        name.clear()
        name.send_keys("Socrates")
        assert identifier.get_property("value") == "socrates"
        assert checks(browser, "invalid") == ["id: a persona 'socrates' exists already"]
        assert 'name: "Socrates"' in editor_text(browser)
        identifier.clear()
        identifier.send_keys("Grace Hopper")
        assert any("not a valid persona id" in p for p in checks(browser, "invalid"))
        identifier.clear()
        identifier.send_keys("amazing-grace")
        name.clear()
        name.send_keys("Grace Brewster Murray Hopper")
        assert identifier.get_property("value") == "amazing-grace"  # typed: kept
        assert checks(browser, "valid") == []
        typed = editor_text(browser)
        find(browser, "#save").click()
        # The editor of the new persona, with the file as the hub keeps it: as typed.
        find(browser, '.editor[data-persona-id="amazing-grace"]')
        checks(browser, "valid")
        assert editor_text(browser) == typed
        card = hub.card("amazing-grace")
        assert card is not None
        assert card["name"] == "Grace Brewster Murray Hopper"

    await browse(scenario)


async def test_a_stale_edit_is_refused(hub: ConsoleHub, browser: webdriver.Chrome) -> None:
    def scenario() -> None:
        open_console(browser, hub, "edit/hermit")
        checks(browser, "valid")
        # Someone else changes the persona meanwhile.
        theirs = hub.blocking.get("/api/v1/personas/hermit").json()
        theirs["name"] = "Hal, changed elsewhere"
        assert hub.blocking.put("/api/v1/personas/hermit", json=theirs).status_code == 200

        area = find(browser, "#persona-yaml")
        set_text(browser, area, editor_text(browser).replace("Hal the Hermit", "Hal, mine"))
        checks(browser, "valid")
        find(browser, "#save").click()
        wait(
            browser,
            "the refusal",
            lambda: "someone changed this persona" in find(browser, "#save-status").text,
        )
        card = hub.card("hermit")
        assert card is not None
        assert card["name"] == "Hal, changed elsewhere"  # theirs was not overwritten
        find(browser, "#reload").click()
        wait(browser, "their version", lambda: "Hal, changed elsewhere" in editor_text(browser))

    await browse(scenario)


async def test_a_persona_is_deleted(hub: ConsoleHub, browser: webdriver.Chrome) -> None:
    def scenario() -> None:
        open_console(browser, hub, "edit/hermit")
        checks(browser, "valid")
        find(browser, "#delete").click()
        find(browser, "#confirm-dialog[open]")
        assert "hermit" in find(browser, "#confirm-message").text
        find(browser, "#confirm-cancel").click()
        assert hub.card("hermit") is not None  # not without saying so
        find(browser, "#delete").click()
        find(browser, "#confirm-dialog[open] #confirm-ok").click()
        find(browser, "#persona-grid[data-loaded]")
        assert hub.card("hermit") is None
        assert not browser.find_elements(By.CSS_SELECTOR, '.persona[data-persona-id="hermit"]')

    await browse(scenario)
