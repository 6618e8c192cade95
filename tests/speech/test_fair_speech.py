"""Issue 46.8 (voice) as the attack: one caller keeps four long answers speaking, another
asks for one; the other's sentences are spoken in turn with the first caller's, not after
all of them (another caller's answer took 188 s behind four long ones). Real speech (the
bundled Piper voice), answers spoken sentence by sentence as the hub's spoken answers are;
and each caller's characters waiting to be spoken are counted and bounded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from persona_agent.speech import Speech, Voice, VoiceLibrary
from persona_agent.speech.fair_queue import FairQueue


def test_callers_are_taken_in_turn_each_in_its_own_order() -> None:
    queue: FairQueue[str] = FairQueue()
    for n in range(4):
        queue.put("alice", f"a{n}")
    queue.put("bob", "b0")
    queue.put("bob", "b1")
    queue.put("carol", "c0")
    assert queue.remove("alice", "a3")
    assert not queue.remove("bob", "a3")
    taken = [queue.take() for _ in range(len(queue))]
    assert [job for _, job in filter(None, taken)] == ["a0", "b0", "c0", "a1", "b1", "a2"]
    assert queue.take() is None
    queue.put("dave", "d0")
    assert queue.drain() == ["d0"]
    assert len(queue) == 0


def test_a_callers_characters_waiting_are_bounded() -> None:
    speech = Speech(VoiceLibrary(None), caller_chars=100)
    assert speech.hold("alice", 60)
    assert not speech.hold("alice", 41)  # 101: refused, nothing counted
    assert speech.hold("bob", 100)  # another caller's own
    assert speech.held("alice") == 60
    speech.release("alice", 60)
    assert speech.held("alice") == 0
    assert speech.hold("alice", 100)
    assert Speech(VoiceLibrary(None), caller_chars=0).hold("alice", 10**9)  # 0: no limit


@pytest.fixture
async def speech() -> AsyncIterator[Speech]:
    hub_speech = Speech(VoiceLibrary(None))
    yield hub_speech
    await hub_speech.aclose()


async def test_another_callers_answer_is_spoken_in_turn_not_after_all_of_one_callers(
    speech: Speech,
) -> None:
    voice = speech.voice(None)
    assert isinstance(voice, Voice)
    spoken: list[str] = []
    alice_started = asyncio.Event()

    async def answer(caller: str, sentences: int) -> None:
        """As a spoken answer does: a sentence at a time, each after the last is spoken."""
        for n in range(sentences):
            await speech.speak(f"This is sentence {n}.", voice, caller)
            spoken.append(caller)
            alice_started.set()

    async with asyncio.timeout(300):  # a bound on a hung test, not a measure
        alices = [asyncio.create_task(answer("alice", 6)) for _ in range(4)]
        await alice_started.wait()  # alice's four answers are being spoken
        bob_from = len(spoken)
        await answer("bob", 3)
        bob_done = len(spoken)
        await asyncio.gather(*alices)

    # Between bob's first question and his last sentence, alice's sentences were spoken
    # in turn with his: the one being spoken when he asked, and one before each of his.
    alice_meanwhile = spoken[bob_from:bob_done].count("alice")
    assert alice_meanwhile <= 2 * 3, spoken
    assert spoken.count("alice") - alice_meanwhile - bob_from >= 12  # most of alice's after
    assert speech.spoken == 27
