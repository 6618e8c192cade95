"""The README's examples, run as a reader pastes them, against ``persona-agent serve``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.fakes.fake_llm import FakeLLM, Reply
from tests.servers.hub_process import hub_process

README = Path(__file__).resolve().parents[2] / "README.md"
README_URL = "http://127.0.0.1:8000"


def python_example(after: str) -> str:
    """The first Python block of the README after the line holding ``after``."""
    text = README.read_text(encoding="utf-8")
    start = text.index(after)
    block = re.search(r"```python\n(.*?)```", text[start:], re.DOTALL)
    assert block is not None, f"no Python example after {after!r}"
    return block.group(1)


def test_the_sdk_client_example_prints_the_answer(
    tmp_path: Path, personas_dir: Path, llm: FakeLLM
) -> None:
    example = python_example("or with the official SDK client")
    assert README_URL in example
    words = ["Engines ", "compute ", "whatever ", "can be ", "expressed ", "in symbols."]
    llm.script(Reply("".join(words), chunks=words))
    with hub_process(
        personas_dir, tmp_path / "data", LLM_BASE_URL=llm.base_url, LLM_API_KEY="test-key"
    ) as (url, _):
        # The hub listens on a free port, not the README's 8000: the one change.
        run = subprocess.run(
            [sys.executable, "-c", example.replace(README_URL, url)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "".join(words) + "\n"
    assert llm.requests[-1]["messages"][-1] == {
        "role": "user",
        "content": "What can engines compute?",
    }
