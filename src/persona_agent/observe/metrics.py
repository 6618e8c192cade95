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
from typing import Final, Protocol

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

__all__ = [
    "CONTENT_TYPE_LATEST",
    "NO_METRICS",
    "CounterLike",
    "GaugeLike",
    "HistogramLike",
    "HubMetrics",
    "InfoLike",
]

_SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
"""Task and first-text times: a fast model's answer to a long tool loop."""
_SEARCH_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
"""Memory searches: a few rows scored in a millisecond to 20,000 in a quarter second."""
_COMMIT_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)


class CounterLike(Protocol):
    """What the hub does with a counter (Prometheus's, or one of metrics that are off).
    ``labels``: the instrument's label values, in order (it has at most four)."""

    def labels(self, a: str = ..., b: str = ..., c: str = ..., d: str = ..., /) -> CounterLike: ...

    def inc(self, amount: float = 1) -> None: ...


class GaugeLike(Protocol):
    """What the hub does with a gauge."""

    def labels(self, a: str = ..., b: str = ..., c: str = ..., d: str = ..., /) -> GaugeLike: ...

    def inc(self, amount: float = 1) -> None: ...

    def dec(self, amount: float = 1) -> None: ...

    def set(self, value: float) -> None: ...

    def set_function(self, f: Callable[[], float]) -> None: ...


class HistogramLike(Protocol):
    """What the hub does with a histogram."""

    def labels(
        self, a: str = ..., b: str = ..., c: str = ..., d: str = ..., /
    ) -> HistogramLike: ...

    def observe(self, amount: float) -> None: ...


class InfoLike(Protocol):
    """What the hub does with an info metric."""

    def info(self, val: dict[str, str]) -> None: ...


class _Off:
    """Every instrument of metrics that are off: each call does nothing, ``labels`` gives
    the same instrument back. No allocation (fixed parameters: no tuple of arguments), no
    lock; ``docs/performance.md`` has what a call costs."""

    __slots__ = ()

    def labels(self, a: str = "", b: str = "", c: str = "", d: str = "", /) -> _Off:
        return self

    def inc(self, amount: float = 1) -> None:
        """Counts nothing."""

    def dec(self, amount: float = 1) -> None:
        """Counts nothing."""

    def set(self, value: float) -> None:
        """Keeps nothing."""

    def set_function(self, f: Callable[[], float]) -> None:
        """Keeps nothing (``f`` is never called)."""

    def observe(self, amount: float) -> None:
        """Keeps nothing."""

    def info(self, val: dict[str, str]) -> None:
        """Keeps nothing."""


_OFF: Final = _Off()


class _Instruments:
    """Makes the instruments of one :class:`HubMetrics`: on its registry, or (``registry``
    None: metrics are off) the one instrument that does nothing."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self._registry = registry

    def counter(self, name: str, about: str, labels: tuple[str, ...] = ()) -> CounterLike:
        if self._registry is None:
            return _OFF
        return Counter(name, about, labels, registry=self._registry)

    def gauge(self, name: str, about: str, labels: tuple[str, ...] = ()) -> GaugeLike:
        if self._registry is None:
            return _OFF
        return Gauge(name, about, labels, registry=self._registry)

    def histogram(
        self, name: str, about: str, labels: tuple[str, ...], buckets: tuple[float, ...]
    ) -> HistogramLike:
        if self._registry is None:
            return _OFF
        return Histogram(name, about, labels, buckets=buckets, registry=self._registry)

    def info(self, name: str, about: str) -> InfoLike:
        if self._registry is None:
            return _OFF
        return Info(name, about, registry=self._registry)


class HubMetrics:
    """The hub's metrics, each with the labels its docstring names.

    Always present: metrics that are off (:meth:`disabled`, ``PERSONA_AGENT_METRICS=false``)
    have the same instruments, each doing nothing, so no part of the hub asks whether
    they are on (only ``/metrics``, which answers 404 then: :attr:`enabled`).
    """

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        """Whether anything is counted."""
        self.registry = CollectorRegistry(auto_describe=False)
        make = _Instruments(self.registry if enabled else None)
        self.info = make.info("persona_agent", "The hub: version and replica id")
        self.set_replica("")
        self._a2a(make)
        self._tasks(make)
        self._model(make)
        self._tools(make)
        self._memory(make)
        self._hub(make)

    @classmethod
    def disabled(cls) -> HubMetrics:
        """Metrics that are off: every instrument does nothing."""
        return cls(enabled=False)

    def _a2a(self, make: _Instruments) -> None:
        """What the A2A side counts: calls, refusals, open streams."""
        self.requests = make.counter(
            "persona_agent_a2a_requests",
            "A2A calls handled, by persona, method (SendMessage, GetTask, ...), binding "
            "(jsonrpc, http+json, grpc) and outcome (ok, or the A2A error's name)",
            ("persona", "method", "binding", "outcome"),
        )
        self.refusals = make.counter(
            "persona_agent_a2a_refusals",
            "A2A requests refused before a handler saw them, by persona and reason "
            "(unauthenticated, forbidden, rate_limited)",
            ("persona", "reason"),
        )
        self.open_streams = make.gauge(
            "persona_agent_open_streams",
            "SSE streams open now (SendStreamingMessage, SubscribeToTask), by persona",
            ("persona",),
        )

    def _tasks(self, make: _Instruments) -> None:
        """What the executors count: tasks running, finished, and how long they took."""
        self.tasks_running = make.gauge(
            "persona_agent_tasks_running",
            "Tasks being answered by this replica now, by persona",
            ("persona",),
        )
        self.tasks = make.counter(
            "persona_agent_tasks",
            "Tasks this replica finished answering, by persona and final state "
            "(completed, failed, canceled)",
            ("persona", "state"),
        )
        self.task_seconds = make.histogram(
            "persona_agent_task_duration_seconds",
            "From a task's start to its final state, by persona and final state",
            ("persona", "state"),
            _SECONDS,
        )
        self.first_text_seconds = make.histogram(
            "persona_agent_time_to_first_text_seconds",
            "From a task's start to the first text of its answer, by persona",
            ("persona",),
            _SECONDS,
        )

    def _model(self, make: _Instruments) -> None:
        """What the engine counts: model calls, tokens, cost."""
        self.llm_calls = make.counter(
            "persona_agent_llm_calls",
            "Calls to the model backend, by model and outcome (ok, error)",
            ("model", "outcome"),
        )
        self.tokens = make.counter(
            "persona_agent_llm_tokens",
            "Tokens the model backend reported, by model and kind (input, output, "
            "cached_input: the part of input read from the server's cache)",
            ("model", "kind"),
        )
        self.cost = make.counter(
            "persona_agent_cost_usd",
            "What answers cost in US dollars (PERSONA_AGENT_LLM_PRICES), by persona and model",
            ("persona", "model"),
        )

    def _tools(self, make: _Instruments) -> None:
        """What tools count: MCP calls, outside agents' calls, retries and breakers."""
        self.mcp_calls = make.counter(
            "persona_agent_mcp_calls",
            "MCP tool calls, by server, tool and outcome (ok; tool_error: the tool said it "
            "failed; error: it could not be called; canceled: its task was)",
            ("server", "tool", "outcome"),
        )
        self.remote_calls = make.counter(
            "persona_agent_remote_agent_calls",
            "Calls to outside agents (agent__* tools), by agent and outcome (ok; "
            "input_required: it asked the user; refused: 4xx, rejected; error; timeout; "
            "breaker_open: refused at once by its circuit breaker; canceled)",
            ("agent", "outcome"),
        )
        self.remote_retries = make.counter(
            "persona_agent_remote_agent_retries",
            "Attempts at an outside agent made again after a transient failure, by agent",
            ("agent",),
        )
        self.remote_breaker = make.gauge(
            "persona_agent_remote_agent_breaker_state",
            "The circuit breaker of each outside agent: 0 closed, 1 half-open, 2 open",
            ("agent",),
        )

    def _memory(self, make: _Instruments) -> None:
        """What memory counts (docs/memory.md): searches for a turn's prompt, what they
        brought into it, and the memory tools' calls."""
        self.memory_searches = make.counter(
            "persona_agent_memory_searches",
            "Searches of a caller's memory for a turn's prompt, by persona and outcome "
            "(hit: something was recalled; miss: nothing; error: the search failed)",
            ("persona", "outcome"),
        )
        self.memory_recalled_items = make.counter(
            "persona_agent_memory_recalled_items",
            "Remembered items brought into turns' prompts, by persona",
            ("persona",),
        )
        self.memory_recalled_tokens = make.counter(
            "persona_agent_memory_recalled_tokens",
            "Tokens (characters / 4) of remembered text brought into turns' prompts, by persona",
            ("persona",),
        )
        self.memory_search_seconds = make.histogram(
            "persona_agent_memory_search_seconds",
            "How long a search of a caller's memory for a turn's prompt took, by persona",
            ("persona",),
            _SEARCH_SECONDS,
        )
        self.memory_tool_calls = make.counter(
            "persona_agent_memory_tool_calls",
            "Calls of the memory tools (remember, recall, forget), by persona, tool and "
            "outcome (ok, error)",
            ("persona", "tool", "outcome"),
        )

    def _hub(self, make: _Instruments) -> None:
        """The rest of the hub: push notifications, personas served, database commits."""
        self.push_notifications = make.counter(
            "persona_agent_push_notifications",
            "Push notifications to webhooks, by outcome (delivered; failed: a 4xx, a "
            "redirect, or every retry spent; refused: the URL guard refused the webhook "
            "at delivery; dropped: a delivery queue was full)",
            ("outcome",),
        )
        self.personas = make.gauge("persona_agent_personas", "Personas this replica serves")
        self.db_commit_seconds = make.histogram(
            "persona_agent_db_commit_seconds",
            "How long each database transaction of the hub's writes took to commit",
            (),
            _COMMIT_SECONDS,
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


NO_METRICS: Final = HubMetrics.disabled()
"""Metrics that are off, for a part built without the hub's (a test, a tool): it counts
nothing, and holds nothing, so every such part may share it."""
