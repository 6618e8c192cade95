"""Which tests pytest-xdist runs together on one worker: groups named by node id prefix.

``uv run pytest`` runs on parallel workers (``-n 3 --dist loadgroup``, pyproject.toml).
Each test goes to whichever worker is free, except the tests of a group, which one worker
runs one after the other: :data:`GROUPS`. pytest-xdist's own groups (the ``xdist_group``
mark) no longer take effect on pytest 9.2 (pytest-dev/pytest-xdist#1386), so
tests/conftest.py makes the scheduler here instead, which reads the groups from node ids.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

__all__ = ["GROUPS", "GroupScheduling", "group_of"]

GROUPS: dict[str, tuple[str, ...]] = {
    # One model in memory, no two generations fighting for the cores (tests/conftest.py
    # checks that every ``local_model`` test is in this group).
    "local_model": (
        "tests/integration/test_local_model.py::",
        "tests/llm/test_local_backend.py::",
        "tests/llm/test_local_prefixes.py::",
        "tests/llm/test_local_turns.py::",
        "tests/integration/test_local_warmup.py::",
        "tests/cli/test_cli.py::test_serve_with_no_configuration_answers_with_the_local_model",
        "tests/console/test_demo_label.py::",  # before "console": its own Chromium
    ),
    # One Chromium for the browser tests (a session fixture).
    "console": ("tests/console/",),
    # One replica set for both tests (a module fixture: three processes, nginx, a database).
    "replicas_nginx": ("tests/deployment/test_nginx_replicas.py::",),
    # The deployment matrix: its two deployments (three hub processes, nginx, two
    # databases) start once, on the worker that runs every cell.
    "matrix": ("tests/deployment/test_matrix.py::",),
    # Modules whose tests share a module fixture that starts a process (a hub, an MCP
    # server): on one worker it starts once, not once on each worker that runs one of them
    # (each ``persona-agent serve`` costs a second or two of CPU to start).
    **{
        path: (f"tests/{path}.py::",)
        for path in (
            "cli/test_chat",
            "deployment/test_grpc_nginx",
            "deployment/test_mcp_replicas",
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


def group_of(nodeid: str) -> str | None:
    """The group of the test ``nodeid``, or None (it runs wherever a worker is free)."""
    for name, prefixes in GROUPS.items():
        if nodeid.startswith(prefixes):
            return name
    return None


class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """``--dist loadgroup`` with the groups of :data:`GROUPS`: a group is one unit of work
    (the largest are handed out first), every other test a unit of its own."""

    def _split_scope(self, nodeid: str) -> str:
        group = group_of(nodeid)
        return nodeid if group is None else f"group:{group}"
