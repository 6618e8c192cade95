"""The doc snippets no doc test runs, each with why. Keep this short: a snippet that can
run in a test should run in one (test_coverage.py fails for a block that is neither
claimed by a test nor listed here, and for an entry that names no block)."""

from __future__ import annotations

__all__ = ["NOT_RUN", "NOT_RUN_COMMANDS", "RUN_ELSEWHERE"]

_NGINX = (
    "nginx in front of the replicas: not installed here; "
    "tests/deployment/test_nginx_replicas.py runs deploy/nginx.conf (PostgreSQL)"
)

NOT_RUN: dict[tuple[str, str], str] = {
    ("README.md", "uv run ruff check && uv run ruff format --check"): (
        "the project's own test suite, lint and type check (.ci/run runs them): this test "
        "is part of the suite"
    ),
    ("README.md", "PERSONA_AGENT_TEST_POSTGRES_URL=postgresql"): (
        "the test suite on PostgreSQL: the doc tests run no PostgreSQL"
    ),
    ("docs/console.md", "CONSOLE_SCREENSHOTS_DIR=docs/images"): (
        "the console's browser tests (tests/console: Chromium), writing docs/images"
    ),
    ("docs/deployment.md", "uv sync --extra postgres"): "installs packages",
    ("docs/deployment.md", "sudo -u postgres psql"): "administers a PostgreSQL server, as root",
    ("docs/deployment.md", "for port in 8001 8002 8003"): (
        "replicas on PostgreSQL: tests/integration/test_replicas.py and tests/deployment/ run them"
    ),
    ("docs/deployment.md", "cp deploy/nginx.conf /srv/persona-agent/nginx/nginx.conf"): _NGINX,
    ("docs/deployment.md", "for i in 1 2 3; do curl -s http://127.0.0.1:8080/readyz"): _NGINX,
    ("docs/deployment.md", "curl -s http://127.0.0.1:8080/a2a/socrates/"): _NGINX,
    ("docs/local-model.md", "uv run python bench/local_model.py"): (
        "benchmarks of the real model (speed, and the evaluation set): minutes"
    ),
    ("docs/performance.md", "uv run python bench/run.py"): "the benchmarks: 10 to 30 minutes",
    ("docs/performance.md", "uv run python bench/llm_stream.py"): (
        "a benchmark: a minute of streams, figures that only a quiet machine makes meaningful"
    ),
}
"""Blocks no doc test runs: (file, text only that block holds) → why."""

NOT_RUN_COMMANDS: dict[str, str] = {
    "uv run pytest": "the test suite, this test among them (README.md's quick start)",
}
"""Commands left out of a block the doc tests otherwise run: how it begins → why."""

RUN_ELSEWHERE: dict[tuple[str, str], str] = {
    ("docs/memory.md", "Remembered from earlier with this user"): (
        "tests/memory/test_remembered_section.py"
    ),
    ("docs/memory.md", '"kind": "memory-v1"'): "tests/integration/test_memory_tools.py",
    ("docs/memory.md", "Summary of the earlier conversation"): "tests/memory/test_summary.py",
    ("README.md", "from a2a.client import ClientConfig, ClientFactory"): (
        "tests/integration/test_readme.py"
    ),
    ("docs/chat.md", "you> /retry"): "tests/cli/test_chat_branches.py",
    ("docs/prompt.md", "you> /prompt"): "tests/cli/test_chat_prompt.py",
    ("docs/discovery.md", "chat --agent"): "tests/cli/test_chat.py",
    ("docs/chat.md", "you> /attach notes.md"): "tests/cli/test_chat_media.py",
    ("docs/media.md", '"filename": "chart.png"'): "tests/console/test_attachments.py",
    ("docs/chat.md", "you> /voice voice"): "tests/cli/test_chat_media.py",
}
"""Blocks another test runs: (file, text only that block holds) → that test's file."""
