"""UnconfiguredBackend: every call fails with a message that says how to configure a model."""

from __future__ import annotations

import pytest

from persona_agent.errors import LLMError, LLMNotConfiguredError
from persona_agent.llm import ChatRequest, UnconfiguredBackend


async def test_stream_raises_not_configured_with_the_settings_to_use() -> None:
    llm = UnconfiguredBackend()
    items = llm.stream(ChatRequest(messages=[{"role": "user", "content": "Hello?"}]))
    with pytest.raises(LLMNotConfiguredError) as caught:
        await anext(items)
    assert isinstance(caught.value, LLMError)
    assert "PERSONA_AGENT_LLM_BASE_URL" in caught.value.message
    assert "OPENAI_API_KEY" in caught.value.message
    await llm.aclose()


def test_identity() -> None:
    llm = UnconfiguredBackend()
    assert (llm.name, llm.default_model) == ("none", "none")
