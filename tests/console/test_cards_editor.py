"""A character card in the console's editor, in Chromium: its text fields as a form (line
breaks as lines, not escapes), a save that changes only the field edited in the card's
JSON as it was uploaded, and the card exported from the editor."""

from __future__ import annotations

import asyncio
import json
import zipfile
from pathlib import Path

from selenium import webdriver

from tests.console.conftest import (
    ConsoleHub,
    browse,
    find,
    open_console,
    screenshot,
    severe_browser_errors,
    wait,
)
from tests.console.test_editor import checks, editor_text, set_text
from tests.personas.cards import MIRA_V2

MIRA = "captain-mira-voss"


async def test_a_card_is_edited_as_a_form_and_saved_as_written(
    hub: ConsoleHub, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    uploaded = json.dumps(MIRA_V2, indent=3, ensure_ascii=False).encode()  # its own layout
    response = await hub.http.post(
        "/api/v1/personas/upload",
        headers={"X-Requested-With": "tests"},
        files={"file": ("mira.json", uploaded)},
    )
    assert response.status_code == 201, response.text
    stored = hub.settings.personas_dir / f"{MIRA}.json"
    downloads = tmp_path / "downloads"
    downloads.mkdir()

    def scenario() -> None:
        browser.execute_cdp_cmd(
            "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
        )
        open_console(browser, hub, f"edit/{MIRA}")
        checks(browser, "valid")
        # The form shows the card's fields as text: line breaks, not "\n".
        examples = find(browser, "#card-mes_example")
        assert examples.get_property("value") == MIRA_V2["data"]["mes_example"]
        assert find(browser, "#persona-yaml").is_displayed() is False
        screenshot(browser, tmp_path, "console-card-editor")
        set_text(browser, find(browser, "#card-personality"), "Dry.\nDecisive.")
        checks(browser, "valid")
        find(browser, "#save").click()
        wait(browser, "the save", lambda: "Saved" in find(browser, "#save-status").text)
        # The source is the card's JSON as uploaded, with that one value changed.
        find(browser, "#show-source").click()
        assert '"personality": "Dry.\\nDecisive."' in editor_text(browser)
        find(browser, "#export-json").click()
        exported = downloads / f"{MIRA}.json"
        wait(browser, "the exported card", lambda: exported.is_file() and exported.stat().st_size)
        assert json.loads(exported.read_bytes())["data"]["personality"] == "Dry.\nDecisive."
        find(browser, "#export-charx").click()  # the V3 card in a zip, as it is now
        charx = downloads / f"{MIRA}.charx"
        wait(browser, "the exported CHARX", lambda: charx.is_file() and charx.stat().st_size)
        with zipfile.ZipFile(charx) as archive:
            card = json.loads(archive.read("card.json"))
        assert (card["spec"], card["data"]["personality"]) == ("chara_card_v3", "Dry.\nDecisive.")
        assert severe_browser_errors(browser) == []

    await browse(scenario)
    # Only data.personality changed (the V2 card's top-level copy is another field).
    head, data = uploaded.split(b'"data": {', 1)
    old = json.dumps(MIRA_V2["data"]["personality"]).encode()
    expected = head + b'"data": {' + data.replace(old, b'"Dry.\\nDecisive."', 1)
    assert await asyncio.to_thread(stored.read_bytes) == expected
