"""How llama.cpp's OpenMP threads wait, as the embedded server chooses it before it loads
(docs/local-model.md, "OpenMP's wait, on the server")."""

from __future__ import annotations

import pytest

from persona_agent.llm.local.server import choose_openmp_wait


def test_the_threads_get_the_short_spin_when_nobody_chose() -> None:
    environ: dict[str, str] = {"PATH": "/usr/bin"}
    choose_openmp_wait(environ)
    assert environ == {"PATH": "/usr/bin", "GOMP_SPINCOUNT": "10000"}


@pytest.mark.parametrize(
    "chosen",
    [{"OMP_WAIT_POLICY": "passive"}, {"OMP_WAIT_POLICY": "active"}, {"GOMP_SPINCOUNT": "300000"}],
)
def test_a_wait_the_user_chose_is_left_alone(chosen: dict[str, str]) -> None:
    environ = dict(chosen)
    choose_openmp_wait(environ)
    assert environ == chosen
