"""Spoken answers (issue 38): the voice's real-time factor, and how soon a streaming send
through the hub hears its first sentence.

    uv run python bench/speech.py [--sends 5] [--sentences 12]

``rtf``: the hub's own speech (:class:`persona_agent.speech.Speech`, the bundled voice, its
one worker thread) speaks ``--sentences`` sentences of an ordinary answer, one at a time
as the hub does; the seconds of compute over the seconds of audio, with the worker's
onnxruntime on 1 thread (the default) and on 2 (both cores). Target ≤ 0.5. Also the
voice's first load.

``first audio``: a hub (``persona-agent serve`` in a home of its own, at its defaults,
the tests' scripted LLM in this process streaming a four-sentence answer a word every
50 ms) gets ``--sends`` streaming sends asking for ``audio/wav``, through the a2a-sdk
client; for each, the time from the answer chunk that completes the first sentence's text
to the first chunk of the ``voice`` artifact (the hub waits for the next sentence's first
word to know the first has ended: that word's 50 ms is counted). The first send loads the
voice (cold); the median is of the others. Target ≤ 1.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import run as bench  # the suite's processes

from persona_agent.speech import BUNDLED_VOICE, Speech, VoiceLibrary
from tests.fakes.fake_llm import FakeLLM, Reply

ANSWER = (
    "The harbour is quiet tonight, and the lamp turns slowly above the rocks. "
    "What brings you to the lighthouse at this hour? "
    "The ships will come home before the morning, if the wind keeps to the west. "
    "Sit by the fire, and I will tell you about the storm of last winter."
)
FIRST_END = ANSWER.index("rocks.") + len("rocks.")
TOKEN_DELAY = 0.05
TARGET_RTF = 0.5
TARGET_FIRST_AUDIO = 1.5


async def real_time_factor(threads: int, sentences: int) -> tuple[float, float]:
    """The voice's first load (seconds), and its real-time factor on ``threads`` threads."""
    speech = Speech(VoiceLibrary(None), threads=threads)
    voice = speech.voice(None)
    assert voice is not None, f"the voice {BUNDLED_VOICE} is not installed (the voice extra)"
    started = time.monotonic()
    await speech.speak("Ready.", voice)
    load = time.monotonic() - started
    texts = [s.strip() + "." for s in ANSWER.split(".") if s.strip()] * sentences
    compute = audio = 0.0
    for text in texts[:sentences]:
        started = time.monotonic()
        spoken = await speech.speak(text, voice)
        compute += time.monotonic() - started
        audio += spoken.seconds
    await speech.aclose()
    return load, compute / audio


async def first_audio(url: str, sends: int) -> list[float]:
    """For each streaming send, seconds from the first sentence's text to its audio."""
    delays = []
    async with httpx.AsyncClient(timeout=60) as http:
        card_json = (await http.get(f"{url}/a2a/socrates/.well-known/agent-card.json")).json()
        card = parse_agent_card(card_json)
        assert "audio/wav" in card.default_output_modes, "the hub offers no audio"
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        for _ in range(sends):
            message = Message(
                role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text="Evening")]
            )
            request = SendMessageRequest(message=message)
            request.configuration.accepted_output_modes.extend(["text/plain", "audio/wav"])
            text, text_at, audio_at = "", 0.0, 0.0
            async for event in client.send_message(request):
                update = event.artifact_update
                if not event.HasField("artifact_update"):
                    continue
                if update.artifact.name == "answer" and not text_at:
                    text += "".join(part.text for part in update.artifact.parts)
                    if len(text) >= FIRST_END:
                        text_at = time.monotonic()
                elif update.artifact.name == "voice" and not audio_at:
                    audio_at = time.monotonic()
            assert text_at, "no text"
            assert audio_at, "no voice"
            delays.append(audio_at - text_at)
    return delays


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=12)
    args = parser.parse_args()
    met = True
    for threads in (1, 2):
        load, rtf = asyncio.run(real_time_factor(threads, args.sentences))
        met &= rtf <= TARGET_RTF
        print(f"rtf, {threads} thread(s): {rtf:.3f} (target <= {TARGET_RTF}); load {load:.2f} s")
    root = Path(tempfile.mkdtemp(prefix="bench-speech-"))
    with ExitStack() as stack:
        llm = stack.enter_context(FakeLLM(default=lambda _: Reply(ANSWER, token_delay=TOKEN_DELAY)))
        port = bench.free_port()
        env = {
            **bench.ENV,
            "PERSONA_AGENT_LLM_BASE_URL": llm.base_url,
            "PERSONA_AGENT_LLM_API_KEY": "k",
        }
        command = [bench.PYTHON, "-m", "persona_agent.cli", "serve", "--port", str(port)]
        ready = f"http://127.0.0.1:{port}/healthz"
        stack.enter_context(bench.process(command, ready, env, cwd=bench.hub_home(root, "hub")))
        delays = asyncio.run(first_audio(f"http://127.0.0.1:{port}", args.sends))
    warm = statistics.median(delays[1:]) if len(delays) > 1 else delays[0]
    met &= warm <= TARGET_FIRST_AUDIO
    shown = ", ".join(f"{d:.3f}" for d in delays)
    print(
        f"first audio after the first sentence's text: cold {delays[0]:.3f} s, median "
        f"{warm:.3f} s (target <= {TARGET_FIRST_AUDIO}; {shown})"
    )
    with open("/proc/loadavg", encoding="ascii") as load_file:
        print(f"load average {load_file.read().split()[0]}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
