"""The deployment matrix's one table: every door of the hub, the client that takes it, the
operations it has and the deployments it is tried on; test_matrix.py's cells are made from
it (door × deployment × target × operation), and :data:`KNOWN_BROKEN` holds back the cells
of a known hub defect, each with its issue.

Run only the matrix: ``uv run pytest tests/deployment -k matrix`` (README.md, Testing).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

import pytest

__all__ = [
    "DEPLOYMENTS",
    "DOORS",
    "KNOWN_BROKEN",
    "OPERATIONS",
    "TARGETS",
    "Cell",
    "Door",
    "cells",
    "held_back",
]

DEPLOYMENTS = ("one-hub", "two-replicas")
"""One ``persona-agent serve``; two of them on one database behind ``deploy/nginx.conf``."""

TARGETS = {"persona": "socrates", "panel": "science-panel"}
"""Who each cell talks to: a persona, and the bundled panel (three members, three model
calls a message)."""

OPERATIONS = (
    "send",  # a blocking send: the answer, completed
    "stream",  # the answer streamed: ends with exactly one terminal event, completed
    "cancel-same",  # a running task canceled through the replica that runs it
    "cancel-other",  # ... through the other replica (on one hub: the same)
    "resubscribe",  # a running task followed from the other replica to its end
    "list",  # the task (or tool, or conversation) listed from the other replica
    "refused",  # a key limited to another persona, and no key: refused in the door's terms
    "failing",  # the model server answers 500: the task fails, saying so
)
ALL = OPERATIONS
V03 = tuple(op for op in ALL if op != "list")
"""A2A 0.3 has no ListTasks (the 1.x SDK's 0.3 transports refuse it; the 0.3 SDK lacks it)."""


@dataclass(frozen=True)
class Door:
    """A way in, with the client that takes it."""

    name: str
    client: str
    """``a2a-sdk`` (1.x, this environment), ``a2a-sdk-0.3`` (its own environment), ``mcp``
    (the SDK's client), ``inspector`` (the MCP Inspector's CLI, from npm) or ``http``
    (httpx: the REST conversation routes, and the A2A client for the task they start) or
    ``openai`` (the official ``openai`` Python client: ``/v1``)."""
    operations: tuple[str, ...]
    binding: tuple[str, str] = ("", "")
    """The A2A binding and protocol version; for MCP, the era (``auto``: 2026-07-28,
    ``legacy``: the handshake era) or ``stdio``."""
    deployments: tuple[str, ...] = DEPLOYMENTS


DOORS: tuple[Door, ...] = (
    Door("jsonrpc-1.0", "a2a-sdk", ALL, ("JSONRPC", "1.0")),
    Door("jsonrpc-0.3", "a2a-sdk", V03, ("JSONRPC", "0.3")),
    Door("http+json-1.0", "a2a-sdk", ALL, ("HTTP+JSON", "1.0")),
    Door("http+json-0.3", "a2a-sdk", V03, ("HTTP+JSON", "0.3")),
    Door("grpc-1.0", "a2a-sdk", ALL, ("GRPC", "1.0")),
    Door("jsonrpc-0.3-sdk03", "a2a-sdk-0.3", V03, ("JSONRPC", "0.3")),
    Door("http+json-0.3-sdk03", "a2a-sdk-0.3", V03, ("HTTP+JSON", "0.3")),
    # MCP: a tool call is the task; no task id to cancel or follow elsewhere, so cancel is
    # the client abandoning its call.
    Door(
        "mcp-http-2026",
        "mcp",
        ("send", "stream", "cancel-same", "list", "refused", "failing"),
        ("MCP", "auto"),
    ),
    Door(
        "mcp-http-legacy",
        "mcp",
        ("send", "stream", "cancel-same", "list", "refused", "failing"),
        ("MCP", "legacy"),
    ),
    # persona-agent mcp: a hub of its own in the MCP client's process (on the one hub's
    # database here); no load balancer is in front of it, so there is no replica form.
    Door(
        "mcp-stdio",
        "mcp",
        ("send", "list", "refused", "failing"),
        ("MCP", "stdio"),
        ("one-hub",),
    ),
    Door("mcp-inspector", "inspector", ("send", "list"), ("MCP", "cli"), ("one-hub",)),
    # Regenerate and continue are A2A tasks of the persona, with an SSE form.
    Door("rest-conversations", "http", ALL, ("REST", "1.0")),
    # Personas as models: a request is the task, and keeps no id a client could cancel or
    # follow elsewhere, so cancel is the client leaving its stream.
    Door(
        "openai",
        "openai",
        ("send", "stream", "cancel-same", "list", "refused", "failing"),
        ("OPENAI", "v1"),
    ),
)

REST_PANEL = (
    "gap found by the matrix (issue 48, item 9): a panel's conversation has no REST form (its "
    "members keep theirs: docs/collaboration.md), so GET /api/v1/conversations?persona_id="
    "science-panel lists nothing and regenerate and continue answer 404 Conversation not found"
)
KNOWN_BROKEN: dict[tuple[str, str, str, str], str] = {
    # (door, deployment, target, operation) as shell patterns ("*": any): the cells a known
    # hub defect fails, held out of the parametrization until it is fixed; the fixer
    # removes the entry (test_matrix_table_is_whole checks each still holds back a cell).
    **{("rest-conversations", "*", "panel", op): REST_PANEL for op in ALL if op != "refused"},
}


@dataclass(frozen=True)
class Cell:
    door: Door
    deployment: str
    target: str
    """A key of :data:`TARGETS`."""
    operation: str

    @property
    def id(self) -> str:
        return f"{self.door.name}-{self.deployment}-{self.target}-{self.operation}"

    @property
    def persona_id(self) -> str:
        return TARGETS[self.target]


def held_back(cell: Cell) -> str | None:
    """The reason :data:`KNOWN_BROKEN` gives for ``cell``, or None."""
    for (door, deployment, target, operation), reason in KNOWN_BROKEN.items():
        if all(
            fnmatchcase(value, pattern)
            for pattern, value in (
                (door, cell.door.name),
                (deployment, cell.deployment),
                (target, cell.target),
                (operation, cell.operation),
            )
        ):
            return reason
    return None


def every_cell() -> list[Cell]:
    """Every cell of the table, held back or not."""
    return [
        Cell(door, deployment, target, operation)
        for deployment in DEPLOYMENTS
        for door in DOORS
        if deployment in door.deployments
        for target in TARGETS
        for operation in door.operations
    ]


def cells(client: str) -> list[object]:
    """The cells of doors taken by ``client``, as pytest parameters (ids
    ``door-deployment-target-operation``), without those :data:`KNOWN_BROKEN` holds back."""
    return [
        pytest.param(cell, id=cell.id)
        for cell in every_cell()
        if cell.door.client == client and held_back(cell) is None
    ]
