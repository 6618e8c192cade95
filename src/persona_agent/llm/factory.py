"""Choosing the LLM backend from the settings."""

from __future__ import annotations

from persona_agent.llm.base import LLMBackend
from persona_agent.llm.openai_backend import OpenAIBackend
from persona_agent.llm.unconfigured import UnconfiguredBackend
from persona_agent.settings import Settings

__all__ = ["build_llm_backend"]


def build_llm_backend(settings: Settings) -> LLMBackend:
    """The LLM backend the settings ask for (``auto``: openai when a URL or key is set)."""
    configured = bool(settings.llm_base_url or settings.llm_api_key)
    if settings.llm_backend == "openai" or (settings.llm_backend == "auto" and configured):
        return OpenAIBackend(
            base_url=settings.llm_base_url,
            api_key=settings.llm_api_key,
            model=settings.llm_model,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
        )
    return UnconfiguredBackend()
