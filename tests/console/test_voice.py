"""Spoken answers in the console (Chromium) against the hub's real voice (Piper): the Voice
toggle asks for audio/wav, the answer's ``voice`` artifact chunks arrive as WAV blobs on
<audio> elements under the answer, in order, and are played one after another; the Play
button plays them again, and a conversation opened again offers them from its task."""

from __future__ import annotations

import base64
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
from tests.console.test_attachments import RECORD, documented_message
from tests.console.test_chat import context_of, last_answer, send_message
from tests.fakes.fake_llm import FakeLLM, Reply

SPOKEN = "Well met, friend. The fire is warm tonight. Sit, and tell me what brings you."

CHUNKS = """
const done = arguments[arguments.length - 1];
const answers = document.querySelectorAll("#transcript .turn.agent:not(.greeting)");
const audios = [...answers[answers.length - 1].querySelectorAll("audio.voice-chunk")];
Promise.all(audios.map(async (audio) => {
  const blob = audio.blob;
  const head = new Uint8Array(await blob.slice(0, 12).arrayBuffer());
  return {
    index: audio.dataset.index,
    bytes: Number(audio.dataset.bytes),
    size: blob.size,
    type: blob.type,
    riff: String.fromCharCode(...head.slice(0, 4)) + String.fromCharCode(...head.slice(8, 12)),
    started: audio.dataset.started || "",
    refused: audio.dataset.refused || "",
    ended: audio.dataset.ended || "",
    duration: audio.duration,
  };
})).then(done, (error) => done(String(error)));
"""
"""Each audio element of the last answer: its blob's size, type and RIFF/WAVE header, and
whether it was played."""


def voice_box(driver: webdriver.Chrome) -> dict[str, str] | None:
    """The last answer's voice: the order play() was asked of its chunks, and whether it
    plays now."""
    boxes = driver.find_elements(By.CSS_SELECTOR, "#transcript .turn.agent:not(.greeting) .voice")
    if not boxes:
        return None
    box = boxes[-1]
    return {
        "order": box.get_attribute("data-play-order") or "",
        "playing": box.get_attribute("data-playing") or "",
    }


async def test_a_spoken_answer_plays_its_chunks_in_order_and_again(
    hub: ConsoleHub, browser: webdriver.Chrome, llm: FakeLLM, tmp_path: Path
) -> None:
    llm.script(Reply(SPOKEN))

    def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
        open_console(browser, hub, "chat/socrates")
        browser.execute_script(RECORD)
        toggle = find(browser, "#voice-toggle:not([disabled])")  # the card offers audio
        toggle.click()
        assert toggle.get_attribute("aria-pressed") == "true"
        send_message(browser, "Who are you?")
        wait(browser, "the answer", lambda: last_answer(browser) == (SPOKEN, "completed"))
        (sent,) = browser.execute_script("return window.sentMessages")
        # As docs/media.md's example asks.
        assert sent["configuration"] == documented_message()["configuration"]
        chunks: list[dict[str, Any]] = []

        def played() -> bool:
            nonlocal chunks
            chunks = browser.execute_async_script(CHUNKS)
            box = voice_box(browser)
            count = len(chunks)
            everything = ",".join(str(n) for n in range(count))
            ended = all(chunk["ended"] for chunk in chunks)
            return bool(count and box and box["order"] == everything and ended)

        try:
            wait(browser, "every chunk played in order", played)
        except Exception as error:
            raise AssertionError(f"{chunks} {voice_box(browser)}") from error
        screenshot(browser, tmp_path, "console-voice")
        # Play again: from the first chunk.
        find(browser, "#transcript .turn.agent .voice-play").click()

        def playing_again() -> bool:
            box = voice_box(browser)
            return bool(box and box["order"].startswith("0") and box["playing"])

        wait(browser, "the voice playing again", playing_again)
        assert find(browser, "#transcript .turn.agent .voice-play").text == "■ Stop"
        context = context_of(browser)
        # Opened again: the voice comes from the answer's task, to play with the button.
        open_console(browser, hub, f"chat/socrates/{context}")
        find(browser, "#transcript .turn.agent .voice-play")
        again: list[dict[str, Any]] = browser.execute_async_script(CHUNKS)
        # The toggle is remembered in this browser.
        assert find(browser, "#voice-toggle").get_attribute("aria-pressed") == "true"
        assert severe_browser_errors(browser) == []
        return chunks, again, context

    chunks, again, context = await browse(scenario)
    tasks = (
        await hub.http.get(
            "/a2a/socrates/tasks",
            params={"contextId": context, "includeArtifacts": "true"},
            headers={"A2A-Version": "1.0"},
        )
    ).json()["tasks"]
    (voice,) = [a for a in tasks[0]["artifacts"] if a["name"] == "voice"]
    wavs = [base64.b64decode(part["raw"]) for part in voice["parts"]]
    assert len(wavs) >= 2  # spoken sentence by sentence
    assert [c["size"] for c in chunks] == [len(wav) for wav in wavs]  # every chunk, in order
    assert [c["index"] for c in chunks] == [str(n) for n in range(len(wavs))]
    assert all(c["type"] == "audio/wav" and c["riff"] == "RIFFWAVE" for c in chunks)
    assert all(c["bytes"] == c["size"] for c in chunks)
    assert all(c["started"] == "1" and c["ended"] == "1" for c in chunks), str(chunks)
    assert all(c["duration"] > 0.3 for c in chunks)  # decoded: a sentence's seconds
    assert [c["size"] for c in again] == [len(wav) for wav in wavs]
