"""A real hub under uvicorn in a thread, for hypothesis and schemathesis (synchronous tests)."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from persona_agent.api.app import create_app
from persona_agent.settings import Settings
from tests.fakes.fake_llm import FakeLLM

BUNDLED = Path(__file__).resolve().parents[2] / "personas"
API_KEY = "property-key"


@pytest.fixture(scope="module")
def hub_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("hub")
    shutil.copytree(BUNDLED, root / "personas")
    with FakeLLM() as llm, socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = Settings(  # type: ignore[call-arg]
            _env_file=None,
            personas_dir=root / "personas",
            data_dir=root / "data",
            public_base_url=url,
            llm_base_url=llm.base_url,
            llm_api_key="test-key",
            llm_max_retries=0,
            watch_personas=False,
            api_keys=API_KEY,
        )
        server = uvicorn.Server(uvicorn.Config(create_app(config), log_level="warning"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline, "the hub did not start"
            time.sleep(0.05)
        try:
            yield url
        finally:
            server.should_exit = True
            thread.join(timeout=30)
