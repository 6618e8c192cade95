"""Per-caller limits on A2A: requests a minute, running tasks, open streams.

A caller is its principal (``key:alice``, ``oidc:sub``), or for an anonymous one its
client address (``ip:203.0.113.7``). The hub's limits are settings
(``PERSONA_AGENT_RATE_LIMIT``, ``PERSONA_AGENT_MAX_RUNNING_TASKS``,
``PERSONA_AGENT_MAX_STREAMS``; 0 turns one off); a persona's ``limits:`` adds its own (a
caller's requests a minute to it, its running tasks in all). A call over a limit is
refused with 429 and ``Retry-After``, before the SDK sees it.

An anonymous caller on this machine (a loopback address: the console opened here, the
terminal chat, a script, a benchmark) is not held to the hub's request rate and running
tasks unless ``loopback_exempt`` is false (``PERSONA_AGENT_LIMIT_LOOPBACK``): it is the
machine's own user, and no web page can call as it
(:mod:`persona_agent.security.ingress.host_guard`). A persona's own limits hold it as any
caller.

Requests are counted with a token bucket per caller (a minute's worth of requests may
come at once, then one every ``60 / rate`` seconds). Running tasks are counted by the
executor while it answers; the check before a send reads that count, so a burst of
concurrent sends may pass a limit by the few that were checked together.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["QuotaLimits", "Quotas", "RateLimited"]

MAX_CALLERS = 100_000
"""Callers whose buckets are kept; the least recently seen are forgotten (a full bucket)."""


@dataclass(frozen=True, slots=True)
class QuotaLimits:
    """The hub's limits; 0 is no limit."""

    requests_per_minute: int = 0
    running_tasks: int = 0
    """A caller's tasks being answered at once."""
    open_streams: int = 0
    """A caller's streams (SendStreamingMessage, SubscribeToTask) open at once."""
    loopback_exempt: bool = False
    """Anonymous callers from a loopback address are not held to ``requests_per_minute``
    and ``running_tasks``."""

    @property
    def any(self) -> bool:
        return bool(self.requests_per_minute or self.running_tasks or self.open_streams)


_NO_LIMITS = QuotaLimits()


class RateLimited(Exception):
    """A call over a limit: 429, with the seconds to wait."""

    def __init__(self, message: str, retry_after: int) -> None:
        self.message = message
        self.retry_after = max(1, retry_after)
        super().__init__(message)


class _Bucket:
    __slots__ = ("stamp", "tokens")

    def __init__(self, tokens: float, stamp: float) -> None:
        self.tokens = tokens
        self.stamp = stamp


class Quotas:
    """The counters behind the limits; one per hub, always present (with no limits, each
    check returns at once).

    On the path of every A2A request: :meth:`check_rate` with no limit returns after one
    comparison; :meth:`running` (each task with a caller) adds to two counts and takes
    them back (``docs/performance.md`` has what each costs)."""

    def __init__(self, limits: QuotaLimits = _NO_LIMITS, *, max_callers: int = MAX_CALLERS) -> None:
        """``limits``: the hub's (by default none: every check passes, running tasks and
        open streams are still counted)."""
        self.limits = limits
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._running: dict[str, int] = {}
        self._running_persona: dict[str, int] = {}
        self._streams: dict[str, int] = {}
        self._max_callers = max_callers

    def check_rate(self, caller: str, rate: int, *, scope: str = "") -> None:
        """Take one request from ``caller``'s bucket of ``rate`` a minute (0: no limit).

        Raises:
            RateLimited: the bucket is empty; ``retry_after`` says when one is back.
        """
        if rate <= 0 or (not scope and self.exempt(caller)):
            return
        key = f"{scope}|{caller}"
        now = time.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(rate), now)
            if len(self._buckets) > self._max_callers:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            bucket.tokens = min(float(rate), bucket.tokens + (now - bucket.stamp) * rate / 60)
            bucket.stamp = now
        if bucket.tokens < 1:
            wait = math.ceil((1 - bucket.tokens) * 60 / rate)
            where = f" to {scope}" if scope else ""
            setting = "the persona's limits.requests_per_minute" if scope else _RATE_SETTING
            raise RateLimited(
                f"Too many requests{where}: at most {rate} a minute ({setting})", wait
            )
        bucket.tokens -= 1

    def check_start(self, caller: str, persona_id: str, persona_limit: int = 0) -> None:
        """Whether ``caller`` may start a task now.

        Raises:
            RateLimited: it has its limit of running tasks, or the persona has its own.
        """
        limit = self.limits.running_tasks
        if limit and self._running.get(caller, 0) >= limit and not self.exempt(caller):
            raise RateLimited(
                f"Too many running tasks: at most {limit} at once ({_RUNNING_SETTING})", 1
            )
        if persona_limit and self._running_persona.get(persona_id, 0) >= persona_limit:
            raise RateLimited(
                f"Persona '{persona_id}' is answering {persona_limit} tasks already", 1
            )

    def running(self, caller: str | None, persona_id: str) -> _Running:
        """Count a task of ``caller`` as running while the ``with`` block runs; ``None``: a
        task the hub started for a request of a caller's already counted (a consultation,
        a panel member's turn), which counts for the persona only."""
        return _Running(self, caller, persona_id)

    @contextmanager
    def stream(self, caller: str) -> Iterator[None]:
        """Count a stream of ``caller`` as open while the block runs.

        Raises:
            RateLimited: it has its limit of open streams.
        """
        limit = self.limits.open_streams
        if limit and self._streams.get(caller, 0) >= limit:
            raise RateLimited(f"Too many open streams: at most {limit} at once", 1)
        self._streams[caller] = self._streams.get(caller, 0) + 1
        try:
            yield
        finally:
            _down(self._streams, caller)

    def running_tasks(self, caller: str) -> int:
        return self._running.get(caller, 0)

    def exempt(self, caller: str) -> bool:
        """Whether ``caller`` is spared the hub's request rate and running tasks: an
        anonymous one on a loopback address, unless the limits hold those too."""
        if not self.limits.loopback_exempt or not caller.startswith("ip:"):
            return False
        try:
            return ipaddress.ip_address(caller[3:]).is_loopback
        except ValueError:
            return False


class _Running:
    """:meth:`Quotas.running`'s block: a class, not a generator, since every task with a
    caller enters one (half the generator's cost)."""

    __slots__ = ("_caller", "_persona_id", "_quotas")

    def __init__(self, quotas: Quotas, caller: str | None, persona_id: str) -> None:
        self._quotas, self._caller, self._persona_id = quotas, caller, persona_id

    def __enter__(self) -> None:
        quotas, caller, persona_id = self._quotas, self._caller, self._persona_id
        if caller is not None:
            quotas._running[caller] = quotas._running.get(caller, 0) + 1
        quotas._running_persona[persona_id] = quotas._running_persona.get(persona_id, 0) + 1

    def __exit__(self, *exc_info: object) -> None:
        quotas = self._quotas
        if self._caller is not None:
            _down(quotas._running, self._caller)
        _down(quotas._running_persona, self._persona_id)


_RATE_SETTING = "PERSONA_AGENT_RATE_LIMIT"
_RUNNING_SETTING = "PERSONA_AGENT_MAX_RUNNING_TASKS"


def _down(counts: dict[str, int], key: str) -> None:
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
