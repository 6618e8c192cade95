"""What ``serve`` keeps its dependencies from importing although its configuration does not
use it: grpcio, httpx's command line, and the a2a-sdk's database stores (issue 52).

Three things the hub's dependencies import eagerly, whenever they are installed:

- **grpcio** (70 modules, 13 MiB of RSS, 3 MiB of it the heap): the a2a-sdk's
  ``request_handlers`` package imports its gRPC handler, ``a2a.client`` its gRPC
  transports and ``grpc.aio.Channel``, each in a ``try``/``except ImportError`` that falls
  back to what it does when grpcio is not installed. The hub needs them only for its gRPC
  door (``PERSONA_AGENT_GRPC_PORT``) and for outside agents (an agents file: a card may
  offer gRPC alone).
- **rich and pygments** (69 modules, 3.7 MiB): ``httpx/__init__`` imports its command line,
  ``httpx._main``, which nobody in the hub runs, falling back to a stub without them.
- **the a2a-sdk's database stores** (``DatabaseTaskStore``,
  ``DatabasePushNotificationConfigStore``, and the cluster's ``VersionedDatabaseTaskStore``
  and ``DatabaseTaskEventStream``), with SQLAlchemy's ORM and the SDK's mapped models
  (18 MiB with SQLAlchemy itself): the SDK's ``a2a.server.tasks`` and
  ``a2a.server.cluster`` packages try them whenever SQLAlchemy is installed, falling back
  to placeholders that raise when built. The hub has its own stores for both tables
  (:mod:`persona_agent.a2a.tasks`), on :class:`~persona_agent.db.Sql` statements, so a
  default hub (a SQLite file) never imports SQLAlchemy at all.

While the hub's modules are imported, :func:`unused_masked` puts ``None`` in
``sys.modules`` under those names, so each such import raises ImportError and the library
takes its not-installed branch; afterwards the names are free again, so a later import (the
OTLP/gRPC exporter's, a gRPC door's) loads the real library. What stays is only that
fallback in modules imported meanwhile: ``a2a.server.request_handlers.GrpcHandler``, and
``GrpcTransport`` in ``a2a.client``'s modules, are the SDK's stand-ins; the hub's gRPC
door imports the handler's own module, and no part of a hub without an agents file makes
an A2A client. ``tests/test_lean_imports.py`` holds both: not loaded at the defaults,
loaded when configured, and a canary for the day the libraries import them lazily.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["GRPC", "HTTPX_CLI", "SDK_DATABASE_STORES", "unused_masked"]

GRPC = ("grpc",)
"""grpcio, which the a2a-sdk imports (with fallbacks) whenever it is installed."""
HTTPX_CLI = ("httpx._main",)
"""httpx's command line: rich and pygments."""
SDK_DATABASE_STORES = (
    "a2a.server.tasks.database_task_store",
    "a2a.server.tasks.database_push_notification_config_store",
    "a2a.server.cluster.database_task_store",
    "a2a.server.cluster.database_event_stream",
)
"""The a2a-sdk's SQLAlchemy stores, which the hub's own stores replace (the replicas'
event stream imports one function of the last, after the mask: the real module)."""


@contextmanager
def unused_masked(*, grpc: bool) -> Iterator[None]:
    """Within: httpx's command line, the SDK's database stores, and grpcio unless ``grpc``
    (the configuration uses it), cannot be imported; a module already loaded is left as
    it is."""
    names = [*HTTPX_CLI, *SDK_DATABASE_STORES, *(() if grpc else GRPC)]
    masked = [name for name in names if name not in sys.modules]
    for name in masked:
        sys.modules[name] = None  # type: ignore[assignment]  # Python's "not importable"
    try:
        yield
    finally:
        for name in masked:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
