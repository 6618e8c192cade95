"""Personas' fixed prefixes kept: read once, saved to files, restored after a restart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from persona_agent.llm.base import ChatRequest, TextDelta
from persona_agent.llm.local.backend import LocalBackend
from persona_agent.llm.local.prefixes import PrefixFiles, Warmed
from persona_agent.llm.local.server import KvCacheType
from persona_agent.personas.prompt import render_system_prompt
from persona_agent.personas.scan import load_persona_dir
from tests.conftest import MODEL_THREADS

BUNDLED, _ = load_persona_dir(Path(__file__).resolve().parents[2] / "personas")


def test_a_saved_prefix_is_named_by_its_tokens_and_model_and_stale_ones_pruned(
    tmp_path: Path,
) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    files = PrefixFiles(tmp_path / "prefixes", model, "xllamacpp 1, 2048")
    files.directory.mkdir()
    name = files.name_of([2, 10, 11])
    assert name == files.name_of([2, 10, 11])
    assert name != files.name_of([2, 10, 12])
    assert name != PrefixFiles(files.directory, model, "xllamacpp 2, 2048").name_of([2, 10, 11])
    os.utime(model, ns=(1, 1))  # the model file replaced: nothing saved from it is restored
    assert name != files.name_of([2, 10, 11])
    for stale in (name, files.name_of([2, 10, 11]), "other.slot"):
        (files.directory / stale).write_bytes(b"")
    (files.directory / "notes.txt").write_text("not ours")
    assert files.prune({files.name_of([2, 10, 11])}) == 2
    assert sorted(p.name for p in files.directory.iterdir()) == sorted(
        [files.name_of([2, 10, 11]), "notes.txt"]
    )


async def ask(llm: LocalBackend, persona_id: str, question: str) -> str:
    persona = BUNDLED[persona_id]
    request = ChatRequest(
        messages=[
            {"role": "system", "content": render_system_prompt(persona)},
            {"role": "user", "content": question},
        ],
        persona=persona,
    )
    return "".join([item.text async for item in llm.stream(request) if isinstance(item, TextDelta)])


@pytest.mark.local_model
async def test_a_restart_restores_the_saved_prefixes_instead_of_reading_them(
    local_model_dir: Path, tmp_path: Path
) -> None:
    slots = tmp_path / "data" / "prefixes"
    personas = [BUNDLED["socrates"], BUNDLED["marie-curie"]]

    def backend() -> LocalBackend:
        return LocalBackend(
            model_dir=local_model_dir, max_tokens=16, threads=MODEL_THREADS, slot_dir=slots
        )

    first = backend()
    try:
        await first.load()
        assert await first.warm(personas) == {"socrates": "read", "marie-curie": "read"}
    finally:
        await first.aclose()
    saved = sorted(slots.glob("*.slot"))
    assert len(saved) == 2
    assert all(path.stat().st_size > 1_000_000 for path in saved)  # the read state, not a stub

    again = backend()  # the next process, as after a restart
    try:
        await again.load()
        assert await again.warm(personas) == {"socrates": "restored", "marie-curie": "restored"}
        for persona_id in ("socrates", "marie-curie"):
            before = again.prompt_tokens_reused
            assert (await ask(again, persona_id, "Who are you?")).strip()
            # The persona's whole part came from the restored file, none of it read again.
            assert again.prompt_tokens_reused - before > 300
    finally:
        await again.aclose()
    assert sorted(slots.glob("*.slot")) == saved  # the same files: nothing stale, nothing new


@pytest.mark.local_model
async def test_prefixes_saved_with_another_kv_cache_type_are_read_again_and_replaced(
    local_model_dir: Path, tmp_path: Path
) -> None:
    """A hub whose KV cache changed type (keys in ``f16`` before ``q8_0`` was the default)
    never restores a file of the other type: it reads the prefix again and saves it in its
    own type, smaller, and the old file goes; the next start restores the new one."""
    slots = tmp_path / "data" / "prefixes"
    persona = [BUNDLED["marie-curie"]]
    sizes: list[dict[str, int]] = []
    runs: tuple[tuple[KvCacheType, Warmed], ...] = (("f16", "read"), ("q8_0", "read"))
    for cache_type_k, how in (*runs, ("q8_0", "restored")):
        llm = LocalBackend(
            model_dir=local_model_dir,
            max_tokens=16,
            threads=MODEL_THREADS,
            slot_dir=slots,
            cache_type_k=cache_type_k,
            cache_type_v="f16",
        )
        try:
            await llm.load()
            assert await llm.warm(persona) == {"marie-curie": how}
            before = llm.prompt_tokens_reused
            assert (await ask(llm, "marie-curie", "Who are you?")).strip()
            assert llm.prompt_tokens_reused - before > 300  # the prefix, read or restored
        finally:
            await llm.aclose()
        sizes.append({path.name: path.stat().st_size for path in slots.glob("*.slot")})
    ((f16_name, f16_size),) = sizes[0].items()
    ((q8_name, q8_size),) = sizes[1].items()  # the f16 file pruned
    assert q8_name != f16_name
    assert sizes[2] == sizes[1]  # restored, not saved again
    # Keys are half of what a token keeps; in q8_0 they take 34 bytes a 32 values, not 64.
    assert 0.65 * f16_size < q8_size < 0.85 * f16_size
