"""Every door on every deployment (issue 48): the cells of tests/deployment/matrix.py's table,
door × {one hub, two replicas behind nginx} × {a persona, a panel} × operation, each run with
the door's own client against real ``persona-agent serve`` processes on PostgreSQL and the
scripted model. Each deployment starts once for the module (one pytest-xdist worker runs the
cells of a deployment, another those of the other: tests/scheduling.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client import Client

from tests.deployment.matrix import (
    DOORS,
    KNOWN_BROKEN,
    OPERATIONS,
    Cell,
    cells,
    every_cell,
    held_back,
)
from tests.deployment.matrix_a2a import SPEAKERS, run_a2a_cell
from tests.deployment.matrix_hubs import (
    FULL_KEY,
    LIMITED_KEY,
    Deployment,
    deployment,
    matrix_answer,
)
from tests.deployment.matrix_mcp import (
    inspector_command,
    mcp_client,
    run_inspector_cell,
    run_mcp_cell,
)
from tests.deployment.matrix_openai import run_openai_cell
from tests.deployment.matrix_rest import run_rest_cell
from tests.deployment.matrix_sdk03 import assert_sdk03_cell, run_sdk03, sdk03_python
from tests.fakes.fake_llm import FakeLLM


class Deployments:
    """The module's deployments, each started when a cell first needs it."""

    def __init__(self, stack: ExitStack, root: Path, llm: FakeLLM) -> None:
        self._stack = stack
        self._root = root
        self.llm = llm
        self._running: dict[str, Deployment] = {}

    def get(self, name: str) -> Deployment:
        if name not in self._running:
            self._running[name] = self._stack.enter_context(deployment(name, self._root, self.llm))
        return self._running[name]


@pytest.fixture(scope="module")
def matrix_llm() -> Iterator[FakeLLM]:
    """The model of every cell (:func:`matrix_answer`; a cell may script its next answers)."""
    with FakeLLM(default=matrix_answer) as llm:
        yield llm


@pytest.fixture(scope="module")
def deployments(
    tmp_path_factory: pytest.TempPathFactory, matrix_llm: FakeLLM
) -> Iterator[Deployments]:
    with ExitStack() as stack:
        yield Deployments(stack, tmp_path_factory.mktemp("matrix"), matrix_llm)


@pytest.fixture
def llm(matrix_llm: FakeLLM) -> FakeLLM:
    matrix_llm.reset()  # nothing scripted left over by a cell that failed
    return matrix_llm


@pytest.mark.parametrize("cell", cells("a2a-sdk"))
def test_matrix_a2a_sdk(cell: Cell, deployments: Deployments, llm: FakeLLM) -> None:
    asyncio.run(run_a2a_cell(deployments.get(cell.deployment), cell))


@pytest.fixture(scope="module")
def sdk03_reports(deployments: Deployments) -> dict[tuple[str, str, str], Any]:
    """The 0.3 client's reports, one run of it per door, deployment and target (each run
    does every operation of the door: a process and an import of the SDK a run)."""
    return {}


@pytest.mark.parametrize("cell", cells("a2a-sdk-0.3"))
def test_matrix_a2a_sdk03(
    cell: Cell,
    deployments: Deployments,
    llm: FakeLLM,
    sdk03_reports: dict[tuple[str, str, str], Any],
) -> None:
    key = (cell.door.name, cell.deployment, cell.target)
    if key not in sdk03_reports:
        operations = [
            c.operation
            for c in every_cell()
            if (c.door.name, c.deployment, c.target) == key and held_back(c) is None
        ]
        sdk03_reports[key] = run_sdk03(
            sdk03_python(), deployments.get(cell.deployment), cell, operations
        )
    assert_sdk03_cell(cell, sdk03_reports[key][cell.operation], SPEAKERS[cell.target])


@pytest.mark.parametrize("cell", cells("http"))
def test_matrix_rest_conversations(cell: Cell, deployments: Deployments, llm: FakeLLM) -> None:
    asyncio.run(run_rest_cell(deployments.get(cell.deployment), cell, llm))


@pytest.mark.parametrize("cell", cells("openai"))
def test_matrix_openai(cell: Cell, deployments: Deployments, llm: FakeLLM) -> None:
    asyncio.run(run_openai_cell(deployments.get(cell.deployment), cell, llm))


class StdioClients:
    """The stdio door's clients, one ``persona-agent mcp`` process a key for the module
    (each costs a hub's start-up), open in a thread's event loop that every stdio cell
    runs in."""

    def __init__(self, portal: BlockingPortal, stack: ExitStack) -> None:
        self.portal = portal
        self._stack = stack
        self._open: dict[str, Client] = {}

    def run(self, deployment: Deployment, cell: Cell, llm: FakeLLM) -> None:
        for key in (FULL_KEY, LIMITED_KEY):
            if key not in self._open:
                opening = self.portal.wrap_async_context_manager(mcp_client(deployment, cell, key))
                self._open[key] = self._stack.enter_context(opening)

        @asynccontextmanager
        async def connect(key: str) -> AsyncIterator[Client]:
            yield self._open[key]

        self.portal.call(run_mcp_cell, deployment, cell, llm, connect)


@pytest.fixture(scope="module")
def stdio_clients(deployments: Deployments) -> Iterator[StdioClients]:
    with start_blocking_portal() as portal, ExitStack() as stack:
        yield StdioClients(portal, stack)


@pytest.mark.parametrize("cell", cells("mcp"))
def test_matrix_mcp_sdk(
    cell: Cell, deployments: Deployments, llm: FakeLLM, stdio_clients: StdioClients
) -> None:
    deployment = deployments.get(cell.deployment)
    if cell.door.binding[1] == "stdio":
        stdio_clients.run(deployment, cell, llm)
    else:
        asyncio.run(run_mcp_cell(deployment, cell, llm))


INSPECTOR_REQUIRED = os.environ.get("PERSONA_AGENT_TEST_INSPECTOR_REQUIRED", "") == "1"


@pytest.fixture(scope="session")
def inspector() -> list[str]:
    command = inspector_command()
    if command is None:
        if INSPECTOR_REQUIRED:
            pytest.fail("node and npm are required for the MCP Inspector's cells")
        pytest.skip("no node or npm: the MCP Inspector's CLI cannot run (.ci/run installs them)")
    return command


@pytest.mark.parametrize("cell", cells("inspector"))
def test_matrix_mcp_inspector(
    cell: Cell, deployments: Deployments, llm: FakeLLM, inspector: list[str]
) -> None:
    run_inspector_cell(inspector, deployments.get(cell.deployment), cell)


def test_matrix_table_is_whole() -> None:
    """Every door has an operation of the table and a client the tests run; every cell the
    table holds back names its issue, and holds back at least one cell."""
    clients = {"a2a-sdk", "a2a-sdk-0.3", "http", "mcp", "inspector", "openai"}
    for door in DOORS:
        assert door.client in clients, door
        assert set(door.operations) <= set(OPERATIONS), door
    assert len({door.name for door in DOORS}) == len(DOORS)
    for pattern, reason in KNOWN_BROKEN.items():
        assert "issue" in reason or "gap" in reason, reason
        held = [cell for cell in every_cell() if held_back(cell) == reason]
        assert held, f"{pattern} holds back no cell of the table"
