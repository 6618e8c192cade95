"""Prometheus metrics: what the hub counts, served at ``/metrics`` in the standard text format.

One :class:`HubMetrics` per app, on a registry of its own (several hubs in one process,
as the tests run them, never share counts). Each replica exposes its own: Prometheus
labels each scrape with its ``instance``, and ``persona_agent_info`` names the replica.
Every figure is counted where it happens (the request handler, the executor, the chat
engine, the MCP toolbox, the database writer); nothing is computed per token.
``docs/observability.md`` lists every metric.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)

from persona_agent import __version__
from persona_agent.observe.usage import Usage

__all__ = ["CONTENT_TYPE_LATEST", "HubMetrics"]

_SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
"""Task and first-text times: a fast model's answer to a long tool loop."""
_COMMIT_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)


class HubMetrics:
    """The hub's metrics, each with the labels its docstring names."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        registry = self.registry
        self.info = Info("persona_agent", "The hub: version and replica id", registry=registry)
        self.set_replica("")
        self.requests = Counter(
            "persona_agent_a2a_requests",
            "A2A calls handled, by persona, method (SendMessage, GetTask, ...), binding "
            "(jsonrpc, http+json) and outcome (ok, or the A2A error's name)",
            ["persona", "method", "binding", "outcome"],
            registry=registry,
        )
        self.refusals = Counter(
            "persona_agent_a2a_refusals",
            "A2A requests refused before a handler saw them, by persona and reason "
            "(unauthenticated, forbidden, rate_limited)",
            ["persona", "reason"],
            registry=registry,
        )
        self.open_streams = Gauge(
            "persona_agent_open_streams",
            "SSE streams open now (SendStreamingMessage, SubscribeToTask), by persona",
            ["persona"],
            registry=registry,
        )
        self.tasks_running = Gauge(
            "persona_agent_tasks_running",
            "Tasks being answered by this replica now, by persona",
            ["persona"],
            registry=registry,
        )
        self.tasks = Counter(
            "persona_agent_tasks",
            "Tasks this replica finished answering, by persona and final state "
            "(completed, failed, canceled)",
            ["persona", "state"],
            registry=registry,
        )
        self.task_seconds = Histogram(
            "persona_agent_task_duration_seconds",
            "From a task's start to its final state, by persona and final state",
            ["persona", "state"],
            buckets=_SECONDS,
            registry=registry,
        )
        self.first_text_seconds = Histogram(
            "persona_agent_time_to_first_text_seconds",
            "From a task's start to the first text of its answer, by persona",
            ["persona"],
            buckets=_SECONDS,
            registry=registry,
        )
        self.llm_calls = Counter(
            "persona_agent_llm_calls",
            "Calls to the model backend, by model and outcome (ok, error)",
            ["model", "outcome"],
            registry=registry,
        )
        self.tokens = Counter(
            "persona_agent_llm_tokens",
            "Tokens the model backend reported, by model and kind (input, output, "
            "cached_input: the part of input read from the server's cache)",
            ["model", "kind"],
            registry=registry,
        )
        self.cost = Counter(
            "persona_agent_cost_usd",
            "What answers cost in US dollars (PERSONA_AGENT_LLM_PRICES), by persona and model",
            ["persona", "model"],
            registry=registry,
        )
        self.mcp_calls = Counter(
            "persona_agent_mcp_calls",
            "MCP tool calls, by server, tool and outcome (ok; tool_error: the tool said it "
            "failed; error: it could not be called; canceled: its task was)",
            ["server", "tool", "outcome"],
            registry=registry,
        )
        self.remote_calls = Counter(
            "persona_agent_remote_agent_calls",
            "Calls to outside agents (agent__* tools), by agent and outcome (ok; "
            "input_required: it asked the user; refused: 4xx, rejected; error; timeout; "
            "breaker_open: refused at once by its circuit breaker; canceled)",
            ["agent", "outcome"],
            registry=registry,
        )
        self.remote_retries = Counter(
            "persona_agent_remote_agent_retries",
            "Attempts at an outside agent made again after a transient failure, by agent",
            ["agent"],
            registry=registry,
        )
        self.remote_breaker = Gauge(
            "persona_agent_remote_agent_breaker_state",
            "The circuit breaker of each outside agent: 0 closed, 1 half-open, 2 open",
            ["agent"],
            registry=registry,
        )
        self.push_notifications = Counter(
            "persona_agent_push_notifications",
            "Push notifications to webhooks, by outcome (delivered; failed: a 4xx, a "
            "redirect, or every retry spent; refused: the URL guard refused the webhook "
            "at delivery; dropped: a delivery queue was full)",
            ["outcome"],
            registry=registry,
        )
        self.personas = Gauge(
            "persona_agent_personas", "Personas this replica serves", registry=registry
        )
        self.db_commit_seconds = Histogram(
            "persona_agent_db_commit_seconds",
            "How long each database transaction of the hub's writes took to commit",
            buckets=_COMMIT_SECONDS,
            registry=registry,
        )

    def set_replica(self, replica: str) -> None:
        """Name this replica in ``persona_agent_info`` (a single hub: empty)."""
        self.info.info({"version": __version__, "replica": replica})

    def count_personas(self, count: Callable[[], int]) -> None:
        """Read the persona count from ``count`` at each scrape."""
        self.personas.set_function(lambda: float(count()))

    def llm_call(self, model: str, usage: Usage, *, failed: bool) -> None:
        """One call to the model backend, with the tokens it reported."""
        self.llm_calls.labels(model, "error" if failed else "ok").inc()
        if usage.prompt_tokens:
            self.tokens.labels(model, "input").inc(usage.prompt_tokens)
        if usage.completion_tokens:
            self.tokens.labels(model, "output").inc(usage.completion_tokens)
        if usage.cached_prompt_tokens:
            self.tokens.labels(model, "cached_input").inc(usage.cached_prompt_tokens)

    def exposition(self) -> bytes:
        """Every metric in the Prometheus text format."""
        return generate_latest(self.registry)
