"""A hub in process for the conversation tests: real HTTP (httpx over ASGI, the lifespan
run), a real SQLite file (or PostgreSQL), the scripted fake LLM; a persona with alternate
greetings."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from persona_agent.api.app import create_app
from persona_agent.settings import Settings
from tests.fakes.fake_llm import FakeLLM
from tests.integration.conftest import fake_llm_server, llm  # noqa: F401 (fixtures)
from tests.migrated import SqliteTemplate

GREETER = {
    "name": "Gwen the Greeter",
    "description": "A test persona with several greetings.",
    "personal_background": "Gwen greets {{user}} in many ways.",
    "language_style": {"tone": "warm"},
    "knowledge_domains": {"Greetings": ["hello"]},
    "greeting": "Hello, {{user}}!",
    "alternate_greetings": ["Good morning!", "Well met."],
    "tools": {"allow": []},
}

HubApp = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def personas_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "personas"
    directory.mkdir()
    (directory / "gwen.yaml").write_text(yaml.safe_dump(GREETER), encoding="utf-8")
    return directory


@pytest.fixture
def start_hub(
    tmp_path: Path,
    personas_dir: Path,
    llm: FakeLLM,  # noqa: F811
    migrated_sqlite: SqliteTemplate,
) -> HubApp:
    """A hub's HTTP client (the app's lifespan running); call again for a second replica
    (same ``database_url``) or a restart."""

    @asynccontextmanager
    async def start(**overrides: Any) -> AsyncIterator[httpx.AsyncClient]:
        values: dict[str, Any] = {
            "personas_dir": personas_dir,
            "data_dir": tmp_path / "data",
            "llm_base_url": llm.base_url,
            "llm_api_key": "test-key",
            "llm_max_retries": 0,
            "llm_timeout": 10,
            **overrides,
        }
        settings = Settings(_env_file=None, **values)  # type: ignore[call-arg]
        migrated_sqlite.under(settings)  # not migrated again by each hub
        app = create_app(settings)
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http,
        ):
            http.hub_app = app  # type: ignore[attr-defined]  # for a test that runs the engine
            yield http

    return start


@pytest.fixture
async def hub(start_hub: HubApp) -> AsyncIterator[httpx.AsyncClient]:
    async with start_hub() as http:
        yield http
