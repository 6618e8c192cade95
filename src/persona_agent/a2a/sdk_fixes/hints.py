"""a2a-sdk errors that say what is wrong, made to also say what to do.

Each keeps the SDK's error and code; only its message changes.

- A 1.0 JSON-RPC method (``SendMessage``) called without the ``A2A-Version`` header: the
  SDK takes the missing header as version 0.3, as the specification says, and answers
  VersionNotSupported "A2A version '0.3' is not supported by this handler. Expected
  version '1.0'.", which never names the header a new client forgot. The hub's message
  says to add ``A2A-Version: 1.0``.
- A 1.0 message whose ``role`` is not a 1.0 role (``"user"``, v0.3's spelling): the SDK
  parses with ``ignore_unknown_fields``, which turns an unknown enum value into 0, then
  answers Invalid params "message.role: Field is required." for a role that was given.
  The hub's message names the roles (``ROLE_USER``, ``ROLE_AGENT``).

Canaries: ``tests/a2a/test_sdk_fixes.py::test_sdk_version_error_does_not_name_the_header``
and ``::test_sdk_calls_an_unknown_role_missing``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import Role
from a2a.utils.constants import PROTOCOL_VERSION_1_0, VERSION_HEADER
from a2a.utils.errors import InvalidParamsError, VersionNotSupportedError

__all__ = ["ROLES", "role_error", "version_error"]

ROLES = tuple(role.name for role in Role.DESCRIPTOR.values if role.number != 0)
"""The roles a 1.0 message may have (``ROLE_USER``, ``ROLE_AGENT``)."""


def version_error(
    error: VersionNotSupportedError, context: ServerCallContext
) -> VersionNotSupportedError:
    """``error``, saying to add the header when the request had none."""
    headers: Mapping[str, Any] = context.state.get("headers", {})
    if headers.get(VERSION_HEADER) or headers.get(VERSION_HEADER.lower()):
        return error  # a version was asked for: the SDK's message names it
    method = context.state.get("method") or "this method"
    return VersionNotSupportedError(
        message=f"{method} is an A2A {PROTOCOL_VERSION_1_0} method: add the header "
        f"`{VERSION_HEADER}: {PROTOCOL_VERSION_1_0}` (a request without it is taken as "
        "version 0.3)"
    )


def role_error(request: object) -> InvalidParamsError | None:
    """Invalid params naming the roles, when ``request`` (a 1.0 SendMessageRequest as
    JSON) holds a message whose role is text that names no role; else None."""
    message = request.get("message") if isinstance(request, dict) else None
    role = message.get("role") if isinstance(message, dict) else None
    if not isinstance(role, str) or role in Role.DESCRIPTOR.values_by_name:
        return None  # the SDK's own checks are right about everything else
    problem = f"{role[:40]!r} is not a role: use {' or '.join(ROLES)}"
    return InvalidParamsError(
        message=f"message.role: {problem}",
        data={"errors": [{"field": "message.role", "message": problem}]},
    )
