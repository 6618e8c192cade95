"""Importing persona files and character cards into the console's gallery: dropped on it
(a real drop event, its File built in the page) or chosen in its file input."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.console.conftest import ConsoleHub, browse, find, open_console, wait
from tests.personas.cards import ORLA_V3, card_png, picture

GRACE = {
    "name": "Grace Hopper",
    "description": "Computer scientist who pioneered compilers.",
    "personal_background": "Born in New York in 1906.",
    "language_style": {"tone": "brisk"},
    "knowledge_domains": {"Programming languages": ["compilers", "COBOL"]},
}


def drop_file(driver: webdriver.Chrome, name: str, content: bytes, media_type: str) -> None:
    """Drop a file on the gallery's drop zone, as a person dragging it from a file manager."""
    driver.execute_script(
        """
        const [name, content, type] = arguments;
        const bytes = Uint8Array.from(atob(content), (c) => c.charCodeAt(0));
        const data = new DataTransfer();
        data.items.add(new File([bytes], name, {type}));
        const zone = document.getElementById("drop-zone");
        for (const kind of ["dragenter", "dragover", "drop"]) {
            zone.dispatchEvent(
                new DragEvent(kind, {bubbles: true, cancelable: true, dataTransfer: data}));
        }
        """,
        name,
        base64.b64encode(content).decode(),
        media_type,
    )


def import_results(driver: webdriver.Chrome) -> list[str]:
    """What the last import said, once it has finished (the gallery loaded again)."""
    wait(
        driver,
        "the import's results",
        lambda: driver.find_elements(By.CSS_SELECTOR, "#import-status .import-result"),
    )
    find(driver, "#persona-grid[data-loaded]")
    return [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#import-status .import-result")]


async def test_a_dropped_file_is_imported(hub: ConsoleHub, browser: webdriver.Chrome) -> None:
    def scenario() -> None:
        open_console(browser, hub)
        find(browser, "#persona-grid[data-loaded]")
        drop_file(browser, "grace-hopper.yaml", yaml.safe_dump(GRACE).encode(), "application/yaml")
        assert import_results(browser) == [
            "Imported grace-hopper.yaml as Grace Hopper (grace-hopper)."
        ]
        find(browser, '.persona[data-persona-id="grace-hopper"][data-card-version]')
        card = hub.card("grace-hopper")
        assert card is not None
        assert card["description"] == GRACE["description"]

        # A file that is not a persona: its problems, and nothing imported.
        bad = yaml.safe_dump({**GRACE, "knowledge_domains": "everything"}).encode()
        drop_file(browser, "grace-2.yaml", bad, "application/yaml")
        (result,) = import_results(browser)
        assert "grace-2.yaml" in result
        assert "knowledge_domains" in result
        assert hub.card("grace-2") is None

        # The same id again: replaced only when the user says so.
        changed = yaml.safe_dump({**GRACE, "description": "Amazing Grace."}).encode()
        drop_file(browser, "grace-hopper.yaml", changed, "application/yaml")
        find(browser, "#confirm-dialog[open]")
        assert "already exists" in find(browser, "#confirm-message").text
        find(browser, "#confirm-cancel").click()
        (result,) = import_results(browser)
        assert "already exists" in result
        card = hub.card("grace-hopper")
        assert card is not None
        assert card["description"] == GRACE["description"]

        drop_file(browser, "grace-hopper.yaml", changed, "application/yaml")
        find(browser, "#confirm-dialog[open] #confirm-ok").click()
        wait(
            browser,
            "the persona replaced",
            lambda: (card := hub.card("grace-hopper")) and card["description"] == "Amazing Grace.",
        )

    await browse(scenario)


async def test_a_chosen_png_card_brings_its_picture(
    hub: ConsoleHub, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    card_file = tmp_path / "orla.png"
    card_file.write_bytes(card_png(ORLA_V3, picture((64, 64))))
    broken_file = tmp_path / "broken.json"
    broken_file.write_text('{"name": "Broken', encoding="utf-8")

    def scenario() -> None:
        open_console(browser, hub)
        find(browser, "#persona-grid[data-loaded]")
        # Two files at once, as a file dialog gives them.
        find(browser, "#import-input").send_keys(f"{card_file}\n{broken_file}")
        results = import_results(browser)
        assert results[0] == "Imported orla.png as Orla of the Lighthouse (orla-of-the-lighthouse)."
        assert results[1].startswith("broken.json")  # refused, saying why
        assert "JSON" in results[1]
        picture_element = find(
            browser, '.persona[data-persona-id="orla-of-the-lighthouse"] img.avatar'
        )
        wait(
            browser,
            "the card's picture",
            lambda: browser.execute_script("return arguments[0].naturalWidth", picture_element),
        )

    await browse(scenario)
