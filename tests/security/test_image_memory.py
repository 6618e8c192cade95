"""An image uploaded to a real ``serve`` costs memory for the pixels needed, no more: a card
is read from the PNG's chunks, and a picture of too many pixels is refused from its header.
Before, a 170 KB PNG of 6300 × 6300 pixels sent to ``/validate`` was decoded twice (the
card's text, then the avatar), and the hub's memory peaked past a gigabyte."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from tests.personas.cards import ORLA_V3, card_png
from tests.security import OFFLINE_LLM, UPLOAD
from tests.servers.hub_process import hub_process


@pytest.fixture
def hub(tmp_path: Path, personas_dir: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    with hub_process(personas_dir, tmp_path / "data", **OFFLINE_LLM) as served:
        yield served


def peak_memory(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_huge_picture_is_refused_without_being_decoded(
    hub: tuple[str, subprocess.Popen[str]],
) -> None:
    url, process = hub
    raw = card_png(ORLA_V3, Image.new("RGBA", (6300, 6300), (10, 20, 30, 255)))
    assert len(raw) < 300_000  # 160 MB of pixels
    before = peak_memory(process.pid)
    files = {"file": ("huge.png", raw, "image/png")}
    for path in ("validate", "upload"):
        reply = httpx.post(f"{url}/api/v1/personas/{path}", files=files, headers=UPLOAD, timeout=60)
        problems = reply.json().get("problems") or [item["msg"] for item in reply.json()["detail"]]
        assert problems == [
            "huge.png: the image is 6300 × 6300 pixels, more than 16,777,216 in all"
        ]
    assert peak_memory(process.pid) - before < 40 * 1024 * 1024
    assert httpx.get(f"{url}/healthz").json()["status"] == "ok"
