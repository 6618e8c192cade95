"""The order in which the parallel workers are handed the suite's work (tests/scheduling.py)."""

from __future__ import annotations

from tests.conftest import SLOW
from tests.scheduling import GROUP_SCOPE, GROUPS, LONGEST, SPLIT, group_of, handout_rank


def test_the_longest_groups_go_first_then_the_others_then_slow_tests_then_the_rest() -> None:
    scopes = [
        "tests/chat/test_engine.py::test_a_turn",
        "tests/integration/test_shutdown.py::test_a_running_task_finishes",
        f"{GROUP_SCOPE}conformance_errors",
        f"{GROUP_SCOPE}console",
        f"{GROUP_SCOPE}local_model",
        f"{GROUP_SCOPE}matrix_one-hub",
        f"{GROUP_SCOPE}matrix_two-replicas",
    ]
    ordered = sorted(scopes, key=lambda scope: handout_rank(scope, SLOW))
    assert ordered == [
        f"{GROUP_SCOPE}local_model",
        f"{GROUP_SCOPE}matrix_two-replicas",
        f"{GROUP_SCOPE}matrix_one-hub",
        f"{GROUP_SCOPE}console",
        f"{GROUP_SCOPE}conformance_errors",
        "tests/integration/test_shutdown.py::test_a_running_task_finishes",
        "tests/chat/test_engine.py::test_a_turn",
    ]


def test_the_matrix_is_two_groups_one_a_deployment() -> None:
    cell = "tests/deployment/test_matrix.py::test_matrix_a2a_sdk[grpc-1.0-{}-panel-list]"
    assert group_of(cell.format("one-hub")) == "matrix_one-hub"
    assert group_of(cell.format("two-replicas")) == "matrix_two-replicas"
    assert group_of("tests/deployment/test_matrix.py::test_matrix_table_is_whole") == "matrix"
    assert group_of("tests/chat/test_engine.py::test_a_turn") is None


def test_every_longest_group_is_a_group() -> None:
    split = {f"{name}_{word}" for name, words in SPLIT.items() for word in words}
    assert set(LONGEST) <= set(GROUPS) | split
