"""``chat --agent CATALOG_URL`` reads the catalog within the hub's catalog limits: an endless
catalog is cut at the byte limit (the command fails naming the setting, its server sees
the connection closed long before the end), a nested one at the depth limit, and an entry
it cannot use is left out, named on standard error."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from typing import Any

import httpx
import pytest
import typer

from persona_agent.a2a.discovery.ai_catalog import A2A_CARD_TYPE
from persona_agent.cli.terminal.a2a_chat import Target
from persona_agent.cli.terminal.chat_catalog import agent_target, catalog_limits
from persona_agent.settings import Settings
from tests.servers.raw_http import RawHttp

CATALOG = "/.well-known/ai-catalog.json"


def _settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


async def _choose(url: str, settings: Settings) -> Target:
    """``agent_target`` as the command runs it: its own event loop (in a thread, so that
    the test's server goes on serving in this one)."""

    def command() -> Target:
        def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
            return asyncio.run(_closing(coroutine, http))

        http = httpx.AsyncClient(timeout=30)
        return agent_target(run, http, url, catalog_limits(settings))

    return await asyncio.to_thread(command)


async def _closing(coroutine: Coroutine[Any, Any, Any], http: httpx.AsyncClient) -> Any:
    try:
        return await coroutine
    finally:
        await http.aclose()


async def test_an_endless_catalog_is_cut_at_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    total = 50 * 1024 * 1024
    async with RawHttp() as server:
        server.stream(CATALOG, itertools.repeat(b" " * 65536, total // 65536))
        with pytest.raises(typer.Exit) as ended:
            await _choose(server.base_url + CATALOG + "#ada", _settings(catalog_max_bytes=65536))
        async with asyncio.timeout(30):
            await server.answers[CATALOG].cut.wait()
        sent = server.answers[CATALOG].sent
    assert ended.value.exit_code == 1
    error = capsys.readouterr().err
    assert "it has more than 65,536 bytes, the limit (PERSONA_AGENT_CATALOG_MAX_BYTES)" in error
    assert sent < total // 2  # the limit and the sockets' buffers, never the 50 MB


async def test_a_nested_catalog_is_refused_at_the_depth_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    nested = b"[" * 100_000 + b"]" * 100_000
    async with RawHttp() as server:
        server.body(CATALOG, b'{"specVersion": "1.0", "entries": %s}' % nested)
        with pytest.raises(typer.Exit):
            await _choose(server.base_url + CATALOG, _settings())
    error = capsys.readouterr().err
    assert "nest more than 32 deep (PERSONA_AGENT_CATALOG_MAX_DEPTH)" in error


async def test_an_entry_it_cannot_use_is_left_out_and_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    card = {"name": "Ada", "supportedInterfaces": []}
    entries = [
        {"identifier": "urn:agent:ghost", "displayName": "Ghost", "mediaType": A2A_CARD_TYPE},
        {"identifier": "urn:agent:ada", "displayName": "Ada", "type": A2A_CARD_TYPE, "data": card},
    ]
    async with RawHttp() as server:
        server.json(CATALOG, {"specVersion": "1.0", "entries": entries})
        target = await _choose(server.base_url + CATALOG + "#ada", _settings())
    assert target.card is not None
    assert target.card.name == "Ada"
    error = capsys.readouterr().err
    assert (
        "The AI Catalog's entry entries[0] ('urn:agent:ghost'): exactly one of url and data "
        "is required: left out"
    ) in error
