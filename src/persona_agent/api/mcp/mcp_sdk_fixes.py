"""Every place the hub corrects the ``mcp`` SDK's server (checked against 2.3; ``mcp>=2.3,<3``).

Nothing here patches the SDK: each fix wraps or is attached to an SDK part where the hub
builds its MCP server (:mod:`.mcp_server`), names the SDK behaviour it corrects and why,
and has a canary in ``tests/api/test_mcp_sdk_fixes.py`` that runs the SDK as shipped and
fails the day the SDK stops behaving so: then the fix can go.

- :func:`quiet_session_ids`: the SDK's session manager and transport write each session's
  id into INFO lines (``Created new transport with session ID: …``, ``Terminating
  session: …``, ``Session … idle timeout``). A session id is what a client shows to use
  its session: it does not belong in logs that operators ship and share. A filter on
  those two loggers writes a short digest of the id in its place (the lines of one
  session still go together; the id cannot be read back from it). The same filter drops
  the line a stateless manager (``/mcp`` on replicas) writes at the end of every request,
  ``Terminating session: None``: one INFO line a request that names nothing.
- The session limits, the idle timeout that pings do not defeat and the binding of a
  session to its caller are :mod:`.mcp_sessions`' (the SDK binds sessions only to its
  own OAuth user, and counts an open stream or a ping as use of a session).
"""

from __future__ import annotations

import hashlib
import logging
import re

__all__ = ["SESSION_ID_FILTER", "SESSION_LOGGERS", "STATELESS_END", "quiet_session_ids"]

SESSION_LOGGERS = ("mcp.server.streamable_http_manager", "mcp.server.streamable_http")
"""The SDK's loggers whose lines name sessions."""
_SESSION_ID = re.compile(
    r"\b[0-9a-fA-F]{32}\b|\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b"
)
"""The SDK's session ids (``uuid4().hex``), and UUIDs written with dashes."""
STATELESS_END = "Terminating session: None"
"""The line a stateless manager writes as each request ends."""


class _SessionIdFilter(logging.Filter):
    """Lines with a session id in them get a digest of it instead (``session#1a2b3c4d``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message == STATELESS_END:
            return False
        quiet = _SESSION_ID.sub(_digest, message)
        if quiet != message:
            record.msg, record.args = quiet, None
        return True


def _digest(found: re.Match[str]) -> str:
    return "session#" + hashlib.sha256(found.group().encode("ascii")).hexdigest()[:8]


SESSION_ID_FILTER = _SessionIdFilter()
"""The one filter, on each of :data:`SESSION_LOGGERS`."""


def quiet_session_ids() -> None:
    """Keep session ids out of the SDK's log lines (once; at the MCP server's start)."""
    for name in SESSION_LOGGERS:
        sdk_logger = logging.getLogger(name)
        if SESSION_ID_FILTER not in sdk_logger.filters:
            sdk_logger.addFilter(SESSION_ID_FILTER)
