"""The console at 400 px (a phone) in Chromium: the header folds into a menu, the chat's
sidebar into its head and a button, nothing is wider than the screen; and the key field
shows only on a hub that asks for a key. The narrow screenshots for docs/console.md."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver

from tests.console.conftest import (
    ConsoleHub,
    ConsoleHubFactory,
    browse,
    find,
    go,
    open_console,
    screenshot,
    severe_browser_errors,
)
from tests.console.test_editor import checks
from tests.console.test_keys import KEY

NARROW = 400


@pytest.fixture
def narrow(browser: webdriver.Chrome) -> Iterator[webdriver.Chrome]:
    """The browser with a 400 px wide window (back to 1280 after the test)."""
    browser.set_window_size(NARROW, 860)
    try:
        yield browser
    finally:
        browser.set_window_size(1280, 860)


def page_width(driver: webdriver.Chrome) -> int:
    return int(driver.execute_script("return document.documentElement.scrollWidth"))


def viewport(driver: webdriver.Chrome) -> int:
    return int(driver.execute_script("return document.documentElement.clientWidth"))


def header_height(driver: webdriver.Chrome) -> float:
    return float(driver.execute_script("return document.querySelector('.bar').offsetHeight"))


async def test_the_console_fits_400_px(
    hub: ConsoleHub, narrow: webdriver.Chrome, tmp_path: Path
) -> None:
    def scenario() -> None:
        browser = narrow
        open_console(browser, hub)
        find(browser, '.persona[data-persona-id="socrates"][data-card-version]')
        # The header is one line: the links fold under the menu button.
        assert not find(browser, ".bar nav").is_displayed()
        assert header_height(browser) < 60
        assert page_width(browser) <= viewport(browser)
        screenshot(browser, tmp_path, "console-gallery-400")
        find(browser, "#menu-toggle").click()
        assert find(browser, ".bar nav").is_displayed()
        assert find(browser, "#menu-toggle").get_attribute("aria-expanded") == "true"
        browser.save_screenshot(str(tmp_path / "console-menu-400.png"))
        find(browser, "#menu-toggle").click()
        assert not find(browser, ".bar nav").is_displayed()

        go(browser, "chat/socrates")
        # The sidebar shows the persona and a button; its conversations fold away.
        assert find(browser, ".persona-head").is_displayed()
        assert not find(browser, "#conversation-list").is_displayed()
        assert find(browser, "#message-input").is_displayed()
        assert page_width(browser) <= viewport(browser)
        screenshot(browser, tmp_path, "console-chat-400")
        find(browser, "#sidebar-toggle").click()
        assert find(browser, "#conversation-list").is_displayed()

        go(browser, "edit/socrates")
        checks(browser, "valid")
        assert page_width(browser) <= viewport(browser)
        screenshot(browser, tmp_path, "console-editor-400")
        assert severe_browser_errors(browser) == []

    await browse(scenario)


async def test_the_key_field_shows_only_where_a_key_is_wanted(
    hub: ConsoleHub, console_hub: ConsoleHubFactory, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    def keyless() -> None:
        open_console(browser, hub)
        find(browser, '.persona[data-persona-id="socrates"][data-card-version]')
        assert not find(browser, "#key-form").is_displayed()

    await browse(keyless)

    async with console_hub(api_keys=KEY, data_dir=tmp_path / "keyed") as keyed:

        def with_keys() -> None:
            open_console(browser, keyed)
            find(browser, "#key-form:not([hidden])")
            assert find(browser, "#key-input").is_displayed()

        await browse(with_keys)
