"""Which tests pytest-xdist runs together on one worker: groups named by node id prefix.

``uv run pytest`` runs on parallel workers (``-n 3 --dist loadgroup``, pyproject.toml).
Each test goes to whichever worker is free, except the tests of a group, which one worker
runs one after the other: :data:`GROUPS`. pytest-xdist's own groups (the ``xdist_group``
mark) no longer take effect on pytest 9.2 (pytest-dev/pytest-xdist#1386), so
tests/conftest.py makes the scheduler here instead, which reads the groups from node ids.

The work is handed out longest first (:func:`handout_rank`): a group runs on one worker,
so the run cannot end before the group started last has finished, nor before the slow
test handed out last.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from xdist.scheduler import LoadScopeScheduling

__all__ = ["GROUPS", "LONGEST", "SPLIT", "GroupScheduling", "group_of", "handout_rank"]

GROUPS: dict[str, tuple[str, ...]] = {
    # One model in memory, no two generations fighting for the cores (tests/conftest.py
    # checks that every ``local_model`` test is in this group).
    "local_model": (
        "tests/integration/test_local_model.py::",
        "tests/llm/test_local_backend.py::",
        "tests/llm/test_local_prefixes.py::",
        "tests/llm/test_local_turns.py::",
        "tests/llm/test_local_tools.py::",
        "tests/integration/test_local_tool_calls.py::",
        "tests/integration/test_local_warmup.py::",
        "tests/cli/test_cli.py::test_serve_with_no_configuration_answers_with_the_local_model",
        "tests/console/test_demo_label.py::",  # before "console": its own Chromium
    ),
    # One Chromium for the browser tests (a session fixture).
    "console": ("tests/console/",),
    # One replica set for both tests (a module fixture: three processes, nginx, a database).
    "replicas_nginx": ("tests/deployment/test_nginx_replicas.py::",),
    # The deployment matrix: each of its two deployments (one hub; two replicas behind
    # nginx) starts once, on the worker that runs its cells (:data:`SPLIT`).
    "matrix": ("tests/deployment/test_matrix.py::",),
    # Modules whose tests share a module fixture that starts a process (a hub, an MCP
    # server): on one worker it starts once, not once on each worker that runs one of them
    # (each ``persona-agent serve`` costs a second or two of CPU to start).
    **{
        path: (f"tests/{path}.py::",)
        for path in (
            "cli/test_chat",
            "cli/test_chat_branches",
            "cli/test_chat_terminal",
            "deployment/test_grpc_nginx",
            "deployment/test_mcp_replicas",
            "integration/test_grpc",
            "tools/test_toolbox",
            "security/test_browser_writes",
            "security/test_persona_fuzz",
            "security/test_persona_input",
            "security/test_request_heads",
            "security/test_slow_clients",
            "security/test_task_visibility",
        )
    },
    # The conformance modules that share one hub per module (``module_hub``).
    **{
        f"conformance_{name}": (f"tests/conformance/test_{name}.py::",)
        for name in (
            "bad_requests",
            "card",
            "card_forms",
            "concurrency",
            "content_types",
            "errors",
            "lifecycle",
            "methods",
            "parts",
        )
    },
}
"""Group name → the node id prefixes of its tests."""

SPLIT: dict[str, tuple[str, ...]] = {"matrix": ("one-hub", "two-replicas")}
"""Groups parted by a word of their tests' ids: a test whose id has ``-word-`` is in the
group ``name_word`` (the matrix's cells by deployment: the two deployments start on two
workers at once, each once, rather than one after the other on one worker)."""

LONGEST = ("local_model", "matrix_two-replicas", "matrix_one-hub", "console")
"""The groups that take longest, longest first (README.md, "Where the suite's time goes"):
handed out before any other work."""

GROUP_SCOPE = "group:"
"""How a group's unit of work is named (:meth:`GroupScheduling._split_scope`)."""


def group_of(nodeid: str) -> str | None:
    """The group of the test ``nodeid``, or None (it runs wherever a worker is free)."""
    for name, prefixes in GROUPS.items():
        if nodeid.startswith(prefixes):
            parts = [word for word in SPLIT.get(name, ()) if f"-{word}-" in nodeid]
            return f"{name}_{parts[0]}" if parts else name
    return None


def handout_rank(scope: str, slow: tuple[str, ...]) -> int:
    """When the unit of work ``scope`` is handed out, lowest first: the groups of
    :data:`LONGEST` in their order, then the other groups, then the tests whose node ids
    start with one of ``slow`` (tests/conftest.py's ``SLOW``), then the rest."""
    if scope.startswith(GROUP_SCOPE):
        name = scope.removeprefix(GROUP_SCOPE)
        return LONGEST.index(name) if name in LONGEST else len(LONGEST)
    return len(LONGEST) + (1 if scope.startswith(slow) else 2)


class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """``--dist loadgroup`` with the groups of :data:`GROUPS`: a group is one unit of work,
    every other test a unit of its own; handed out in :func:`handout_rank`'s order (among
    equals, the largest first)."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        from tests.conftest import SLOW  # the controller has imported it already

        self._slow = SLOW
        self._ordered = False

    def _split_scope(self, nodeid: str) -> str:
        group = group_of(nodeid)
        return nodeid if group is None else f"{GROUP_SCOPE}{group}"

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:  # the first hand-out: the queue is whole (largest first)
            queue: OrderedDict[str, dict[str, bool]] = self.workqueue
            for scope in sorted(queue, key=lambda scope: handout_rank(scope, self._slow)):
                queue.move_to_end(scope)  # a stable sort: among equals, still largest first
            self._ordered = True
        super()._assign_work_unit(node)
