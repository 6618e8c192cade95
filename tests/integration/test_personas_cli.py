"""``persona-agent personas ...`` against a real ``serve`` process reached at another address
than the one its clients use (a replica behind a proxy)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from persona_agent.cli.commands import app
from tests.fakes.fake_llm import FakeLLM
from tests.servers.hub_process import hub_process

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grace-hopper.yaml"
PUBLIC = "https://personas.example.org"


def test_create_names_the_public_address_not_the_replica_it_was_sent_to(
    tmp_path: Path, personas_dir: Path, llm: FakeLLM
) -> None:
    with hub_process(
        personas_dir,
        tmp_path / "data",
        LLM_BASE_URL=llm.base_url,
        LLM_API_KEY="test-key",
        PUBLIC_BASE_URL=PUBLIC,
    ) as (url, _):
        ran = CliRunner().invoke(app, ["personas", "create", str(EXAMPLE), "--url", url])
    assert ran.exit_code == 0, ran.output
    assert ran.output.strip().endswith(f"; it answers at {PUBLIC}/a2a/grace-hopper/"), ran.output
    assert url not in ran.output
