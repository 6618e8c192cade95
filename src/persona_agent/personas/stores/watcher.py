"""Watching the persona directory: files added, edited or removed go live at once."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from watchfiles import awatch

from persona_agent.personas.loader import PERSONA_SUFFIXES
from persona_agent.personas.stores.file_store import FilePersonaStore

__all__ = ["watch_personas"]

logger = logging.getLogger(__name__)


def _is_persona_file(path: Path) -> bool:
    return not path.name.startswith(".") and path.suffix.lower() in PERSONA_SUFFIXES


async def watch_personas(store: FilePersonaStore, stop: asyncio.Event) -> None:
    """Feed every change of a persona file to ``store.sync_file`` until ``stop`` is set.

    Our own atomic writes show up here too; ``sync_file`` finds them equal to
    memory and does nothing. Temporary and hidden files are ignored.
    """
    directory = store.directory
    logger.info("Watching %s for persona changes", directory)
    async for changes in awatch(directory, stop_event=stop, debounce=200, step=50, recursive=False):
        paths = sorted({Path(raw) for _, raw in changes if _is_persona_file(Path(raw))})
        for path in paths:
            try:
                await store.sync_file(path)
            except Exception:
                logger.exception("Could not take in the change of %s", path)
