from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.fake_llm import FakeLLM


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeLLM]:
    """A scripted OpenAI-compatible server on 127.0.0.1, one per test module."""
    with FakeLLM() as server:
        yield server


@pytest.fixture
def fake(fake_server: FakeLLM) -> FakeLLM:
    fake_server.reset()
    return fake_server
