"""Whether a process is alive, by its ``/proc`` entry (Linux): a killed process that is
reaped has none (``os.kill(pid, 0)`` would still find a zombie)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

__all__ = ["alive", "gone"]


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


async def gone(pids: Iterable[int], seconds: float = 120) -> None:
    """Until none of ``pids`` is a process any more (``seconds``: a bound on a hung test)."""
    async with asyncio.timeout(seconds):
        while any(alive(pid) for pid in pids):  # noqa: ASYNC110 (no event for another's exit)
            await asyncio.sleep(0.02)
