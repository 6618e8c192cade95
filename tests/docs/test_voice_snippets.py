"""docs/media.md's voice ``curl``, run as a reader pastes it in a sandbox against a hub
without keys, Socrates answering through the scripted fake LLM: the WAV file it writes is
the answer, spoken (its length, loudness and words checked)."""

from __future__ import annotations

import asyncio

from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import claim, expect
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import HubFactory
from tests.speech.audio import hear, recall

SPOKEN = claim("docs/media.md", '"acceptedOutputModes": ["text/plain", "audio/wav"]')
VIRTUE = "Virtue is knowledge, my friend. The ships will come home before the morning."


async def test_the_voice_curl_saves_the_answer_spoken(
    sandbox: Sandbox, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    (send,) = expect(SPOKEN, "curl -s http")
    async with hub_factory(mcp_config=None) as hub:
        llm.script(Reply(VIRTUE))
        command = rewrite(send, {DOC_URL: hub.settings.base_url})
        await asyncio.to_thread(lambda: sandbox.run(command).ok())

    heard = hear((sandbox.root / "answer.wav").read_bytes())
    assert 2.0 < heard.seconds < 8.0, heard
    assert heard.rms > 0.02, heard
    assert recall(VIRTUE, heard.words) >= 0.5, heard  # most of its words
    assert "my friend" in heard.words or "ships will come home" in heard.words, heard
