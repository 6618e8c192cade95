"""Push notifications: kept so the older import path works; the parts live in
:mod:`persona_agent.a2a.push`."""

from __future__ import annotations

from persona_agent.a2a.push import (
    MAX_URL_LENGTH,
    IndexedConfigStore,
    PushParts,
    PushUrlGuard,
    RetryingPushSender,
)

__all__ = [
    "MAX_URL_LENGTH",
    "IndexedConfigStore",
    "PushParts",
    "PushUrlGuard",
    "RetryingPushSender",
]
