"""docs/architecture.md's settings walk, run as written: the command prints the figures the
section's table gives (files entered, climbs back up) for this tree."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

from tests.docs.snippets import REPO, claim, commands

WALK = claim("docs/architecture.md", "uv run python -m tests.architecture_walk")


def test_the_walk_command_prints_the_files_entered_and_the_climbs() -> None:
    (command,) = commands(WALK)
    words = shlex.split(command)
    assert words[:3] == ["uv", "run", "python"]
    done = subprocess.run(  # the project's interpreter: the test already runs in `uv run`
        [sys.executable, *words[3:]],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
    )
    files = re.search(r"^files entered: (\d+)$", done.stdout, re.MULTILINE)
    climbs = re.search(
        r"^climbs back up: (\d+) \((\d+) from another call", done.stdout, re.MULTILINE
    )
    assert files is not None, done.stdout
    assert climbs is not None, done.stdout
    assert int(files.group(1)) > 50  # the hub's builders, not an empty walk
    assert int(climbs.group(2)) <= int(climbs.group(1))
    section = (REPO / "docs/architecture.md").read_text().split("### The settings walk")[1]
    now = re.search(r"^\| now \| \d+ \| (\d+) \| (\d+) \((\d+)\)", section, re.MULTILINE)
    assert now is not None, "the table's row for this tree"
    assert now.groups() == (files.group(1), climbs.group(1), climbs.group(2)), (
        "docs/architecture.md's figures are this tree's: run the command and update the row"
    )
