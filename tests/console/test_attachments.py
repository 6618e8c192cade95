"""Files and images attached to a message in the console (Chromium): chosen with the
Attach button, dropped on the composer, pasted into the field; previewed and removable
before sending; sent as A2A file parts (what the model then read comes from the scripted
LLM's recorded requests); shown in the transcript as chips and thumbnails, also when the
conversation is read back from the hub."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

from PIL import Image, ImageFilter
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from tests.console.conftest import (
    ConsoleHub,
    ConsoleHubFactory,
    browse,
    find,
    open_console,
    screenshot,
    severe_browser_errors,
    wait,
)
from tests.console.test_chat import VIRTUE, context_of, last_answer, send_message
from tests.console.test_conversations import fits, sized, suffix
from tests.docs.snippets import find as doc_block
from tests.fakes.fake_llm import FakeLLM, Reply

__all__ = ["sized"]

NOTES = "# Notes on virtue\n\nMeno asks whether virtue can be taught.\n"
TABLE = "city,virtue\nAthens,wisdom\nSparta,courage\n"
DROPPED = "A dropped file that is then removed again.\n"

DROP = """
const [target, name, type, text] = arguments;
const transfer = new DataTransfer();
transfer.items.add(new File([text], name, { type }));
for (const kind of ["dragenter", "dragover", "drop"]) {
  const init = { dataTransfer: transfer, bubbles: true, cancelable: true };
  target.dispatchEvent(new DragEvent(kind, init));
}
"""
"""Drop a file made of ``text`` on ``target``, as a drag from the desktop does."""

PASTE = """
const [target, name, type, data] = arguments;
const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
const transfer = new DataTransfer();
transfer.items.add(new File([bytes], name, { type }));
const init = { clipboardData: transfer, bubbles: true, cancelable: true };
target.dispatchEvent(new ClipboardEvent("paste", init));
"""
"""Paste a file of base64 ``data`` into ``target``, as pasting a copied image does."""


RECORD = """
window.sentMessages = [];
const original = window.fetch;
window.fetch = (url, options) => {
  if (String(url).endsWith("message:stream")) window.sentMessages.push(JSON.parse(options.body));
  return original(url, options);
};
"""
"""Keep the body of each message the console sends (SendStreamingMessage)."""


def documented_message() -> dict[str, Any]:
    """docs/media.md's example of a message with an image, as the console sends it."""
    example: dict[str, Any] = json.loads(doc_block("docs/media.md", '"filename": "chart.png"').text)
    return example


def check_shape(sent: dict[str, Any], files: list[tuple[str, str, bytes]]) -> None:
    """``sent`` is shaped as docs/media.md's example, its file parts ``files`` (name, media
    type, bytes) in order after the text."""
    example = documented_message()["message"]
    assert set(sent["message"]) - {"contextId", "metadata"} == set(example)
    text, *file_parts = sent["message"]["parts"]
    assert set(text) == set(example["parts"][0])
    assert len(file_parts) == len(files)
    for part, (name, media_type, data) in zip(file_parts, files, strict=True):
        assert set(part) == set(example["parts"][1])
        assert (part["filename"], part["mediaType"]) == (name, media_type)
        assert base64.b64decode(part["raw"]) == data


def png(size: tuple[int, int] = (64, 48), colour: tuple[int, int, int] = (200, 60, 40)) -> bytes:
    """A real PNG picture made here."""
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def chips(element: WebElement | webdriver.Chrome) -> list[str]:
    """The file chips' texts (name and size) under ``element``."""
    found = element.find_elements(By.CSS_SELECTOR, ".attachments .file-chip .file-facts")
    return [chip.text for chip in found]


def previews(driver: webdriver.Chrome) -> list[str]:
    """The composer's previews: each file chip's text, each thumbnail's name."""
    row = driver.find_elements(By.CSS_SELECTOR, "#attachment-previews .attachments > *")
    return [
        item.get_attribute("data-name") or item.find_element(By.CSS_SELECTOR, ".file-facts").text
        for item in row
    ]


def last_user(driver: webdriver.Chrome) -> WebElement | None:
    shown = driver.find_elements(By.CSS_SELECTOR, "#transcript .turn.user")
    return shown[-1] if shown else None


def user_content(llm: FakeLLM) -> str:
    """The last user message the model was sent, as text."""
    content = [m for m in llm.requests[-1]["messages"] if m["role"] == "user"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content if p.get("type") == "text")


async def test_documents_attached_by_button_and_drop_reach_the_model(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM, sized: int, tmp_path: Path
) -> None:
    llm.script(Reply(VIRTUE, token_delay=0.05))  # its bubbles are read while it streams
    notes = tmp_path / "notes.md"
    notes.write_text(NOTES, encoding="utf-8")

    def scenario() -> list[dict[str, Any]]:
        open_console(browser, hub, "chat/socrates")
        browser.execute_script(RECORD)
        find(browser, "#attach-input").send_keys(str(notes))
        composer = find(browser, "#composer")
        browser.execute_script(DROP, composer, "table.csv", "text/csv", TABLE)
        browser.execute_script(DROP, composer, "dropped.txt", "text/plain", DROPPED)
        wait(browser, "three previews", lambda: len(previews(browser)) == 3)
        assert chips(find(browser, "#attachment-previews")) == [
            f"notes.md · {len(NOTES)} B",
            f"table.csv · {len(TABLE)} B",
            f"dropped.txt · {len(DROPPED)} B",
        ]
        assert fits(browser)
        screenshot(browser, tmp_path, f"console-attach-files{suffix(sized)}")
        # A preview's × takes the file back.
        find(browser, '#attachment-previews .file-chip[title="text/plain"] .remove').click()
        wait(browser, "two previews", lambda: len(previews(browser)) == 2)
        send_message(browser, "What do my notes say?")
        mine = wait(browser, "the message sent", lambda: last_user(browser))
        assert chips(mine) == [f"notes.md · {len(NOTES)} B", f"table.csv · {len(TABLE)} B"]
        assert previews(browser) == []  # sent: the composer is empty again
        wait(browser, "the answer", lambda: last_answer(browser) == (VIRTUE, "completed"))
        assert severe_browser_errors(browser) == []
        sent: list[dict[str, Any]] = browser.execute_script("return window.sentMessages")
        return sent

    (sent,) = await browse(scenario)
    check_shape(
        sent,
        [("notes.md", "text/markdown", NOTES.encode()), ("table.csv", "text/csv", TABLE.encode())],
    )
    assert "configuration" not in sent  # no voice asked for
    said = user_content(llm)
    assert "What do my notes say?" in said
    assert "Meno asks whether virtue can be taught." in said
    assert "Sparta,courage" in said
    assert "dropped file" not in said


def thumbnails(element: WebElement | webdriver.Chrome) -> list[dict[str, Any]]:
    """The thumbnails under ``element``: name, media type, whether the picture loaded and
    its size."""
    found = element.find_elements(By.CSS_SELECTOR, ".attachments .thumb")
    return [
        {
            "name": thumb.get_attribute("data-name"),
            "mediaType": thumb.get_attribute("data-media-type"),
            "width": thumb.find_element(By.CSS_SELECTOR, "img").get_property("naturalWidth"),
        }
        for thumb in found
    ]


def loaded(driver: webdriver.Chrome) -> list[dict[str, Any]] | None:
    """The last user message's thumbnails, once each picture has loaded."""
    mine = last_user(driver)
    shown = thumbnails(mine) if mine is not None else []
    return shown if shown and all(t["width"] for t in shown) else None


async def test_a_pasted_image_reaches_a_model_that_sees_and_shows_again_when_read_back(
    console_hub: ConsoleHubFactory, browser: webdriver.Chrome, llm: FakeLLM, tmp_path: Path
) -> None:
    llm.script(Reply("A red chart, and your notes."))
    picture = png((64, 48))
    notes = tmp_path / "notes.md"
    notes.write_text(NOTES, encoding="utf-8")

    def scenario(hub: ConsoleHub) -> tuple[list[dict[str, Any]], str]:
        open_console(browser, hub, "chat/socrates")
        browser.execute_script(RECORD)
        field = find(browser, "#message-input")
        encoded = base64.b64encode(picture).decode()
        browser.execute_script(PASTE, field, "chart.png", "image/png", encoded)
        find(browser, "#attach-input").send_keys(str(notes))
        wait(
            browser,
            "two previews",
            lambda: previews(browser) == ["chart.png", f"notes.md · {len(NOTES)} B"],
        )
        assert field.get_attribute("value") == ""  # the picture is not pasted as text
        screenshot(browser, tmp_path, "console-attach")
        send_message(browser, "What is on this chart?")
        wait(browser, "the answer", lambda: last_answer(browser)[1] == "completed")
        mine = last_user(browser)
        assert mine is not None
        context = context_of(browser)
        sent: list[dict[str, Any]] = browser.execute_script("return window.sentMessages")
        # The conversation read back from the hub: the picture from its media URL.
        open_console(browser, hub, f"chat/socrates/{context}")
        shown = wait(browser, "the picture read back", lambda: loaded(browser))
        assert shown == [{"name": "chart.png", "mediaType": "image/png", "width": 64}]
        reopened = last_user(browser)
        assert reopened is not None
        assert chips(reopened) == [f"notes.md · {len(NOTES.encode())} B"]  # its file's chip
        # the documents' text is left to their chip: the bubble shows the user's words
        assert "[document:" not in reopened.text
        assert severe_browser_errors(browser) == []
        return sent, context

    async with console_hub(vision_models="*") as hub:
        (sent,), context = await browse(scenario, hub)
        stored = (await hub.http.get(f"/api/v1/conversations/socrates/{context}")).json()
    check_shape(
        sent, [("chart.png", "image/png", picture), ("notes.md", "text/markdown", NOTES.encode())]
    )
    content = [m for m in llm.requests[-1]["messages"] if m["role"] == "user"][-1]["content"]
    images = [part for part in content if part.get("type") == "image_url"]
    assert len(images) == 1
    assert images[0]["image_url"]["url"].startswith("data:image/png;base64,")
    kinds = [part["kind"] for part in stored["messages"][0]["parts"]]
    assert kinds == ["text", "image", "file"]


async def test_a_large_photo_is_scaled_down_to_fit_the_message(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM, tmp_path: Path
) -> None:
    """A photo over the hub's default message size (1 MiB, base64 included) as it is: the
    console scales it to 1568 px and it is taken."""
    noise = Image.effect_noise((3000, 2000), 40).convert("RGB").filter(ImageFilter.GaussianBlur(2))
    photo = tmp_path / "photo.jpg"
    noise.save(photo, format="JPEG", quality=95)
    assert photo.stat().st_size * 4 / 3 > hub.settings.max_message_bytes  # too large as it is
    llm.script(Reply("A grey fog."))

    def scenario() -> list[dict[str, Any]]:
        open_console(browser, hub, "chat/socrates")
        browser.execute_script(RECORD)
        find(browser, "#attach-input").send_keys(str(photo))
        wait(browser, "the preview", lambda: previews(browser) == ["photo.jpg"])
        send_message(browser, "What is this?")
        wait(browser, "the answer", lambda: last_answer(browser) == ("A grey fog.", "completed"))
        sent: list[dict[str, Any]] = browser.execute_script("return window.sentMessages")
        return sent

    (sent,) = await browse(scenario)
    (part,) = [p for p in sent["message"]["parts"] if "raw" in p]
    assert (part["filename"], part["mediaType"]) == ("photo.jpg", "image/jpeg")
    with Image.open(io.BytesIO(base64.b64decode(part["raw"]))) as picture:
        assert picture.size == (1568, 1045)
