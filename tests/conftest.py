from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from hypothesis import core as hypothesis_core
from hypothesis.vendor import pretty
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from persona_agent.db import GroupCommitWriter, create_engine
from persona_agent.migrations.tables import metadata
from tests.fuzz.budget import DEADLINE, EXAMPLES, EXAMPLES_VARIABLE, SEED, SEED_VARIABLE
from tests.fuzz.tally import TALLY
from tests.migrated import WORKER_SQLITE, PostgresTemplate, SqliteTemplate
from tests.servers.replicas import fresh_database, migrated_database

# grpcio installs fork handlers (its fork support is on by default): a worker that has run a
# test's gRPC client or server and then forks a pty child for the terminal chat (pexpect)
# gets gRPC's poller restarted in that child, which closes every descriptor before it execs;
# the poller then fails on its closed epoll descriptor and the child dies before the chat
# starts (an EOF; seen once in a whole run). No test uses gRPC in a forked child: the
# children exec at once. Read when grpc is first imported, after this file's imports.
assert "grpc" not in sys.modules, "set GRPC_ENABLE_FORK_SUPPORT before grpc is imported"
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

# The suite runs three workers, the hubs and model servers they start, a browser and nginx
# on two cores: the machine docs/local-model.md ("OpenMP's wait") tells to set
# OMP_WAIT_POLICY=passive, where the embedded model's default short spin falls behind. Set
# as such a user sets it, in the environment the workers' hubs and processes inherit.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

# Schemathesis's pytest plugin (loaded with pytest) swaps Hypothesis's printer for one that
# prints nothing, for its own speed: every failing example of every Hypothesis test would be
# shown with blank values ("a=,"). Hypothesis's own printer goes back.
hypothesis_core.RepresentationPrinter = pretty.RepresentationPrinter  # type: ignore[attr-defined]

POSTGRES_URL_VARIABLE = "PERSONA_AGENT_TEST_POSTGRES_URL"
POSTGRES_URL = os.environ.get(POSTGRES_URL_VARIABLE, "")
"""A PostgreSQL database the tests may empty (``.ci/run`` sets it), read before the
environment is cleaned for each test."""
LOCAL_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
"""Tried when no URL is set: the database a developer's machine runs for the tests."""
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
"""The pytest-xdist worker this process is (``gw0``, ``gw1`` ...), or "" when not one."""


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see none of the developer's or CI's LLM or telemetry settings, nor the SDK
    tracing switch that an in-process ``serve`` (a CLI test) leaves in ``os.environ``."""
    for name in list(os.environ):
        if name.startswith(("PERSONA_AGENT_", "OPENAI_", "AZURE_OPENAI_", "OTEL_")):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """The root logger's handlers and level as they were before the test: a test that
    runs ``serve`` in-process (under click's runner, whose stderr is closed once it
    returns) sets up logging to that stream, and a later test's logging would fail on it
    ("--- Logging error ---" in whatever that test reads from stderr)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


MODEL_THREADS = 1
"""llama.cpp threads for the embedded model in the tests: the suite's other workers keep
the other core busy, and two threads that wait on each other there burn CPU for nothing
(docs/local-model.md: one thread on a shared machine). The no-configuration ``serve``
test (tests/cli) keeps the default, as a new user would."""


@pytest.fixture(scope="session")
def local_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for the whole run: the embedded model's file is assembled into it once
    (under pytest-xdist, beside the workers' own directories: every worker shares it;
    ``ensure_model_file`` is safe for several processes at once)."""
    if WORKER:
        return tmp_path_factory.getbasetemp().parent / "models"
    return tmp_path_factory.mktemp("models")


POSTGRES_REQUIRED = os.environ.get("PERSONA_AGENT_TEST_POSTGRES_REQUIRED", "") == "1"
"""Set by ``.ci/run``: a PostgreSQL variant that cannot run fails instead of skipping."""


async def empty_postgres() -> str:
    """The URL of the test PostgreSQL database, the hub's tables dropped.

    Without a URL set, the machine's own PostgreSQL (:data:`LOCAL_POSTGRES_URL`) is
    tried; when it does not answer the variant is skipped, or fails under
    ``PERSONA_AGENT_TEST_POSTGRES_REQUIRED=1`` (as in CI) or with a URL set.
    """
    url = await worker_postgres()
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(metadata.drop_all)
            await conn.exec_driver_sql("DROP TABLE IF EXISTS alembic_version")
    except (OSError, SQLAlchemyError) as error:
        _unanswered(url, error)
    finally:
        await engine.dispose()
    return url


async def migrated_postgres() -> str:
    """The URL of the test PostgreSQL database as a fresh migration leaves it (a hub started
    on it finds it at the newest revision and does not migrate it again): skipped or failed
    as :func:`empty_postgres` says when it does not answer."""
    engine = await _migrated_postgres_engine()
    await engine.dispose()
    return str(engine.url.render_as_string(hide_password=False))


async def _migrated_postgres_engine() -> AsyncEngine:
    url = await worker_postgres()
    try:
        return await _POSTGRES_TEMPLATE.reset(url)
    except (OSError, SQLAlchemyError) as error:
        _unanswered(url, error)


async def worker_postgres() -> str:
    """The URL of the test PostgreSQL database (this worker's own), as it is; skipped or
    failed as :func:`empty_postgres` says when it does not answer."""
    url = POSTGRES_URL or LOCAL_POSTGRES_URL
    try:
        return await _worker_database(url)
    except (OSError, SQLAlchemyError) as error:
        _unanswered(url, error)


def _unanswered(url: str, error: Exception) -> NoReturn:
    if POSTGRES_REQUIRED or POSTGRES_URL:
        pytest.fail(f"PostgreSQL at {url} is required and did not answer: {error}")
    pytest.skip(
        f"no PostgreSQL at {url} ({type(error).__name__}): set {POSTGRES_URL_VARIABLE} "
        "to a database the tests may empty (.ci/run starts one)"
    )


_worker_databases: dict[str, str] = {}


async def _worker_database(url: str) -> str:
    """``url`` itself, or under pytest-xdist the URL of a database of this worker's own
    beside it (``test_gw0`` for ``test``), created on first use and kept for later runs:
    workers never empty each other's tables."""
    if not WORKER:
        return url
    if url not in _worker_databases:
        base = make_url(url)
        name = f"{base.database}_{WORKER}"
        admin = create_async_engine(base, isolation_level="AUTOCOMMIT")
        try:
            async with admin.connect() as conn:
                exists = await conn.scalar(
                    text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
                )
                if not exists:
                    await conn.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            await admin.dispose()
        _worker_databases[url] = base.set(database=name).render_as_string(hide_password=False)
    return _worker_databases[url]


@pytest.fixture(scope="session")
def migrated_sqlite() -> SqliteTemplate:
    """The worker's migrated SQLite file (tests/migrated.py), made at its first use: the
    ``engine`` fixture's databases, the in-process hubs' (``hub_factory``) and the hub
    processes' (tests/servers/hub_process.py)."""
    return WORKER_SQLITE


_POSTGRES_TEMPLATE = PostgresTemplate()
"""The worker's PostgreSQL database, migrated once and emptied for each test."""


@pytest.fixture(params=["sqlite", "postgresql"])
async def engine(
    request: pytest.FixtureRequest, tmp_path: Path, migrated_sqlite: SqliteTemplate
) -> AsyncIterator[AsyncEngine]:
    """A new hub database, exactly as a fresh migration leaves it: a SQLite file, and
    PostgreSQL (see POSTGRES_URL_VARIABLE). Each worker migrates once and hands out that
    migration again (tests/migrated.py)."""
    if request.param == "sqlite":
        db = await migrated_sqlite.copy(tmp_path)
    else:
        db = await _migrated_postgres_engine()
    yield db
    await db.dispose()


@pytest.fixture
async def writer(engine: AsyncEngine) -> AsyncIterator[GroupCommitWriter]:
    """The group-commit writer of ``engine``, shared as ``create_app`` shares it."""
    group = GroupCommitWriter(engine)
    yield group
    await group.aclose()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of an empty database on the test PostgreSQL, the test's alone (LISTEN/NOTIFY
    channels and advisory locks are per database: tests never hear each other). It is one
    of the worker's few, emptied for each test (tests/servers/empty_databases.py): no
    session, lock, listener, table or sequence of an earlier test is left."""
    with fresh_database() as url:
        yield url


@pytest.fixture
def pg_migrated_url() -> Iterator[str]:
    """:func:`pg_url`'s database as a fresh migration leaves it (its rows deleted for each
    test, tests/migrated.py): for replicas whose own migration is not what the test is
    about; they find it at the newest revision and start without migrating."""
    with migrated_database(_POSTGRES_TEMPLATE) as url:
        yield url


@pytest.fixture
async def pg_engine(pg_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on :func:`pg_url`'s database, the hub's tables created."""
    engine = create_engine(pg_url)
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    yield engine
    await engine.dispose()


SLOW = (
    "tests/console/",  # a real browser
    "tests/fuzz/",  # the fuzzers
    "tests/conformance/test_soak.py",
    "tests/deployment/",  # processes, PostgreSQL, nginx
    "tests/integration/test_replicas.py",
    "tests/integration/test_durability.py",
    "tests/integration/test_shutdown.py",
    "tests/integration/test_tracing.py",
    "tests/integration/test_tracing_off.py",
    "tests/integration/test_readme.py",
    "tests/cli/test_chat.py",
    "tests/cli/test_chat_media.py",  # terminal chats in a pty, real speech
    "tests/integration/test_voice.py",  # real speech, heard by a recognizer
    "tests/cli/test_first_run.py",
    "tests/docs/test_client_snippets.py",
    "tests/docs/test_hub_snippets.py",
    "tests/docs/test_serve_snippets.py",
    "tests/tools/test_toolbox.py",
    "tests/security/test_browser_writes.py",
    "tests/security/test_crash_safety.py",
    "tests/security/test_persona_fuzz.py",
    "tests/security/test_slow_clients.py",
)
"""Node id prefixes of the tests marked ``slow`` (with every ``local_model`` test): real
processes, browsers, fuzzers and soaks. ``uv run pytest -m "not slow"`` leaves them out
(README.md, Development)."""


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark the slow tests (:data:`SLOW`), before ``-m`` selects."""
    if item.nodeid.startswith(SLOW) or item.get_closest_marker("local_model") is not None:
        item.add_marker(pytest.mark.slow)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` (the default, pyproject.toml) with the groups of
    tests/scheduling.py: the real model's tests on one worker, the browser's on one ..."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.scheduling import GroupScheduling

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of the real model is in tests/scheduling.py's group ``local_model``."""
    from tests.scheduling import group_of

    stray = [
        item.nodeid
        for item in items
        if item.get_closest_marker("local_model") is not None
        and group_of(item.nodeid) != "local_model"
    ]
    if stray:
        raise pytest.UsageError(
            f"local_model tests outside tests/scheduling.py's group local_model: {stray}"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A test's captured output as text pytest-xdist can send to its controller (UTF-8):
    a lone surrogate a test sends on purpose, logged by the hub, is shown escaped."""
    report = yield
    report.sections = [
        (title, text.encode("utf-8", "backslashreplace").decode("utf-8"))
        for title, text in report.sections
    ]
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker hands its fuzz counts to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["fuzz_tally"] = TALLY.dump()


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's
def pytest_testnodedown(node: Any, error: object) -> None:
    """The controller adds up the fuzz counts of each worker that finished."""
    TALLY.merge(getattr(node, "workeroutput", {}).get("fuzz_tally", []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The fuzz suite's counts (tests/fuzz), when it ran."""
    lines = TALLY.lines()
    if not lines:
        return
    terminalreporter.section("fuzzing")
    terminalreporter.write_line(
        f"seed {SEED} ({SEED_VARIABLE}), {EXAMPLES} examples a test ({EXAMPLES_VARIABLE}), "
        f"deadline {DEADLINE:g} s a request"
    )
    for line in lines:
        terminalreporter.write_line(line)
