"""ForkedMap: a map shared with a forked helper gives what a plain map gives, whatever the
helper does. Each scenario runs in a fresh interpreter: a helper is forked only from a
process with one thread, which the test process need not be."""

from __future__ import annotations

import textwrap
import threading
from typing import Any

import pytest

from persona_agent.personas.forks import ForkedMap
from tests.personas import run_python

PRELUDE = """\
import json, os, sys
from persona_agent.personas.forks import ForkedMap

PARENT = os.getpid()
started_r, started_w = os.pipe()
FORKS = []
os.register_at_fork(before=lambda: FORKS.append(1))

def wait_for_helper():
    # The helper announces its first item: the test then knows it took part.
    import select
    ready, _, _ = select.select([started_r], [], [], 30)
    assert ready, "the helper never started"

def square(n):
    if os.getpid() != PARENT:
        os.write(started_w, b"x")
    return n * n
"""


def run(code: str) -> dict[str, Any]:
    """Run ``code`` after PRELUDE in a fresh interpreter; the JSON it printed last."""
    return run_python("-c", PRELUDE + textwrap.dedent(code))


def test_the_helper_shares_the_work_and_the_results_come_in_order() -> None:
    out = run("""
        work = ForkedMap(square, range(5000), min_items=1)
        wait_for_helper()
        results = work.results()
        print(json.dumps({
            "ok": results == [n * n for n in range(5000)],
            "helped": work.helped,
            "forks": len(FORKS),
        }))
    """)
    assert out["ok"]
    assert out["forks"] == 1
    assert out["helped"] > 0


def test_a_helper_that_dies_costs_time_not_results() -> None:
    """The helper is killed at its first item: the chunk it took, and all others, are
    done by the parent."""
    out = run("""
        def die_in_helper(n):
            if os.getpid() != PARENT:
                os._exit(3)
            return -n
        work = ForkedMap(die_in_helper, range(3000), min_items=1)
        results = work.results()
        print(json.dumps({"ok": results == [-n for n in range(3000)], "helped": work.helped}))
    """)
    assert out == {"ok": True, "helped": 0}


def test_an_exception_comes_out_of_results_as_without_a_helper() -> None:
    """Whichever process meets the bad item, the caller gets the function's exception."""
    out = run("""
        def fails_at_2500(n):
            square(n)
            if n == 2500:
                raise ValueError(f"bad item {n}")
            return n
        work = ForkedMap(fails_at_2500, range(3000), min_items=1)
        wait_for_helper()
        try:
            work.results()
        except ValueError as error:
            print(json.dumps({"error": str(error)}))
    """)
    assert out == {"error": "bad item 2500"}


def test_no_helper_below_min_items_or_beside_another_thread() -> None:
    out = run("""
        import threading
        few = ForkedMap(square, range(10), min_items=11)
        few_results = few.results()
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait)
        thread.start()
        beside = ForkedMap(square, range(5000), min_items=1)
        beside_results = beside.results()
        stop.set()
        thread.join()
        print(json.dumps({
            "few": few_results == [n * n for n in range(10)],
            "beside": beside_results == [n * n for n in range(5000)],
            "forks": len(FORKS),
        }))
    """)
    assert out == {"few": True, "beside": True, "forks": 0}


def test_in_this_process_with_a_thread_running_nothing_is_forked() -> None:
    """The guard seen from the test process itself: with a thread running, the map runs
    here, all of it."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        work = ForkedMap(str, list(range(1000)), min_items=1)
        assert work.results() == [str(n) for n in range(1000)]
        assert work.helped == 0
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 17])
def test_every_length_maps_whole(count: int) -> None:
    assert ForkedMap(lambda n: n + 1, list(range(count))).results() == list(range(1, count + 1))


def test_a_fork_that_fails_leaves_the_work_to_this_process() -> None:
    """No process to be had (EAGAIN): the map and the call run here, and nothing leaks."""
    out = run("""
        import errno
        from persona_agent.personas.forks import call_in_child
        def no_fork():
            FORKS.append(1)
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        os.fork = no_fork
        before = sorted(os.listdir("/proc/self/fd"))
        work = ForkedMap(square, range(3000), min_items=1)
        results = work.results()
        called = []
        left = call_in_child(lambda: called.append(1))
        print(json.dumps({
            "ok": results == [n * n for n in range(3000)],
            "helped": work.helped,
            "forks tried": len(FORKS),
            "left to a child": left,
            "called": called,
            "fds": sorted(os.listdir("/proc/self/fd")) == before,
        }))
    """)
    assert out == {
        "ok": True,
        "helped": 0,
        "forks tried": 2,
        "left to a child": False,
        "called": [],
        "fds": True,
    }


def test_a_call_left_to_a_child_runs_there_and_the_child_is_reaped() -> None:
    out = run("""
        import select, time
        from persona_agent.personas.forks import call_in_child
        r, w = os.pipe()
        left = call_in_child(lambda: os.write(w, str(os.getpid()).encode()))
        ready, _, _ = select.select([r], [], [], 30)
        child = int(os.read(r, 32))
        deadline = time.monotonic() + 30
        # A child that has exited stays in /proc (a zombie) until its parent reaps it:
        # here, the thread call_in_child started.
        while os.path.exists(f"/proc/{child}"):
            assert time.monotonic() < deadline, "the child was never reaped"
            time.sleep(0.01)
        print(json.dumps({"left": left, "ran elsewhere": child != PARENT, "forks": len(FORKS)}))
    """)
    assert out == {"left": True, "ran elsewhere": True, "forks": 1}
