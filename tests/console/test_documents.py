"""A persona's knowledge documents in the console (docs/console.md, docs/knowledge.md):
uploaded by file choice under the editor, a refused file's reason shown, listed, and
deleted; each change seen through the REST API, as any client sees it."""

from __future__ import annotations

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

HANDBOOK = "# Fees\n\nA night's mooring costs 3.20 euros per metre from April to September.\n"


def listed(driver: webdriver.Chrome) -> list[str]:
    """The names of the documents the section lists, once it is ready."""
    find(driver, '.documents-section[data-state="ready"]')
    rows = driver.find_elements(By.CSS_SELECTOR, "#documents li[data-document-id]")
    return [row.find_element(By.CSS_SELECTOR, ".document-name").text for row in rows]


def hub_documents(hub: ConsoleHub, persona_id: str) -> list[str]:
    response = hub.blocking.get(f"/api/v1/personas/{persona_id}/documents")
    response.raise_for_status()
    return [document["name"] for document in response.json()["documents"]]


async def test_documents_are_uploaded_listed_and_deleted(
    hub: ConsoleHub, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    handbook = tmp_path / "handbook.md"
    handbook.write_text(HANDBOOK, encoding="utf-8")
    sheet = tmp_path / "sheet.xlsx"
    sheet.write_bytes(b"PK\x03\x04 not a document")

    def scenario() -> None:
        open_console(browser, hub, "edit/hermit")
        assert listed(browser) == []
        assert find(browser, "#documents li.empty").text == "No documents."

        find(browser, "#document-input").send_keys(f"{handbook}\n{sheet}")
        wait(browser, "the uploaded document", lambda: listed(browser) == ["handbook.md"])
        facts = find(browser, "#documents li[data-document-id] .document-facts").text
        assert facts == "1 passage, 78 B, uploaded"
        refused = find(browser, "#documents-status .error-box").text
        assert refused.startswith("sheet.xlsx: ")  # the hub's reason, naming the file
        assert hub_documents(hub, "hermit") == ["handbook.md"]
        section = find(browser, ".documents-section")
        browser.execute_script("arguments[0].scrollIntoView({block: 'end'})", section)
        screenshot(browser, tmp_path, "console-documents")

        find(browser, "#documents .document-delete").click()
        find(browser, "#confirm-dialog[open] #confirm-ok").click()
        wait(browser, "no document", lambda: listed(browser) == [])
        assert hub_documents(hub, "hermit") == []
        # The refused upload is the one failed load the browser logs; no script error.
        errors = severe_browser_errors(browser)
        assert all("415" in error for error in errors), errors

    await browse(scenario)
