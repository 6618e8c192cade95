"""The terminal chat's line while an answer has not begun: what is happening, and since when.

Sent at once ("received"), then what the agent says it does (this hub's ``progress``
status updates: loading the model, waiting for it, reading), with the seconds elapsed,
redrawn in place twice a second. The line is erased when anything else is printed (the
answer's first words, a tool call, an error). Only on a terminal: piped output gets
the answer alone.
"""

from __future__ import annotations

import asyncio
import sys
import time

import typer

__all__ = ["WaitingLine"]

REDRAW = 0.5
"""Seconds between redraws of the elapsed time."""
_ERASE = "\r\033[K"


class WaitingLine:
    """One answer's waiting line; :meth:`start` it on the chat's event loop."""

    def __init__(self, *, enabled: bool | None = None) -> None:
        self.enabled = sys.stdout.isatty() if enabled is None else enabled
        self.phase = "received"
        self._started = time.monotonic()
        self._shown = False
        self._ticker: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Show the line now, and keep its time up to date until :meth:`clear`."""
        if self.enabled and self._ticker is None:
            self._draw()
            self._ticker = asyncio.get_running_loop().create_task(self._tick())

    def set(self, phase: str) -> None:
        """What is happening now (shown at once, if the line is still up)."""
        self.phase = phase
        if self._ticker is not None:
            self._draw()

    def clear(self) -> None:
        """Erase the line for good (this answer's other output begins)."""
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._shown:
            typer.echo(_ERASE, nl=False)
            self._shown = False
        self.enabled = False

    def _draw(self) -> None:
        elapsed = time.monotonic() - self._started
        line = typer.style(f"... {self.phase} ({elapsed:.1f} s)", dim=True)
        typer.echo(f"{_ERASE}{line}", nl=False)
        self._shown = True

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(REDRAW)  # a clock for the display, not a wait on anything
            self._draw()
