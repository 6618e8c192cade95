"""Each LLM backend's modules are imported only by a hub that builds it.

Run in a fresh interpreter: this test process has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Builds the hub as `serve` does (personas loaded, backend built; no request made) and
# prints which heavy packages it imported.
_SCRIPT = """
import json, sys
from persona_agent.api.app import create_app
from persona_agent.settings import Settings

settings = Settings(_env_file=None, **json.loads(sys.argv[1]))
create_app(settings)
print(json.dumps({name: name in sys.modules for name in ("aiohttp", "xllamacpp", "openai")}))
"""


def _imported(tmp_path: Path, **values: str) -> dict[str, bool]:
    values = {
        "personas_dir": str(REPO / "personas"),
        "data_dir": str(tmp_path / "data"),
        **values,
    }
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(values)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, bool] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize(
    ("backend", "values", "expected"),
    [
        (
            "local",
            {},
            {"aiohttp": False, "xllamacpp": False, "openai": False},
        ),
        (
            "openai",
            {"llm_base_url": "http://127.0.0.1:9/v1"},
            {"aiohttp": True, "xllamacpp": False, "openai": True},
        ),
    ],
)
def test_a_hub_imports_only_the_backend_it_uses(
    tmp_path: Path, backend: str, values: dict[str, str], expected: dict[str, bool]
) -> None:
    # The local model itself loads at start-up (lifespan), not when the app is built.
    assert _imported(tmp_path, **values) == expected, backend
