"""The replica figures of the benchmark (issue 22): PostgreSQL against SQLite, events and
persona changes from one replica to another, and two replicas behind nginx against one.

Run by ``bench/run.py`` (part ``replicas``; ``--part replicas`` runs it alone). Needs the
machine's PostgreSQL (``PERSONA_AGENT_TEST_POSTGRES_URL``, default the local ``test``
database): each figure runs on an empty database of its own (tests/servers/empty_databases.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.servers, persona_agent

from run import Row, fake_llm, hub, hub_home, load, median_ratio

from tests.servers.replicas import fresh_database as database
from tests.servers.replicas import nginx


def vacuum(url: str) -> None:
    """``VACUUM ANALYZE`` the database, as PostgreSQL's autovacuum does on its own when on
    (its default; this machine's server runs with it off). Every task is written several
    times: without vacuuming, dead rows pile up and every write gets slower (here, a fifth
    of the throughput after 24,000 tasks; docs/deployment.md)."""

    async def run() -> None:
        import asyncpg
        from sqlalchemy.engine import make_url

        from persona_agent.cluster.notify import asyncpg_dsn

        connection = await asyncpg.connect(asyncpg_dsn(make_url(url)))
        try:
            await connection.execute("VACUUM ANALYZE")
        finally:
            await connection.close()

    asyncio.run(run())


def pg_vs_sqlite(rounds: int, window: str, root: Path) -> list[Row]:
    """Send c=16 to one replica on PostgreSQL and to the same hub on SQLite, interleaved."""
    pairs: list[tuple[float, float]] = []
    with (
        database() as url,
        fake_llm() as llm,
        hub(llm, hub_home(root, "hub-sqlite")) as (sqlite_url, _),
        hub(llm, hub_home(root, "hub-pg"), settings={"PERSONA_AGENT_DATABASE_URL": url}) as (
            pg_url,
            _,
        ),
    ):
        for _ in range(rounds):
            vacuum(url)
            on_sqlite = load(
                f"{sqlite_url}/a2a/socrates/", "--mode", "send", "-c", "16", "-d", window
            )
            on_pg = load(f"{pg_url}/a2a/socrates/", "--mode", "send", "-c", "16", "-d", window)
            pairs.append((on_pg["rps"], on_sqlite["rps"]))
            print(
                f"    round: SQLite {on_sqlite['rps']} req/s, PostgreSQL {on_pg['rps']} req/s",
                file=sys.stderr,
                flush=True,
            )
    ratio = median_ratio(pairs)
    return [
        Row(
            "send c=16, PostgreSQL req/s (median)", statistics.median(p for p, _ in pairs), "req/s"
        ),
        Row("send c=16, PostgreSQL / SQLite", ratio, "x", ">= 0.7", ratio >= 0.7),
    ]


async def _event_lags(url: str, count: int) -> list[float]:
    """Milliseconds from the commit of an event on replica A to its arrival at a
    subscriber on replica B (the hub's own store and stream, two engines and listeners)."""
    from a2a.server.cluster import TaskVersion
    from a2a.server.context import ServerCallContext
    from a2a.types.a2a_pb2 import Artifact, Part, Task, TaskArtifactUpdateEvent, TaskStatus

    from persona_agent.a2a.context_keys import PERSONA_STATE_KEY
    from persona_agent.cluster.notify import Listener
    from persona_agent.cluster.task_events import PgTaskEventStream
    from persona_agent.cluster.tasks import ClusterTaskStore
    from persona_agent.db import GroupCommitWriter, create_engine
    from persona_agent.migrations import prepare_db

    context = ServerCallContext(state={PERSONA_STATE_KEY: "bench"})
    engines = [create_engine(url), create_engine(url)]
    await prepare_db(engines[0], auto_upgrade=True)
    writer = GroupCommitWriter(engines[0])
    store = ClusterTaskStore(writer, "a")
    await store.start()
    listener = Listener(engines[1].url)
    stream = PgTaskEventStream(engines[1], listener)
    await stream.start()
    await listener.start()
    task = Task(id="bench-task", context_id="ctx", status=TaskStatus(state=3))
    version = await store.save(
        task, event=task, prev=None, prev_version=TaskVersion.MISSING, context=context
    )
    lags: list[float] = []
    subscription = stream.subscribe("bench-task", after=version)
    try:
        for n in range(count):
            chunk = TaskArtifactUpdateEvent(
                task_id=task.id,
                context_id="ctx",
                artifact=Artifact(artifact_id="a", parts=[Part(text=f"w{n} ")]),
                append=True,
            )
            arrival = asyncio.ensure_future(anext(subscription))
            await asyncio.sleep(0.005)  # the subscriber waits, as a live one does
            version = await store.save(
                task, event=chunk, prev=None, prev_version=version, context=context
            )
            written = time.perf_counter()
            await arrival
            lags.append((time.perf_counter() - written) * 1000)
    finally:
        await subscription.aclose()
        await listener.aclose()
        await store.aclose()
        await writer.aclose()
        for engine in engines:
            await engine.dispose()
    return lags


def event_latency(count: int) -> list[Row]:
    with database() as url:
        lags = sorted(asyncio.run(_event_lags(url, count)))
    p50 = statistics.median(lags)
    p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
    return [
        Row("cross-replica event, commit to subscriber p50", p50, "ms", "<= 20", p50 <= 20),
        Row("cross-replica event, commit to subscriber p99", p99, "ms"),
    ]


def persona_latency(root: Path, count: int) -> list[Row]:
    """A persona written through replica A's REST API, until replica B's card shows it."""
    lags: list[float] = []
    with database() as url, fake_llm() as llm, ExitStack() as stack:
        settings = {"PERSONA_AGENT_DATABASE_URL": url}
        home = hub_home(root, "replica-a")
        a_url, _ = stack.enter_context(hub(llm, home, settings=settings))
        other = hub_home(root, "replica-b")
        shutil.rmtree(other / "personas")
        shutil.copytree(home / "personas", other / "personas")
        b_url, _ = stack.enter_context(hub(llm, other, settings=settings))
        persona = {"id": "bench-writer", "name": "Bench Writer", "description": "v0"}
        with httpx.Client(timeout=10) as http:
            http.post(f"{a_url}/api/v1/personas", json=persona).raise_for_status()
            card = f"{b_url}/a2a/bench-writer/.well-known/agent-card.json"
            for n in range(1, count + 1):
                description = f"version {n}"
                http.put(
                    f"{a_url}/api/v1/personas/bench-writer",
                    json={**persona, "description": description},
                ).raise_for_status()
                written = time.perf_counter()
                while True:
                    answer = http.get(card)
                    if answer.status_code == 200 and answer.json()["description"] == description:
                        break
                    if time.perf_counter() - written > 10:
                        raise RuntimeError("replica B never saw the persona change")
                    time.sleep(0.002)
                lags.append((time.perf_counter() - written) * 1000)
    p50 = statistics.median(lags)
    return [Row("persona write on A seen on B, p50", p50, "ms", "<= 200", p50 <= 200)]


def nginx_scaling(rounds: int, window: str, root: Path) -> list[Row]:
    """Send c=16 through nginx to two replicas, against nginx to one; the load generator
    on a core of its own where ``taskset`` and more than one core allow."""
    cores = os.cpu_count() or 1
    pin = ("taskset", "-c", str(cores - 1)) if shutil.which("taskset") and cores > 1 else ()
    pairs: list[tuple[float, float]] = []
    with database() as url, fake_llm() as llm, ExitStack() as stack:
        settings = {"PERSONA_AGENT_DATABASE_URL": url}
        urls = [
            stack.enter_context(hub(llm, hub_home(root, f"replica-{n}"), settings=settings))[0]
            for n in range(2)
        ]
        ports = [int(u.rsplit(":", 1)[1]) for u in urls]
        one = stack.enter_context(nginx(ports[:1]))
        two = stack.enter_context(nginx(ports))
        for _ in range(rounds):
            vacuum(url)
            single = load(
                f"{one}/a2a/socrates/", "--mode", "send", "-c", "16", "-d", window, pin=pin
            )
            double = load(
                f"{two}/a2a/socrates/", "--mode", "send", "-c", "16", "-d", window, pin=pin
            )
            pairs.append((double["rps"], single["rps"]))
            print(
                f"    round: nginx + 1 replica {single['rps']} req/s, + 2 {double['rps']} req/s",
                file=sys.stderr,
                flush=True,
            )
    ratio = median_ratio(pairs)
    where = "load generator pinned" if pin else "load generator not pinned"
    return [
        Row(
            "send c=16 through nginx, 2 replicas / 1",
            ratio,
            f"x ({cores} cores, {where})",
        )
    ]


async def _notifications(url: str, count: int) -> float:
    """Notifications a second: four connections notifying (each its own transaction, as
    the hub's task writes), two listening connections receiving every one."""
    import asyncpg
    from sqlalchemy.engine import make_url

    from persona_agent.cluster.notify import asyncpg_dsn

    dsn = asyncpg_dsn(make_url(url))
    received = [0, 0]
    all_in = asyncio.Event()
    listeners = [await asyncpg.connect(dsn) for _ in received]
    for index, listener in enumerate(listeners):

        def heard(*_: object, index: int = index) -> None:
            received[index] += 1
            if min(received) >= count:
                all_in.set()

        await listener.add_listener("bench", heard)
    writers = [await asyncpg.connect(dsn) for _ in range(4)]

    async def notify(writer: asyncpg.Connection) -> None:
        for n in range(count // len(writers)):
            await writer.execute("SELECT pg_notify('bench', $1)", f"task-{n}")

    started = time.perf_counter()
    await asyncio.gather(*(notify(writer) for writer in writers))
    await asyncio.wait_for(all_in.wait(), 120)
    rate = count / (time.perf_counter() - started)
    for connection in [*listeners, *writers]:
        await connection.close()
    return rate


def notify_throughput(count: int) -> list[Row]:
    with database() as url:
        rate = asyncio.run(_notifications(url, count))
    return [Row("LISTEN/NOTIFY: notifications a second (4 writers, 2 listeners)", rate, "/s")]


def replicas(rounds: int, window: str, root: Path, quick: bool) -> list[Row]:
    return [
        *notify_throughput(4_000 if quick else 20_000),
        *pg_vs_sqlite(rounds, window, root),
        *event_latency(100 if quick else 500),
        *persona_latency(root, 10 if quick else 30),
        *nginx_scaling(rounds, window, root),
    ]
