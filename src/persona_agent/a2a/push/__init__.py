"""Push notifications: the parts being moved here from :mod:`persona_agent.a2a.push_notifications`.

- :mod:`.guard`: :class:`PushUrlGuard`, the ``push_url_validator`` (SSRF).
"""

from __future__ import annotations

from persona_agent.a2a.push.guard import MAX_URL_LENGTH, PushUrlGuard, embedded_ipv4

__all__ = ["MAX_URL_LENGTH", "PushUrlGuard", "embedded_ipv4"]
