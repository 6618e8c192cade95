"""The personas' prefixes warmed at start-up (real model): in the background, the hub
ready before it ends, the prefixes saved under the data directory, paused while an answer
is being made, cancelled at shutdown."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from persona_agent.hub.composition import build_hub
from persona_agent.llm.base import ChatRequest
from tests.conftest import MODEL_THREADS
from tests.integration.conftest import BUNDLED, settings_of

pytestmark = pytest.mark.local_model


def hub_settings(root: Path, local_model_dir: Path, **values: Any) -> Any:
    personas = root / "personas"
    personas.mkdir(parents=True, exist_ok=True)
    for persona_id in ("socrates", "marie-curie", "science-panel"):  # a panel is not warmed
        shutil.copy(BUNDLED / f"{persona_id}.yaml", personas)
    return settings_of(
        personas_dir=personas,
        data_dir=root / "data",
        llm_backend="local",
        mcp_config=None,
        local_model_dir=local_model_dir,
        local_threads=MODEL_THREADS,
        **values,
    )


async def test_the_hub_is_ready_before_the_warm_up_ends_and_keeps_the_prefixes(
    tmp_path: Path, local_model_dir: Path
) -> None:
    hub = build_hub(hub_settings(tmp_path, local_model_dir))
    async with hub.running():
        body, not_ready = await hub.readiness.check()
        warming = hub.live.warming
        assert warming is not None
        assert not warming.done()  # two personas' reads ahead: seconds of work
        assert not_ready == []
        assert body["llm"] == {"backend": "local", "model": "gemma-3-270m-q4_k_m"}
        async with asyncio.timeout(900):
            await asyncio.shield(warming)
    assert len(list((tmp_path / "data" / "prefixes").glob("*.slot"))) == 2


async def test_the_warm_up_is_cancelled_at_shutdown_and_can_be_turned_off(
    tmp_path: Path, local_model_dir: Path
) -> None:
    hub = build_hub(hub_settings(tmp_path / "on", local_model_dir))
    async with hub.running():
        warming = hub.live.warming
        assert warming is not None
    assert warming.cancelled()  # shutdown did not wait for the reads
    off = build_hub(hub_settings(tmp_path / "off", local_model_dir, local_warm_personas=0))
    async with off.running():
        assert off.live.warming is not None
        async with asyncio.timeout(60):
            await asyncio.shield(off.live.warming)  # nothing to do
    assert not list((tmp_path / "off" / "data").glob("prefixes/*.slot"))


async def test_the_warm_up_waits_while_an_answer_is_being_made(
    tmp_path: Path, local_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A conversation that asks during the warm-up shares the model with the read under way
    at most: the next persona's read begins once the answer has ended."""
    caplog.set_level(logging.DEBUG, logger="persona_agent.llm.local.backend")

    def begun() -> list[str]:
        return [
            str(record.args[0]) if isinstance(record.args, tuple) else ""
            for record in caplog.records
            if record.msg == "Warming the prefix of persona %s"
        ]

    async def until(condition: Callable[[], bool], what: str) -> None:
        try:
            async with asyncio.timeout(600):  # a bound against a hang, not a timing
                while True:
                    if condition():
                        return
                    await asyncio.sleep(0.05)
        except TimeoutError:
            raise AssertionError(f"waited for {what}") from None

    hub = build_hub(hub_settings(tmp_path, local_model_dir))
    saved = tmp_path / "data" / "prefixes"
    async with hub.running():
        warming = hub.live.warming
        assert warming is not None
        await until(lambda: begun() == ["marie-curie"], "the first read began")
        request = ChatRequest(messages=[{"role": "user", "content": "Hello."}], max_tokens=4)
        async with aclosing(hub.model.llm.stream(request)) as answer:
            await anext(answer)  # asked for, and not ended while this holds it
            await until(lambda: len(list(saved.glob("*.slot"))) == 1, "the first read ended")
            await asyncio.sleep(1.0)  # the next read would have begun at once
            assert begun() == ["marie-curie"]
        async with asyncio.timeout(600):
            await asyncio.shield(warming)
    assert begun() == ["marie-curie", "socrates"]
    assert len(list(saved.glob("*.slot"))) == 2
