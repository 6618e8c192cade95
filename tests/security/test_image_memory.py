"""An image uploaded to a real ``serve`` costs memory for the pixels needed, no more: a card
is read from the PNG's chunks, and a picture of too many pixels is refused from its header.
Before, a 170 KB PNG of 6300 × 6300 pixels sent to ``/validate`` was decoded twice (the
card's text, then the avatar), and the hub's memory peaked past a gigabyte."""

from __future__ import annotations

import subprocess
import threading
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


def memory_line(pid: int, name: str) -> int | None:
    """A ``Vm*`` line of the process's status, in bytes, or None where the kernel does not
    give it (gVisor's ``/proc`` has ``VmRSS`` but no ``VmHWM``, the peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1]) * 1024
    return None


class PeakSampler:
    """The process's highest resident memory (``VmRSS``) seen while it runs, read every
    2 ms in a thread: what ``VmHWM`` gives where the kernel keeps it. A picture decoded
    at full size holds its 160 MB for far longer than 2 ms."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            rss = memory_line(self.pid, "VmRSS")
            assert rss is not None, "no VmRSS"
            self.peak = max(self.peak, rss)


def test_a_huge_picture_is_refused_without_being_decoded(
    hub: tuple[str, subprocess.Popen[str]],
) -> None:
    url, process = hub
    raw = card_png(ORLA_V3, Image.new("RGBA", (6300, 6300), (10, 20, 30, 255)))
    assert len(raw) < 300_000  # 160 MB of pixels
    before_peak = memory_line(process.pid, "VmHWM")
    before = memory_line(process.pid, "VmRSS")
    assert before is not None, "no VmRSS"
    files = {"file": ("huge.png", raw, "image/png")}
    with PeakSampler(process.pid) as sampled:
        for path in ("validate", "upload"):
            reply = httpx.post(
                f"{url}/api/v1/personas/{path}", files=files, headers=UPLOAD, timeout=60
            )
            problems = reply.json().get("problems") or [
                item["msg"] for item in reply.json()["detail"]
            ]
            assert problems == [
                "huge.png: the image is 6300 × 6300 pixels, more than 16,777,216 in all"
            ]
    assert sampled.peak - before < 40 * 1024 * 1024
    if before_peak is not None:  # the kernel's own peak, where it keeps one
        after_peak = memory_line(process.pid, "VmHWM")
        assert after_peak is not None
        assert after_peak - before_peak < 40 * 1024 * 1024
    assert httpx.get(f"{url}/healthz").json()["status"] == "ok"
