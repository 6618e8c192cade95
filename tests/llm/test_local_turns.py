"""The embedded model's turns at their best (real model): it never writes the user's lines,
and a continuation goes on with the answer instead of repeating it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from persona_agent.chat.turn_modes import CONTINUE_NUDGE
from persona_agent.llm.base import ChatRequest, Message, TextDelta
from persona_agent.llm.local.backend import LocalBackend
from persona_agent.personas.model import Persona
from persona_agent.personas.scan import load_persona_dir
from persona_agent.personas.turn_prompt import assemble_prompt
from persona_agent.personas.user_identity import DEFAULT_USER, UserPersona
from tests.conftest import MODEL_THREADS

pytestmark = [pytest.mark.local_model, pytest.mark.asyncio(loop_scope="module")]

BUNDLED, _ = load_persona_dir(Path(__file__).resolve().parents[2] / "personas")
LABELLED_LINE = re.compile(r"(?m)^[>*\-\s]*[A-Z][\w'’.-]*(?:[ \t]+[A-Z][\w'’.-]*){0,3}[ \t]*:")
"""A line that opens with a speaker's label (``User:``, ``Kestrel:``, ``Socrates:``)."""
SENTENCE = re.compile(r"(?<=[.!?…])\s+")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def llm(local_model_dir: Path) -> AsyncIterator[LocalBackend]:
    """One model for the module: loaded once, and a persona's prefix read once for all its
    tests (none of them is about loading or reading; each asks its own length)."""
    backend = LocalBackend(model_dir=local_model_dir, max_tokens=64, seed=7, threads=MODEL_THREADS)
    await backend.load()
    try:
        yield backend
    finally:
        await backend.aclose()


async def answer(
    llm: LocalBackend,
    persona: Persona,
    past: list[Message],
    said: list[Message],
    user: UserPersona = DEFAULT_USER,
    max_tokens: int = 64,
) -> str:
    prompt = await assemble_prompt(persona, past, said, user=user)
    request = ChatRequest(
        messages=prompt.messages(), persona=persona, prompt=prompt, max_tokens=max_tokens
    )
    return "".join([item.text async for item in llm.stream(request) if isinstance(item, TextDelta)])


def normalized(sentence: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", sentence.lower()).split())


async def test_the_model_never_writes_the_user_s_lines(llm: LocalBackend) -> None:
    """Questions that invite a dialogue, from a user who named themselves: no answer holds a
    line under the user's label, their name, or any other speaker's."""
    kestrel = UserPersona("Kestrel", "A young sailor who asks many questions.")
    questions = [
        "Tell me of a conversation you had with a student, line by line.",
        "Write the dialogue between you and me when we first met.",
        "Ask me three questions, and answer them as I would.",
    ]
    answers = [
        await answer(llm, BUNDLED["socrates"], [], [{"role": "user", "content": q}], kestrel)
        for q in questions
    ]
    assert all(text.strip() for text in answers)
    for text in answers:
        assert LABELLED_LINE.search(text) is None, text
        assert "Kestrel:" not in text
        assert "User:" not in text


@pytest.mark.parametrize("persona_id", ["socrates", "charles-darwin"])
async def test_continue_goes_on_with_the_answer_and_repeats_none_of_it(
    llm: LocalBackend, persona_id: str
) -> None:
    persona = BUNDLED[persona_id]
    question: Message = {"role": "user", "content": "Tell me about your life."}
    first = await answer(llm, persona, [], [question], max_tokens=48)
    nudge: Message = {"role": "system", "content": CONTINUE_NUDGE}
    more = await answer(
        llm, persona, [question, {"role": "assistant", "content": first}], [nudge], max_tokens=48
    )
    assert first.strip()
    assert more.strip()
    said_before = {normalized(s) for s in SENTENCE.split(first) if len(s.split()) >= 3}
    added = {normalized(s) for s in SENTENCE.split(more) if len(s.split()) >= 3}
    assert not said_before & added, (first, more)
    assert normalized(more) not in normalized(first)
    # The addition joins on: a space unless the answer ended with one (or a new line).
    assert first[-1].isspace() or more.startswith(" ")
