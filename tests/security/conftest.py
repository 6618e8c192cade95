from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.personas import BUNDLED


@pytest.fixture
def personas_dir(tmp_path: Path) -> Path:
    """A copy of the bundled personas, for one test to change."""
    directory = tmp_path / "personas"
    shutil.copytree(BUNDLED, directory)
    return directory
