"""The hub's pages for people: /docs and /redoc with every file served by the hub (no CDN),
the root (the console, or a page of links with the console off), the console's headers."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.console.conftest import (
    ConsoleHub,
    ConsoleHubFactory,
    browse,
    browser_log,
    find,
    open_console,
    severe_browser_errors,
    wait,
)

URL = re.compile(r"""https?://[^\s"'<>)]+""")


class _References(HTMLParser):
    """Every ``href`` and ``src`` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [value for name, value in attrs if name in ("href", "src") and value]


def references(html: str) -> list[str]:
    parser = _References()
    parser.feed(html)
    return parser.found


def requests_made(driver: webdriver.Chrome) -> tuple[list[str], list[str]]:
    """The URLs the page has requested since the last call (Chromium's network log), and
    those of them that the page's Content-Security-Policy kept the browser from sending."""
    urls: dict[str, str] = {}
    blocked: list[str] = []
    for entry in browser_log(driver, "performance"):
        message = json.loads(entry["message"])["message"]
        params = message["params"]
        if message["method"] == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
        elif message["method"] == "Network.loadingFailed" and params.get("blockedReason") == "csp":
            blocked.append(params["requestId"])
    return list(urls.values()), [urls[request] for request in blocked if request in urls]


def foreign(urls: list[str], hub: ConsoleHub) -> list[str]:
    """The URLs that are not the hub's own (nor data in the page)."""
    return [u for u in urls if not u.startswith((f"{hub.url}/", "data:", "blob:", "about:"))]


async def test_the_api_docs_reference_only_the_hubs_files(hub: ConsoleHub) -> None:
    for page in ("/docs", "/redoc"):
        response = await hub.http.get(page)
        assert response.status_code == 200
        html = response.text
        assert URL.findall(html) == []  # no host named at all: every file is the hub's
        found = references(html)
        assert found, page
        for reference in found:
            assert reference.startswith("/docs/static/"), reference
            asset = await hub.http.get(reference)
            assert asset.status_code == 200, reference
        assert "'/openapi.json'" in html or '"/openapi.json"' in html
    assert (await hub.http.get("/docs/oauth2-redirect")).status_code == 200
    assert (await hub.http.get("/openapi.json")).json()["openapi"].startswith("3.1")


async def test_the_docs_render_offline_in_a_browser(
    hub: ConsoleHub, browser: webdriver.Chrome
) -> None:
    def scenario() -> None:
        browser.get(f"{hub.url}/docs")
        # Swagger UI 5 read the OpenAPI 3.1 document and shows the operations.
        find(browser, "#operations-personas-validate_persona_api_v1_personas_validate_post")
        assert len(browser.find_elements(By.CSS_SELECTOR, ".opblock")) >= 8
        sent, blocked = requests_made(browser)
        assert f"{hub.url}/docs/static/swagger-ui-bundle.js" in sent
        assert foreign(sent, hub) == []
        assert blocked == []
        assert severe_browser_errors(browser) == []

        browser.get(f"{hub.url}/redoc")
        wait(
            browser,
            "ReDoc's operations",
            lambda: (
                "validate" in browser.page_source.lower()
                and browser.find_elements(By.CSS_SELECTOR, "h2")
            ),
        )
        sent, blocked = requests_made(browser)
        assert f"{hub.url}/docs/static/redoc.standalone.js" in sent
        # ReDoc's bundle always shows Redocly's logo from its CDN: the page's policy keeps
        # the browser from asking for it (and the link's text stays).
        assert foreign(sent, hub) == blocked == ["https://cdn.redoc.ly/redoc/logo-mini.svg"]
        severe_browser_errors(browser)  # the policy's report of that refusal

        open_console(browser, hub)
        find(browser, '.persona[data-persona-id="socrates"][data-card-version]')
        sent, blocked = requests_made(browser)
        assert foreign(sent, hub) == blocked == []
        assert severe_browser_errors(browser) == []

    await browse(scenario)


async def test_the_root_leads_to_the_console(hub: ConsoleHub) -> None:
    root = await hub.http.get("/")
    assert root.status_code == 307
    assert root.headers["location"] == "/console/"
    bare = await hub.http.get("/console")
    assert bare.status_code == 307
    assert bare.headers["location"].endswith("/console/")
    page = await hub.http.get("/console/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["cache-control"] == "no-cache"
    for reference in references(page.text):  # its own files, relative to /console/
        assert not URL.match(reference), reference
        asset = await hub.http.get(f"/console/{reference}")
        assert asset.status_code == 200, reference
    script = await hub.http.get("/console/js/main.js")
    assert script.headers["content-type"].startswith("text/javascript")


VENDORED = {
    # file: (its header's name and version, as the README and docs/console.md list them)
    "vendor/marked.esm.js": ("marked v18.2.1", "| marked | 18.2.1 | MIT |"),
    "vendor/purify.es.mjs": ("DOMPurify 3.5.0", "| DOMPurify | 3.5.0 | MPL-2.0 or Apache-2.0 |"),
}


async def test_the_vendored_libraries_are_served_as_scripts_and_listed(hub: ConsoleHub) -> None:
    """The libraries the console renders chat text with come from the hub, as JavaScript
    under the console's policy, at the versions its docs list, with their licences."""
    docs = (Path(__file__).parents[2] / "docs" / "console.md").read_text(encoding="utf-8")
    readme = (await hub.http.get("/console/vendor/README.md")).text
    for path, (header, row) in VENDORED.items():
        script = await hub.http.get(f"/console/{path}")
        assert script.status_code == 200, path
        assert script.headers["content-type"].startswith("text/javascript"), path
        assert "default-src 'self'" in script.headers["content-security-policy"]
        assert header in script.text[:400], path
        assert row in docs, row
        assert f"`{path.removeprefix('vendor/')}`" in readme
        assert header.split()[-1].removeprefix("v") in readme
    for licence in ("LICENSE-marked.md", "LICENSE-dompurify.txt"):
        assert (await hub.http.get(f"/console/vendor/{licence}")).status_code == 200


async def test_with_the_console_off_the_root_links_the_rest(
    console_hub: ConsoleHubFactory,
) -> None:
    async with console_hub(console=False) as hub:
        assert (await hub.http.get("/console/")).status_code == 404
        assert (await hub.http.get("/console/js/main.js")).status_code == 404
        root = await hub.http.get("/")
        assert root.status_code == 200
        assert root.headers["content-type"].startswith("text/html")
        links = references(root.text)
        for path in ("/docs", "/a2a/personas", "/.well-known/agent.json"):
            assert path in links
        personas = (await hub.http.get("/a2a/personas")).json()
        for persona in personas:
            card = f"/a2a/{persona['id']}/.well-known/agent-card.json"
            assert card in links
            assert persona["name"] in root.text
        for link in links:
            assert (await hub.http.get(link)).status_code == 200, link
        assert (await hub.http.get("/docs")).status_code == 200
