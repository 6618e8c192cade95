"""Settings of how a persona answers: the model backend (an OpenAI-compatible server or
the embedded model), MCP tools, budgets, consultations and outside agents.

A section of :class:`persona_agent.settings.Settings`, which is composed of them and read
once at the edge; each field is ``PERSONA_AGENT_<NAME>`` there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings

__all__ = ["ThinkingSettings"]


class ThinkingSettings(BaseSettings):
    """How a persona answers: model, tools, budgets, outside agents."""

    llm_backend: Literal["auto", "openai", "local"] = "auto"
    llm_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "PERSONA_AGENT_LLM_BASE_URL", "OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT"
        ),
    )
    llm_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "PERSONA_AGENT_LLM_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY"
        ),
        repr=False,
    )
    llm_api_version: str | None = Field(
        default=None,
        validation_alias=AliasChoices("PERSONA_AGENT_LLM_API_VERSION", "OPENAI_API_VERSION"),
    )
    """Azure OpenAI's ``api-version``: set, the base URL is an Azure resource's endpoint and
    the model names a deployment."""
    llm_model: str = "gpt-4o-mini"
    llm_prices: Path | None = None
    """A YAML or JSON file of model prices (USD per million tokens: ``input``, ``output``,
    ``cached_input``), so each answer's cost-v1 data carries ``costUsd``
    (:mod:`persona_agent.observe.pricing`). The embedded model costs nothing."""
    llm_timeout: float = Field(default=60.0, gt=0)
    llm_max_retries: int = Field(default=2, ge=0)
    local_model: str | None = None
    """A GGUF model file for the embedded backend instead of the bundled Gemma 3 270M: its
    path, or ``hf:OWNER/REPO/FILE`` to download (internet and the
    ``huggingface-hub`` package needed). Unset: the bundled model (docs/local-model.md)."""
    local_prompt: Literal["auto", "transcript", "template"] = "auto"
    """How the embedded model is prompted: ``template`` with the chat template in the file's
    metadata (a chat model), ``transcript`` as a base model; ``auto``: the template when
    ``local_model`` names a file that has one, else the transcript."""
    local_model_dir: Path | None = None
    """Where the embedded model's file is assembled and verified; default ``<data_dir>/models``."""
    local_max_tokens: int = Field(default=160, ge=16, le=500)
    """Length cap of an embedded-model answer, in tokens."""
    local_context_tokens: int = Field(default=2048, ge=1024, le=32768)
    """The embedded model's context: transcript and answer together, in tokens."""
    local_threads: int | None = Field(default=None, ge=1)
    """CPU threads of the embedded model; default: every core."""
    local_slots: int = Field(default=4, ge=1, le=16)
    """Conversations the embedded model answers at once (llama.cpp's parallel slots, batched
    together); more wait their turn. Each slot has its own ``local_context_tokens``."""
    local_cache_type_k: Literal["f16", "q8_0"] = "q8_0"
    """The type of the keys in the embedded model's KV cache (what each slot has read, kept
    per token; llama.cpp's ``--cache-type-k``): ``q8_0`` takes half the memory of ``f16``
    (the bundled model at the default slots and context: 33 MB less at rest), for no
    cost shown in speed or answers (docs/local-model.md)."""
    local_cache_type_v: Literal["f16", "q8_0"] = "f16"
    """The type of the values in the embedded model's KV cache (``--cache-type-v``): ``q8_0``
    saves 34 MB more, for 37 % more CPU to read a prompt, 15 % more a token written, and
    weaker answers on the evaluation set (docs/local-model.md)."""
    local_mmproj: Path | None = None
    """A vision projector (mmproj GGUF) for a ``local_model`` that can see: images in a
    message reach the model. Unset: none (the bundled model cannot see)."""
    local_timeout: float = Field(default=600.0, gt=0)
    """Seconds the embedded model may take to start an answer (reading a long card on busy
    cores takes minutes), and to send its next token; ``llm_timeout`` is other servers'."""
    local_preload: bool = True
    """Load the embedded model at start-up (else on the first message)."""
    local_warm_personas: int = Field(default=8, ge=0, le=64)
    """Personas (the first by id; panels aside) whose fixed prompt prefix the embedded model
    reads in the background after start-up, or restores from ``<data_dir>/prefixes``, so
    that their first conversations answer at once; 0: none. Only with ``local_preload``."""
    mcp_config: Path | None = None
    """YAML or JSON file declaring the MCP servers (see docs/tools.md)."""
    tool_timeout: float = Field(default=30.0, gt=0)
    max_tool_iterations: int = Field(default=10, ge=0)
    consult_depth: int = Field(default=2, ge=0, le=8)
    """How deep personas may consult each other (A → B → C is 2); 0 turns consulting off."""
    request_budget_model_calls: int = Field(default=100, ge=0)
    """Model calls one A2A request may make, its whole tree together (the tool loop,
    consultations, a panel's members, picks and synthesis); 0: no limit."""
    request_budget_tool_calls: int = Field(default=100, ge=0)
    """Tool calls (MCP, outside agents, consultations) one A2A request may make, its whole
    tree together; 0: no limit."""
    agents_file: Path | None = None
    """YAML file of A2A agents outside the hub that personas may call (docs/collaboration.md)."""
    # Outside agents: where they may be called, how much of a catalog is read
    agent_url_allowed_hosts: str = ""
    """Comma-separated hosts (``host`` or ``host:port``) an outside agent may be reached on
    although they are not public addresses, beyond those the agents file names (an agent's
    ``card_url`` host, a catalog's host and port): a catalog's agents, a card's interfaces
    elsewhere. Loopback, private and link-local addresses are refused unless here."""
    catalog_max_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024)
    """Largest AI Catalog (and key set) read, agents file or ``chat --agent``; the
    connection is closed past it."""
    catalog_max_depth: int = Field(default=32, ge=8, le=256)
    """Deepest nesting of lists and objects in an AI Catalog."""
    catalog_max_entries: int = Field(default=1000, ge=1, le=100_000)
    """Most entries in an AI Catalog; a catalog of more is refused."""
    catalog_read_seconds: float = Field(default=30.0, gt=0, le=600)
    """The most reading one AI Catalog may take (its key set and signatures included)."""

    @field_validator("llm_base_url", "llm_api_key")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @property
    def agent_url_allowed_host_list(self) -> list[str]:
        return [host.strip() for host in self.agent_url_allowed_hosts.split(",") if host.strip()]
