"""Chat text rendered in the console (Chromium), at 1280 and 400 px: a character card's
greeting and an answer with ``*actions*``, ``**bold**``, "dialogue", a list and code shown as
em, strong, q, li and code; and a hostile card and answer (script tags, an image with an
event handler, ``javascript:`` links, styles) shown inert: no script of theirs runs, no
element carries an event handler, no link goes anywhere but http(s)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

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
from tests.console.test_chat import last_answer, send_message
from tests.console.test_conversations import fits, sized, suffix
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.personas.cards import MIRA_V2

__all__ = ["sized"]

GREETING = (
    "*Captain Mira Voss looks up from the star chart.* "
    '"So you\'re the new mechanic, {{user}}?" **Welcome aboard.**'
)
ANSWER = (
    "*She taps the console.* Three things:\n\n"
    "1. the `reactor` coupling\n"
    "2. the **airlock** seal\n"
    "3. the coffee\n\n"
    "> Rule one: never trust the autopilot.\n\n"
    "```\nreboot --all\n```\n"
    "See [the manual](https://example.org/manual).\n"
    "Line one\nline two"
)
HOSTILE = "\n\n".join(
    [
        "<script>window.pwned = 'script'</script>",
        "<img src=x onerror=\"window.pwned = 'img'\">",
        "<style>body { display: none }</style>",
        'Some <b style="color: red" onclick="window.pwned = \'click\'">styled</b> text',
        "[click me](javascript:window.pwned='link') and [data](data:text/html,<b>x</b>)",
        "![a picture](https://example.org/pixel.png)",
        "A <a href=\"javascript:window.pwned='a'\">raw link</a>",
        "*still italic*",
    ]
)


async def upload_card(hub: ConsoleHub, persona_id: str, greeting: str) -> None:
    card: dict[str, Any] = copy.deepcopy(MIRA_V2)
    card["first_mes"] = card["data"]["first_mes"] = greeting
    card["data"]["alternate_greetings"] = []
    upload = await hub.http.post(
        "/api/v1/personas/upload",
        headers={"X-Requested-With": "tests"},
        files={"file": (f"{persona_id}.json", json.dumps(card).encode())},
        params={"id": persona_id},
    )
    assert upload.status_code == 201, upload.text


def tags(driver: webdriver.Chrome, css: str, tag: str) -> list[str]:
    """The text of each ``tag`` element inside the elements ``css`` selects."""
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, f"{css} {tag}")]


async def test_greetings_and_answers_are_rendered_markdown(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM, sized: int, tmp_path: Path
) -> None:
    await upload_card(hub, "mira", GREETING)
    llm.script(Reply(ANSWER, token_delay=0.05))  # read while it streams
    greeting_css = '#transcript .turn[data-kind="greeting"] .text'
    answer_css = '#transcript .turn[data-kind="answer"] .text'

    def scenario() -> None:
        open_console(browser, hub, "chat/mira")
        find(browser, f"{greeting_css} em")
        assert tags(browser, greeting_css, "em") == [
            "Captain Mira Voss looks up from the star chart."
        ]
        assert tags(browser, greeting_css, "strong") == ["Welcome aboard."]
        assert tags(browser, greeting_css, "q") == ['"So you\'re the new mechanic, User?"']
        assert "*" not in find(browser, greeting_css).text
        send_message(browser, "What needs fixing?")

        def streaming_italics() -> bool:
            """The growing answer already rendered: its action in italics, still written."""
            answer = browser.find_elements(
                By.CSS_SELECTOR, '#transcript .turn.agent[data-state="working"] .text em'
            )
            return bool(answer)

        wait(browser, "the answer rendered as it streams", streaming_italics)
        wait(browser, "the answer", lambda: last_answer(browser)[1] == "completed")
        find(browser, f"{answer_css} li")
        assert tags(browser, answer_css, "em") == ["She taps the console."]
        assert tags(browser, answer_css, "ol > li") == [
            "the reactor coupling",
            "the airlock seal",
            "the coffee",
        ]
        assert tags(browser, answer_css, "li code") == ["reactor"]
        assert tags(browser, answer_css, "li strong") == ["airlock"]
        assert tags(browser, answer_css, "blockquote") == ["Rule one: never trust the autopilot."]
        assert tags(browser, answer_css, "pre > code") == ["reboot --all"]
        link = browser.find_element(By.CSS_SELECTOR, f"{answer_css} a")
        assert link.get_attribute("href") == "https://example.org/manual"
        assert link.get_attribute("target") == "_blank"
        assert link.get_attribute("rel") == "noopener noreferrer"
        # A line break in the text is one in the answer (GFM breaks, as chat is written).
        assert browser.find_elements(By.CSS_SELECTOR, f"{answer_css} p br")
        assert "Line one\nline two" in find(browser, answer_css).text
        screenshot(browser, tmp_path, f"console-markup{suffix(sized)}")
        assert fits(browser)
        assert severe_browser_errors(browser) == []

    await browse(scenario)


INERT_CHECK = """
const root = document.getElementById('transcript');
const handlers = [...root.querySelectorAll('*')].filter(
  (e) => [...e.attributes].some((a) => a.name.startsWith('on') || a.name === 'style'));
const links = [...root.querySelectorAll('a[href]')].map((a) => a.getAttribute('href'));
return {
  pwned: window.pwned || null,
  handlers: handlers.map((e) => e.outerHTML),
  links,
  forbidden: root.querySelectorAll('script, style, img:not(.thumbnail), iframe').length,
  hidden: getComputedStyle(document.body).display,
};
"""


async def test_a_hostile_card_and_answer_render_inert(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM, sized: int, tmp_path: Path
) -> None:
    await upload_card(hub, "mallory", HOSTILE)
    llm.script(Reply(HOSTILE))
    answer_css = '#transcript .turn[data-kind="answer"] .text'

    def scenario() -> dict[str, Any]:
        open_console(browser, hub, "chat/mallory")
        find(browser, '#transcript .turn[data-kind="greeting"] .text em')
        send_message(browser, "Hello?")
        wait(browser, "the answer", lambda: last_answer(browser)[1] == "completed")
        find(browser, f"{answer_css} em")
        # Every link that is left is clicked: none runs anything.
        for link in browser.find_elements(By.CSS_SELECTOR, "#transcript .text a"):
            link.click()
        screenshot(browser, tmp_path, f"console-markup-hostile{suffix(sized)}")
        assert fits(browser)
        result: dict[str, Any] = browser.execute_script(INERT_CHECK)
        shown = find(browser, answer_css).text
        # The markup is shown as the text it is, not run and not lost.
        assert "<script>window.pwned = 'script'</script>" in shown
        assert "onerror" in shown
        assert "still italic" in shown
        assert "a picture" in shown  # a picture is shown as its description
        return result

    result = await browse(scenario)
    assert result["pwned"] is None
    assert result["handlers"] == []
    assert result["links"] == []  # javascript: and data: links keep their text, not their href
    assert result["forbidden"] == 0
    assert result["hidden"] != "none"
