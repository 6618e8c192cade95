"""The terminal chat's media commands in a real pty: ``/attach PATH`` (files queued for the
next message, sent as A2A file parts: what the model then read comes from the scripted
LLM's recorded requests), ``/attach`` listing them, ``/detach``; ``/voice DIR``,
``/voice off`` and ``--voice-dir`` saving an answer's ``voice`` artifact as WAV files,
against an agent of a2a-sdk alone that speaks (the hub's own voice: test_chat_voice.py)."""

from __future__ import annotations

import base64
import io
import math
import re
import struct
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import (
    Part,
)
from PIL import Image, ImageFilter

from persona_agent.cli.terminal.chat_media import size_text
from tests.cli.test_chat import Chat, StartChat, chat, data_dir, fake_llm, llm, personas_dir, said
from tests.docs.snippets import find
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.servers.sdk_agent import sdk_agent

__all__ = ["chat", "data_dir", "fake_llm", "llm", "personas_dir"]

NOTES = "# Notes\n\nMeno asks whether virtue can be taught.\n"
"""notes.md of docs/chat.md's example (its size is there: 49 B)."""
TABLE = "city,virtue\nAthens,wisdom\n"
SENTENCES = ["Well met.", "The fire is warm.", "Sit down."]
TASK_STEM = re.compile(r"\b[0-9a-f]{8}-(?=\d\d\.wav)")
"""The task id's first 8 characters in a voice file's name (docs/chat.md shows one)."""


def tone(seconds: float, hertz: float = 440.0, rate: int = 16000) -> bytes:
    """A complete WAV file of a sine tone, made here."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        frames = int(seconds * rate)
        samples = (int(8000 * math.sin(2 * math.pi * hertz * n / rate)) for n in range(frames))
        writer.writeframes(b"".join(struct.pack("<h", s) for s in samples))
    return buffer.getvalue()


def test_attach_sends_files_with_the_next_message(
    chat: StartChat, llm: FakeLLM, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text(NOTES, encoding="utf-8")
    table = tmp_path / "table.csv"
    table.write_text(TABLE, encoding="utf-8")
    llm.script(Reply("I have read them."), Reply("Plain."))
    session = chat("socrates")
    session.prompt()
    session.say(f"/attach {tmp_path / 'missing.txt'}")
    assert f"/attach: no file {tmp_path / 'missing.txt'}" in session.text
    session.say(f"/attach {table}")
    session.say("/detach")
    assert "(1 file detached)" in session.text
    session.say(f"/attach {notes}")
    assert f"(attached notes.md (text/markdown, {len(NOTES)} B)" in session.text
    session.say(f"/attach {table}")
    session.say("/attach")
    assert "Attached to your next message:" in session.text
    assert f"  1. notes.md (text/markdown, {len(NOTES)} B)" in session.text
    assert f"  2. table.csv (text/csv, {len(TABLE)} B)" in session.text
    session.say("What do my notes say?")
    assert "Socrates: I have read them." in session.text
    session.say("/attach")  # sent: nothing is attached any more
    assert "(nothing attached: /attach PATH attaches a file" in session.text
    session.say("And now?")
    assert session.quit() == 0
    first, second = (said(request)[-1] for request in llm.requests)
    assert "What do my notes say?" in first
    assert "Meno asks whether virtue can be taught." in first
    assert "Athens,wisdom" in first
    assert second == "And now?"  # the files went with one message only


def test_help_lists_the_media_commands(chat: StartChat) -> None:
    session = chat("socrates")
    session.prompt()
    session.say("/help")
    for command in ("/attach PATH", "/detach", "/voice DIR", "/voice off"):
        assert command in session.text
    assert session.quit() == 0


class _Speaker(AgentExecutor):
    """An agent of a2a-sdk alone that streams a text answer and, when the client accepts
    audio/wav, a ``voice`` artifact of one WAV file a sentence (docs/media.md)."""

    def __init__(self) -> None:
        self.accepted: list[list[str]] = []
        self.chunks = [tone(0.2 + 0.1 * n, 300 + 100 * n) for n in range(len(SENTENCES))]

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        modes = list(context.configuration.accepted_output_modes) if context.configuration else []
        self.accepted.append(modes)
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        await updater.add_artifact(
            [Part(text=" ".join(SENTENCES))], artifact_id="answer", name="answer", last_chunk=True
        )
        if "audio/wav" in modes:
            for n, chunk in enumerate(self.chunks):
                await updater.add_artifact(
                    [Part(raw=chunk, media_type="audio/wav", filename=f"voice-{n + 1}.wav")],
                    artifact_id="voice",
                    name="voice",
                    append=n > 0,
                    last_chunk=n == len(self.chunks) - 1,
                )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


@pytest.fixture
def speaker() -> Iterator[tuple[str, _Speaker]]:
    """A streaming A2A agent whose card offers audio/wav: its URL and its executor."""
    executor = _Speaker()
    with sdk_agent(
        executor,
        name="Bard",
        description="Speaks.",
        skill="speak",
        streaming=True,
        output_modes=("text/plain", "audio/wav"),
    ) as url:
        yield url, executor


def wav_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.wav"))


def test_voice_saves_each_answers_speech_as_wav_files(
    chat: StartChat, speaker: tuple[str, _Speaker], tmp_path: Path
) -> None:
    url, executor = speaker
    voice = tmp_path / "voice"
    session = chat("--agent", url)
    session.prompt()
    session.say("Hello")  # voice off: the answer is not asked to speak
    assert "Bard: Well met. The fire is warm. Sit down." in session.text
    session.say(f"/voice {voice}")
    assert f"(voice on: each answer's speech is saved as WAV files in {voice})" in session.text
    session.say("Again")
    files = wav_files(voice)
    assert [path.read_bytes() for path in files] == executor.chunks  # in the order played
    assert f"(voice: 3 WAV files in {voice}: {files[0].name} … {files[-1].name})" in session.text
    for path in files:
        with wave.open(str(path)) as reading:
            assert reading.getnframes() > 0
    session.say("/voice off")
    session.say("Once more")
    assert len(wav_files(voice)) == 3
    assert session.quit() == 0
    assert executor.accepted == [[], ["audio/wav", "text/plain"], []]


def test_voice_dir_option_asks_for_voice_from_the_first_message(
    chat: StartChat, speaker: tuple[str, _Speaker], tmp_path: Path
) -> None:
    url, executor = speaker
    voice = tmp_path / "spoken"
    session = chat("--agent", url, "--voice-dir", str(voice))
    session.prompt()
    session.say("Hello")
    assert len(wav_files(voice)) == 3
    session.say("/voice")
    assert f"(voice on: saved in {voice}; /voice off stops it)" in session.text
    assert session.quit() == 0
    assert executor.accepted == [["audio/wav", "text/plain"]]


def test_voice_on_a_persona_that_does_not_speak_says_so(chat: StartChat, tmp_path: Path) -> None:
    # The hub without speech (PERSONA_AGENT_VOICE=off): the card offers no audio.
    session = chat("socrates", "--voice-dir", str(tmp_path / "voice"), voice="off")
    session.prompt()
    assert "(the agent's card offers no audio: its answers may come as text only)" in session.text
    assert session.quit() == 0


def type_transcript(
    chat: StartChat, llm: FakeLLM, marker: str
) -> tuple[list[str], Chat, list[str]]:
    """docs/chat.md's transcript that holds ``marker``, its answers scripted and its lines
    typed into a chat with Socrates: the transcript, the chat, and what the screen shows from
    the transcript's first line up to the last prompt (the chat's own)."""
    transcript = find("docs/chat.md", marker).text.strip().splitlines()
    answers = [line.removeprefix("Socrates: ") for line in transcript if line.startswith("Soc")]
    llm.script(*(Reply(answer) for answer in answers))
    session = chat("socrates", "--new")
    session.prompt()
    for line in transcript:
        if line.startswith("you> "):
            session.say(line.removeprefix("you> "))
    shown = session.text.splitlines()
    start = shown.index(transcript[0])
    return transcript, session, shown[start:-1]


def test_the_docs_attach_transcript_is_what_the_chat_shows(
    chat: StartChat, llm: FakeLLM, tmp_path: Path
) -> None:
    """docs/chat.md's example of /attach, typed into the chat (run in ``tmp_path``, where
    its notes.md is): the screen shows it, and the model read the file."""
    (tmp_path / "notes.md").write_text(NOTES, encoding="utf-8")
    transcript, session, shown = type_transcript(chat, llm, "you> /attach notes.md")
    assert shown == transcript  # up to the last prompt, the chat's own
    assert session.quit() == 0
    assert "Meno asks whether virtue can be taught." in said(llm.requests[0])[-1]


def test_the_docs_voice_transcript_is_what_the_chat_shows_with_the_hubs_voice(
    chat: StartChat, llm: FakeLLM, tmp_path: Path
) -> None:
    """docs/chat.md's example of /voice against the hub's own voice (Piper), typed into the
    chat in ``tmp_path``: the screen shows it (the answer's task id aside) and the WAV file
    saved there is speech of the answer's length."""
    transcript, session, shown = type_transcript(chat, llm, "you> /voice voice")
    assert [TASK_STEM.sub("-", line) for line in shown] == [
        TASK_STEM.sub("-", line) for line in transcript
    ]
    assert session.quit() == 0
    (saved,) = wav_files(tmp_path / "voice")
    with wave.open(str(saved)) as reading:
        seconds = reading.getnframes() / reading.getframerate()
    assert 1.0 < seconds < 10.0  # "A man who knows that he knows nothing.", spoken
    assert [m for m in llm.requests[0]["messages"] if m["role"] == "user"][-1] == {
        "role": "user",
        "content": "Who are you?",
    }


def test_an_attached_image_reaches_a_model_that_sees(
    chat: StartChat, llm: FakeLLM, tmp_path: Path
) -> None:
    picture = tmp_path / "chart.png"
    Image.new("RGB", (40, 30), (20, 120, 200)).save(picture, format="PNG")
    llm.script(Reply("A blue square."))
    session = chat("socrates", vision_models="*")
    session.prompt()
    session.say(f"/attach {picture}")
    assert f"(attached chart.png (image/png, {picture.stat().st_size} B)" in session.text
    session.say("What is this?")
    assert "Socrates: A blue square." in session.text
    assert session.quit() == 0
    content = [m for m in llm.requests[0]["messages"] if m["role"] == "user"][-1]["content"]
    assert {"type": "text", "text": "What is this?"} in content
    (image,) = [part for part in content if part["type"] == "image_url"]
    assert image["image_url"]["url"].startswith("data:image/png;base64,")


def test_a_large_photo_is_scaled_down_to_fit_the_message(
    chat: StartChat, llm: FakeLLM, tmp_path: Path
) -> None:
    photo = tmp_path / "photo.jpg"
    noise = Image.effect_noise((3000, 2000), 40).convert("RGB").filter(ImageFilter.GaussianBlur(2))
    noise.save(photo, format="JPEG", quality=95)
    assert photo.stat().st_size * 4 / 3 > 1024 * 1024  # over the default message size
    llm.script(Reply("A grey fog."))
    session = chat("socrates", vision_models="*")
    session.prompt()
    session.say(f"/attach {photo}")
    assert f"scaled down from {size_text(photo.stat().st_size)})" in session.text
    session.say("What is this?")
    assert "Socrates: A grey fog." in session.text
    assert session.quit() == 0
    content = [m for m in llm.requests[0]["messages"] if m["role"] == "user"][-1]["content"]
    (image,) = [part for part in content if part["type"] == "image_url"]
    data = base64.b64decode(image["image_url"]["url"].split(",", 1)[1])
    with Image.open(io.BytesIO(data)) as picture:
        assert picture.size == (1568, 1045)
