"""The local backend on its own: load failures, start-up checks, and fair turns (real model)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from persona_agent.errors import ConfigError, LLMError
from persona_agent.hub.model_backend import build_llm_backend, prepare_llm_backend
from persona_agent.llm.base import ChatRequest, Progress, StreamEnd, TextDelta
from persona_agent.llm.local.backend import LocalBackend
from persona_agent.llm.local.weights import ensure_model_file
from persona_agent.personas.model import Persona
from persona_agent.personas.prompt import render_system_prompt
from persona_agent.personas.scan import load_persona_dir
from persona_agent.settings import Settings
from tests.conftest import MODEL_THREADS
from tests.quality import assert_reads_as_the_persona

BUNDLED, _ = load_persona_dir(Path(__file__).resolve().parents[2] / "personas")


def settings(tmp_path: Path, **values: Any) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data", **values)  # type: ignore[call-arg]


def persona(persona_id: str, *, required: bool) -> Persona:
    return Persona.model_validate(
        {
            "id": persona_id,
            "name": "Tess",
            "description": "A tester.",
            "personal_background": "Tests.",
            "language_style": {"tone": "plain"},
            "knowledge_domains": {"Testing": ["tests"]},
            "tools": {"required": required},
        }
    )


def test_auto_picks_local_with_nothing_configured_and_openai_with_a_url(tmp_path: Path) -> None:
    assert build_llm_backend(settings(tmp_path)).name == "local"
    configured = settings(tmp_path, llm_base_url="http://127.0.0.1:9/v1")
    assert build_llm_backend(configured).name == "openai"
    forced = settings(tmp_path, llm_base_url="http://127.0.0.1:9/v1", llm_backend="local")
    assert build_llm_backend(forced).name == "local"


def test_the_length_cap_must_leave_room_for_the_transcript(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        LocalBackend(model_dir=tmp_path, max_tokens=600, context_tokens=1024)


async def test_a_model_that_cannot_be_assembled_stops_start_up_with_the_reason(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the model directory should be", encoding="utf-8")
    config = settings(tmp_path, local_model_dir=blocker)
    llm = build_llm_backend(config)
    try:
        stream = llm.stream(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
        assert await stream.__anext__() == Progress("loading")  # what the caller waits for
        with pytest.raises(LLMError, match="could not be loaded") as caught:
            await stream.__anext__()
        assert str(blocker) in caught.value.message
        with pytest.raises(ConfigError, match="could not be loaded"):
            await prepare_llm_backend(llm, [], preload=config.local_preload)
    finally:
        await llm.aclose()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "which does not exist"),
        (b"<html>not a model</html>", "which is not a GGUF model file"),
        (b"GGUF" + bytes(range(256)) * 16, "which llama.cpp could not load"),
    ],
    ids=["missing", "not-gguf", "damaged"],
)
async def test_a_model_file_that_cannot_be_loaded_stops_start_up_naming_it(
    tmp_path: Path, content: bytes | None, why: str
) -> None:
    model = tmp_path / "model.gguf"
    if content is not None:
        model.write_bytes(content)
    llm = build_llm_backend(settings(tmp_path, local_model=str(model)))
    assert (llm.default_model, llm.where) == ("model", str(model))
    try:
        with pytest.raises(ConfigError) as caught:
            await prepare_llm_backend(llm, [], preload=True)
    finally:
        await llm.aclose()
    assert f"PERSONA_AGENT_LOCAL_MODEL names {model}, {why}" in caught.value.message


def test_a_hugging_face_reference_names_repository_and_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="hf:OWNER/REPO/FILE"):
        build_llm_backend(settings(tmp_path, local_model="hf:ggml-org/gemma"))
    llm = build_llm_backend(settings(tmp_path, local_model="hf:ggml-org/gemma-3-GGUF/*Q8_0.gguf"))
    assert llm.where == "hf:ggml-org/gemma-3-GGUF/*Q8_0.gguf"


async def test_personas_that_require_tools_are_named_at_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = settings(tmp_path, local_preload=False)
    llm = build_llm_backend(config)
    with caplog.at_level(logging.WARNING, logger="persona_agent.hub.model_backend"):
        await prepare_llm_backend(
            llm,
            [persona("needs-tools", required=True), persona("talks", required=False)],
            preload=config.local_preload,
        )
    await llm.aclose()
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1
    assert "needs-tools requires tools" in warned[0]
    assert "local backend cannot call tools" in warned[0]


@pytest.mark.local_model
@pytest.mark.parametrize("slots", [1, 2])
async def test_generations_past_the_slots_take_turns_in_the_order_they_asked(
    local_model_dir: Path, slots: int
) -> None:
    llm = LocalBackend(
        model_dir=local_model_dir, max_tokens=48, seed=7, threads=MODEL_THREADS, slots=slots
    )
    await llm.load()
    started: list[int] = []
    loop = asyncio.get_running_loop()
    running = 0
    most = 0

    async def ask(number: int) -> str:
        nonlocal running, most
        text = ""
        request = ChatRequest(messages=[{"role": "user", "content": f"Count to {number}."}])
        async for item in llm.stream(request):
            if isinstance(item, TextDelta):
                if not text:
                    started.append(number)
                    running += 1
                    most = max(most, running)
                text += item.text
            elif isinstance(item, StreamEnd):
                running -= 1 if text else 0
        return text

    try:
        answers = []
        for number in range(3):  # asked in this order, one event-loop step apart
            answers.append(loop.create_task(ask(number)))
            await asyncio.sleep(0)
        async with asyncio.timeout(300):
            texts = await asyncio.gather(*answers)
    finally:
        await llm.aclose()
    assert all(text.strip() for text in texts)
    assert started[slots:] == list(range(slots, 3))  # the one that waited came last
    assert most == slots  # as many generations at once as there are slots


@pytest.mark.local_model
async def test_a_persona_met_again_is_not_read_again(local_model_dir: Path) -> None:
    """After other personas spoke, the first one's transcript comes back from the server's
    prompt cache."""
    llm = LocalBackend(model_dir=local_model_dir, max_tokens=32, threads=MODEL_THREADS)

    async def ask(persona_id: str, question: str, max_tokens: int | None = None) -> str:
        system = render_system_prompt(BUNDLED[persona_id])
        request = ChatRequest(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
            persona=BUNDLED[persona_id],
            max_tokens=max_tokens,
        )
        return "".join(
            [item.text async for item in llm.stream(request) if isinstance(item, TextDelta)]
        )

    try:
        # What these two read is what counts, not their answers (a word or so each).
        await ask("socrates", "Who are you?", max_tokens=2)
        await ask("ada-lovelace", "Who are you?", max_tokens=2)
        before = llm.prompt_tokens_reused
        answer = await ask("socrates", "What is virtue?")
    finally:
        await llm.aclose()
    assert llm.prompt_tokens_reused - before > 300  # the persona and its samples
    assert_reads_as_the_persona(answer, "Socrates", 32)


@pytest.mark.local_model
async def test_a_second_message_reads_only_its_new_turn(local_model_dir: Path) -> None:
    """The first answer is found in the server's cache when the second message comes after
    other conversations, though the transcript the hub sends back does not end as the slot's
    tokens did. Gemma 3's sliding-window layers need their full cache for that
    (``swa_full``): without it llama.cpp goes back to the checkpoint before the first answer
    and reads the answer again (docs/local-model.md, "Gemma 3's sliding window without the
    full cache")."""
    llm = LocalBackend(model_dir=local_model_dir, max_tokens=64, threads=MODEL_THREADS, seed=7)
    personas = [p for p in BUNDLED.values() if p.panel is None]
    question = "Tell me about your work, in detail."

    async def ask(persona: Persona, *messages: dict[str, str]) -> tuple[str, StreamEnd]:
        system = {"role": "system", "content": render_system_prompt(persona)}
        request = ChatRequest(messages=[system, *messages], persona=persona)
        items = [item async for item in llm.stream(request)]
        text = "".join(item.text for item in items if isinstance(item, TextDelta))
        ends = [item for item in items if isinstance(item, StreamEnd)]
        return text, ends[-1]

    try:
        await llm.load()
        assert len(await llm.warm(personas)) == len(personas) == 5
        answer, first = await ask(personas[0], {"role": "user", "content": question})
        for other in personas[1:]:  # their conversations take the slots meanwhile
            await ask(other, {"role": "user", "content": question})
        _, second = await ask(
            personas[0],
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "Why did it matter?"},
        )
    finally:
        await llm.aclose()
    assert first.usage.cached_prompt_tokens > 600  # the persona's prefix, warmed
    assert first.usage.completion_tokens >= 32  # an answer longer than the new turn
    # What was read: the new turn (its question and the turn markers), not the answer.
    read = second.usage.prompt_tokens - second.usage.cached_prompt_tokens
    assert 0 < read < 32, (read, first.usage, second.usage)


@pytest.mark.local_model
async def test_another_gguf_file_answers_and_a_new_conversation_reads_only_its_turn(
    local_model_dir: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The bundled weights under another name (``PERSONA_AGENT_LOCAL_MODEL``); and a
    persona's fixed prefix kept where its slot was not: on a server of one slot, after
    another persona spoke (its transcript read into that slot over the first's), a new
    conversation with the first finds the persona's part in the server's prompt cache.
    (With the default four slots: test_a_persona_met_again_is_not_read_again.)"""
    elsewhere = tmp_path / "my-model.gguf"
    elsewhere.symlink_to(ensure_model_file(local_model_dir))
    llm = LocalBackend(
        model_dir=tmp_path / "unused",
        model=str(elsewhere),
        max_tokens=24,
        threads=MODEL_THREADS,
        slots=1,
    )
    assert (llm.default_model, llm.where) == ("my-model", str(elsewhere))

    async def ask(
        persona_id: str, question: str, max_tokens: int | None = None
    ) -> tuple[list[Progress], str]:
        system = render_system_prompt(BUNDLED[persona_id])
        request = ChatRequest(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
            persona=BUNDLED[persona_id],
            max_tokens=max_tokens,
        )
        items = [item async for item in llm.stream(request)]
        text = "".join(item.text for item in items if isinstance(item, TextDelta))
        return [item for item in items if isinstance(item, Progress)], text

    try:
        # What these two read is what counts, not their answers (a word or so each).
        first, _ = await ask("socrates", "Who are you?", max_tokens=2)
        await ask("ada-lovelace", "Who are you?", max_tokens=2)  # into the one slot
        before = llm.prompt_tokens_reused
        again, answer = await ask("socrates", "What is virtue?")
    finally:
        await llm.aclose()
    assert first[0] == Progress("loading")
    assert first[-1].phase == again[-1].phase == "reading"
    assert first[-1].tokens > 300  # the persona, read the first time
    assert llm.prompt_tokens_reused - before > 300  # the persona's part: not read again
    assert_reads_as_the_persona(answer, "Socrates", 24)
    # llama.cpp's own lines stay off the terminal.
    assert "llama" not in capfd.readouterr().err
