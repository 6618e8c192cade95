"""The hub's logging: one handler on the root logger whose every line has its secrets
redacted, whatever logged it and at whatever level.

a2a-sdk logs each request's headers at DEBUG (``Authorization`` and ``X-API-Key``
among them), HTTP clients log URLs (which may carry ``user:password@``), and an
LLM server's error may echo its credentials. Rather than trusting each library,
the formatter redacts the finished line, traceback included: the values of
credential headers, credentials in URLs and query strings, and every secret the
hub was configured with (API keys, the LLM key). ``serve`` calls
:func:`configure_logging` once, before anything logs.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

__all__ = [
    "LOG_FIELDS",
    "REDACTED",
    "JsonFormatter",
    "RedactingFormatter",
    "bind_log_fields",
    "configure_logging",
    "redact",
    "url_passwords",
]

REDACTED = "[redacted]"

_HEADER_VALUE = re.compile(
    r"(?i)((?:proxy-)?authorization|x-api-key|api-key|cookie|set-cookie)"  # the name
    r"""(b?['"]?\s*[:=,]\s*b?['"]?)"""  # its separator, as a dict, tuple or header line shows it
    r"""([^'"\r\n]+)"""  # the value
)
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/\s:@'\"]*):([^/\s@'\"]+)@")
_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:api[-_]?key|access[-_]?token|token|secret|password|sig|signature)=)"
    r"""[^&\s'"#]+"""
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+")


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with credentials replaced by :data:`REDACTED`."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    text = _HEADER_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{m.group(2)}:{REDACTED}@", text)
    text = _QUERY_SECRET.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    return _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", text)


def url_passwords(*urls: str | None) -> list[str]:
    """The passwords in URLs (``postgresql://hub:PASSWORD@db/...``), as given and decoded:
    secrets to redact wherever else they show (a driver's error may print one alone)."""
    found: list[str] = []
    for url in urls:
        if not url or "@" not in url:
            continue
        try:
            password = urlsplit(url).password
        except ValueError:
            continue
        if password:
            found += [password, unquote(password)]
    return found


LOG_FIELDS: ContextVar[Mapping[str, str]] = ContextVar(
    "persona_agent_log_fields", default=MappingProxyType({})
)
"""What the code running now is about (``request_id``, ``persona``, ``task``, ``context``):
JSON log lines carry it. Set with :func:`bind_log_fields`."""


def bind_log_fields(**fields: str | None) -> Token[Mapping[str, str]]:
    """Add ``fields`` (those not ``None``) to :data:`LOG_FIELDS` for the code that runs from
    here in this context (and the tasks it starts); ``LOG_FIELDS.reset(token)`` undoes it."""
    current = LOG_FIELDS.get()
    return LOG_FIELDS.set({**current, **{k: v for k, v in fields.items() if v is not None}})


def _trace_ids() -> dict[str, str]:
    """The trace and span ids of the OpenTelemetry span under way, if one records."""
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - installed with a2a-sdk
        return {}
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


class RedactingFormatter(logging.Formatter):
    """A formatter whose every line, traceback included, goes through :func:`redact`."""

    def __init__(self, fmt: str, secrets: Iterable[str] = ()) -> None:
        super().__init__(fmt)
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record), self._secrets)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
    ``message``, the fields bound for the code that logged (:data:`LOG_FIELDS`: request
    id, persona, task, context), ``trace_id`` and ``span_id`` under an OpenTelemetry span,
    and ``exception`` with its traceback; the message and the traceback redacted as
    :class:`RedactingFormatter` redacts a line."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage(), self._secrets),
            **LOG_FIELDS.get(),
            **_trace_ids(),
        }
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info), self._secrets)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(
    level: str, secrets: Iterable[str] = (), log_format: Literal["text", "json"] = "text"
) -> None:
    """Log to stderr at ``level`` as text lines (:class:`RedactingFormatter`) or JSON
    objects (:class:`JsonFormatter`), for every logger (uvicorn's included, its access
    log too: ``serve`` gives uvicorn no logging configuration of its own)."""
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter(secrets)
        if log_format == "json"
        else RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s", secrets)
    )
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    # One line per LLM or MCP HTTP call is noise on the hot path, as is one per SQLite
    # operation of the migrations at start-up (aiosqlite), and Alembic's lines on its
    # set-up and each revision (the hub logs what it migrated); their errors still show.
    for noisy in ("httpx", "httpx2", "aiosqlite", "alembic"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
