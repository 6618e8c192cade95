"""Fixtures of the deployment tests: real ``persona-agent serve`` processes behind a real
nginx running ``deploy/nginx.conf``, on PostgreSQL. The scripted model and a persona
folder come from the integration tests' fixtures."""

from __future__ import annotations

from tests.integration.conftest import fake_llm_server, llm, personas_dir  # noqa: F401
