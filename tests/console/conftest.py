"""The console in a real browser: Debian's headless Chromium, driven by Selenium, against a
hub on a real uvicorn on 127.0.0.1 answering through the scripted fake LLM.

Selenium's calls block, and the hub runs in the test's event loop: a test runs its browser
part in a worker thread (``await browse(scenario, ...)``) while the loop serves the hub.
Each hub listens on a port of its own, hence an origin of its own: the console's
localStorage and sessionStorage start empty in every test.

Screenshots of each test go to its ``tmp_path``; with ``CONSOLE_SCREENSHOTS_DIR`` set
(``docs/images``), the ones docs/console.md shows are written there too.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar, cast

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.command import Command
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.wait import WebDriverWait

from persona_agent.api.app import create_app
from persona_agent.settings import Settings
from tests.fakes.fake_llm import FakeLLM
from tests.integration.conftest import (  # the hub's fixtures, shared with integration
    fake_llm_server,
    llm,
    personas_dir,
    serving,
)
from tests.migrated import SqliteTemplate

__all__ = ["fake_llm_server", "llm", "personas_dir"]

SCREENSHOTS_VARIABLE = "CONSOLE_SCREENSHOTS_DIR"
SCREENSHOTS = os.environ.get(SCREENSHOTS_VARIABLE, "")
"""Read at import, before the environment is cleaned for each test."""
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
BROWSER_REQUIRED = os.environ.get("PERSONA_AGENT_TEST_BROWSER_REQUIRED", "") == "1"
"""As in CI (.ci/run): the browser tests fail, rather than skip, without a browser."""
WAIT = 60.0
"""Seconds any one thing the browser should show may take: a bound, not a pause, sized for
a busy two-core machine (Chromium and the hub on the same cores)."""

_P = ParamSpec("_P")
_T = TypeVar("_T")


@dataclass
class ConsoleHub:
    """A running hub, its settings, and HTTP clients: ``http`` for the test's own coroutine,
    ``blocking`` for its browser thread (a blocking call in the loop would stop the hub)."""

    settings: Settings
    http: httpx.AsyncClient
    blocking: httpx.Client

    @property
    def url(self) -> str:
        return self.settings.base_url

    def card(self, persona_id: str) -> dict[str, Any] | None:
        """The persona's agent card as any client gets it, or None (404); blocking."""
        response = self.blocking.get(f"/a2a/{persona_id}/.well-known/agent-card.json")
        if response.status_code == 404:
            return None
        response.raise_for_status()
        card: dict[str, Any] = response.json()
        return card


ConsoleHubFactory = Callable[..., AbstractAsyncContextManager[ConsoleHub]]


@pytest.fixture
def console_hub(
    tmp_path: Path, personas_dir: Path, llm: FakeLLM, migrated_sqlite: SqliteTemplate
) -> ConsoleHubFactory:
    """Start a hub on a real uvicorn on 127.0.0.1 with the console's defaults (settings
    may be overridden: ``api_keys=...``, ``console=False``)."""

    @asynccontextmanager
    async def start(**overrides: Any) -> AsyncIterator[ConsoleHub]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        values: dict[str, Any] = {
            "personas_dir": personas_dir,
            "data_dir": tmp_path / "data",
            "public_base_url": base_url,
            "llm_base_url": llm.base_url,
            "llm_api_key": "test-key",
            "llm_max_retries": 0,
            "llm_timeout": 30,
            "shutdown_grace_seconds": 1,
            **overrides,
        }
        settings = Settings(_env_file=None, **values)  # type: ignore[call-arg]
        migrated_sqlite.under(settings)  # not migrated again by each hub
        async with (
            serving(create_app(settings), sock),
            httpx.AsyncClient(base_url=base_url, timeout=30) as http,
        ):
            with httpx.Client(base_url=base_url, timeout=30) as blocking:
                yield ConsoleHub(settings, http, blocking)

    return start


@pytest.fixture
async def hub(console_hub: ConsoleHubFactory) -> AsyncIterator[ConsoleHub]:
    async with console_hub() as running:
        yield running


@pytest.fixture(scope="session")
def chromium() -> Iterator[webdriver.Chrome]:
    """One headless Chromium for the session (each test's hub is another origin)."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        why = (
            "the console tests need chromium and chromedriver (apt-get install "
            "chromium chromium-driver; .ci/run installs them)"
        )
        if BROWSER_REQUIRED:  # CI: a missing browser fails the run, never skips it
            pytest.fail(why)
        pytest.skip(why)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # as root in a container
        "--disable-dev-shm-usage",
        "--window-size=1280,860",
        "--force-color-profile=srgb",
        "--lang=en-US",
        # Spoken answers play as they come (tests/console/test_voice.py), with no click.
        "--autoplay-policy=no-user-gesture-required",
    ):
        options.add_argument(argument)
    # The network requests of each page, to check that none leaves the hub.
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(chromium: webdriver.Chrome) -> Iterator[webdriver.Chrome]:
    """The browser, on a blank page between tests (a page left open would keep streaming)."""
    browser_log(chromium, "performance")  # what earlier tests left
    browser_log(chromium, "browser")
    yield chromium
    chromium.get("about:blank")


async def browse(scenario: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """Run the blocking browser part of a test in a thread while the loop serves the hub."""
    async with asyncio.timeout(120):
        return await asyncio.to_thread(scenario, *args, **kwargs)


def wait(
    driver: webdriver.Chrome, what: str, condition: Callable[[], _T | Literal[False] | None]
) -> _T:
    """The first truthy value of ``condition`` within :data:`WAIT` seconds, or a timeout
    that says what did not happen."""
    result = WebDriverWait(driver, WAIT, poll_frequency=0.05).until(
        lambda _driver: condition(), message=f"the console did not show {what}"
    )
    return cast(_T, result)  # until() returns only a truthy value


def browser_log(driver: webdriver.Chrome, kind: Literal["browser", "performance"]) -> list[Any]:
    """The entries of one of the browser's logs since the last call (get_log, typed)."""
    entries: list[Any] = driver.execute(Command.GET_LOG, {"type": kind})["value"]
    return entries


def find(driver: webdriver.Chrome, css: str) -> WebElement:
    """The element, once the page has it."""
    return wait(driver, css, lambda: next(iter(driver.find_elements(By.CSS_SELECTOR, css)), None))


def open_console(driver: webdriver.Chrome, hub: ConsoleHub, route: str = "") -> None:
    """Load the console afresh (at ``#/route``) and wait until its page is ready."""
    driver.get("about:blank")  # else a new hash alone would not load the page again
    driver.get(f"{hub.url}/console/#/{route}")
    find(driver, "#view > .page[data-ready]")


def go(driver: webdriver.Chrome, route: str, *, ready: bool = True) -> None:
    """Go to another page of the open console, as a link would, and wait until it is shown
    (and ``ready``: loaded)."""
    shown = find(driver, "#view > .page")
    driver.execute_script("location.hash = arguments[0]", f"#/{route}")
    WebDriverWait(driver, WAIT).until(staleness_of(shown), message=f"no page {route}")
    if ready:
        find(driver, "#view > .page[data-ready]")


def screenshot(driver: webdriver.Chrome, directory: Path, name: str) -> None:
    """A screenshot in the test's directory, and under ``CONSOLE_SCREENSHOTS_DIR``."""
    driver.save_screenshot(str(directory / f"{name}.png"))
    if SCREENSHOTS:
        target = Path(SCREENSHOTS)
        target.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(target / f"{name}.png"))


def severe_browser_errors(driver: webdriver.Chrome) -> list[str]:
    """The page's script errors and failed loads since the last call."""
    return [
        entry["message"] for entry in browser_log(driver, "browser") if entry["level"] == "SEVERE"
    ]
