"""The audit log: one JSON line per security-relevant event.

``PERSONA_AGENT_AUDIT_LOG`` names a file (appended to) or ``-`` (standard output). Each
line: ``time`` (UTC, ISO 8601), ``principal`` (``anonymous``, ``key:{name}``,
``oidc:{sub}``, ``file`` for the watched directory), ``persona``, ``action``, ``outcome``,
``requestId``, and what else the event says (a task id, a status code, a reason). Actions:
``persona.create``, ``persona.update``, ``persona.delete``, ``task.create``,
``task.cancel``, ``auth.refused``, ``rate.refused``, ``memory.update``, ``memory.delete``,
``memory.export``, ``memory.forget``, ``persona.document.upload``,
``persona.document.delete``, ``memory.document.delete``. Lines are written by a background
thread (the standard library's queue handler), so recording never waits on the disk.
Credentials never appear in it: a principal is a name, never a key or token.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import queue
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["REQUEST_ID_HEADER", "AuditLog", "request_id_of"]

REQUEST_ID_HEADER = "x-request-id"
"""A request id a client or proxy sends is kept (if it is short and plain); else one is made."""

_logger = logging.getLogger("persona_agent.security.audit")
_logger.propagate = False  # the audit log is its own stream, not part of the server's log


class AuditLog:
    """Records events when a target is configured; does nothing otherwise (``AuditLog()``:
    the log of a hub that keeps none, always there so that nobody asks whether it is)."""

    def __init__(self, target: str | None = None) -> None:
        self._listener: logging.handlers.QueueListener | None = None
        self._handler: logging.Handler | None = None
        self._target: logging.Handler | None = None
        if not target:
            return
        handler: logging.Handler
        if target == "-":
            handler = logging.StreamHandler(sys.stdout)
        else:
            path = Path(target)
            path.parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        self._target = handler
        events: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
        self._handler = logging.handlers.QueueHandler(events)
        self._listener = logging.handlers.QueueListener(events, handler)
        self._listener.start()
        _logger.addHandler(self._handler)
        _logger.setLevel(logging.INFO)

    @property
    def enabled(self) -> bool:
        return self._listener is not None

    def record(
        self,
        action: str,
        *,
        principal: str | None,
        persona: str | None = None,
        outcome: str = "ok",
        request_id: str | None = None,
        **details: Any,
    ) -> None:
        if self._handler is None:
            return
        event = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "principal": principal or "anonymous",
            "persona": persona,
            "action": action,
            "outcome": outcome,
            "requestId": request_id,
            **details,
        }
        _logger.info(json.dumps(event, ensure_ascii=False, default=str))

    def close(self) -> None:
        """Write what is queued, then stop."""
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        if self._handler is not None:
            _logger.removeHandler(self._handler)
            self._handler = None
        if self._target is not None:
            self._target.close()
            self._target = None


def request_id_of(headers: dict[str, str] | list[tuple[bytes, bytes]]) -> str:
    """The request's id: the ``X-Request-Id`` it came with (at most 64 plain characters),
    else a new one."""
    given: str | None = None
    if isinstance(headers, dict):
        given = headers.get(REQUEST_ID_HEADER)
    else:
        for name, value in headers:
            if name == REQUEST_ID_HEADER.encode():
                given = value.decode("latin-1")
                break
    if given and len(given) <= 64 and all(c.isalnum() or c in "-_.:" for c in given):
        return given
    return uuid.uuid4().hex
