"""The watched documents folders: ``<persona-id>.documents/`` beside the persona files, its
files the persona's documents, kept in step at start-up and as they change on disk.

A file added or edited there is taken in (an unchanged one, by its SHA-256, is left
alone); a file removed there is deleted from the persona's documents. Only documents
that came from the folder are deleted so: an upload through REST stays. A file that
cannot be taken is logged at WARNING with its name and the reason, and skipped.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Callable
from pathlib import Path

from watchfiles import awatch

from persona_agent.errors import DocumentError
from persona_agent.knowledge.documents import DOCUMENT_TYPES
from persona_agent.knowledge.library import Knowledge
from persona_agent.personas.stores.store import PersonaChange

__all__ = ["FOLDER_SUFFIX", "DocumentFolders", "sync_all_folders", "sync_folder", "watch_folders"]

logger = logging.getLogger(__name__)

FOLDER_SUFFIX = ".documents"
"""A persona's documents folder is its id and this: ``socrates.documents/``."""
_PERSONA_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
SOURCE = "directory"


def _persona_of(folder: Path) -> str | None:
    name = folder.name
    if not name.endswith(FOLDER_SUFFIX):
        return None
    persona_id = name[: -len(FOLDER_SUFFIX)]
    return persona_id if _PERSONA_ID.match(persona_id) else None


async def sync_folder(
    knowledge: Knowledge, persona_id: str, folder: Path
) -> tuple[list[str], list[str]]:
    """Bring the persona's folder documents in step with ``folder`` (gone: every folder
    document deleted). Returns the names taken in and the names deleted."""
    files = await asyncio.to_thread(_files, folder)
    stored = {d.name: d for d in await knowledge.documents(persona_id) if d.source == SOURCE}
    added: list[str] = []
    for path in files:
        try:
            size = path.stat().st_size
            if size > knowledge.limits.max_bytes:
                raise DocumentError(
                    f"{path.name}: {size:,} bytes, over the limit of "
                    f"{knowledge.limits.max_bytes:,} (PERSONA_AGENT_KNOWLEDGE_MAX_BYTES)"
                )
            data = await asyncio.to_thread(path.read_bytes)
            known = stored.get(path.name)
            if known is not None and known.sha256 == hashlib.sha256(data).hexdigest():
                continue
            await knowledge.add(persona_id, path.name, data, source=SOURCE)
            added.append(path.name)
        except (DocumentError, OSError) as error:
            reason = error.message if isinstance(error, DocumentError) else str(error)
            logger.warning("Persona %s: document %s not taken: %s", persona_id, path, reason)
    names = {path.name for path in files}
    deleted: list[str] = []
    for name, document in stored.items():
        if name not in names:
            await knowledge.delete(persona_id, document.id)
            deleted.append(name)
    if added or deleted:
        logger.info(
            "Persona %s: documents folder %s: %d taken in, %d deleted",
            persona_id,
            folder,
            len(added),
            len(deleted),
        )
    return added, deleted


async def sync_all_folders(
    knowledge: Knowledge, directory: Path, is_persona: Callable[[str], bool]
) -> None:
    """Start-up: every documents folder in ``directory`` of a persona the hub has."""
    folders = await asyncio.to_thread(_folders, directory)
    for folder in folders:
        persona_id = _persona_of(folder)
        if persona_id is not None and is_persona(persona_id):
            await sync_folder(knowledge, persona_id, folder)


async def watch_folders(
    knowledge: Knowledge,
    directory: Path,
    is_persona: Callable[[str], bool],
    stop: asyncio.Event,
) -> None:
    """Sync each documents folder of ``directory`` that changes, until ``stop`` is set."""
    async for changes in awatch(directory, stop_event=stop, debounce=200, step=50):
        touched: set[str] = set()
        for _, raw in changes:
            path = Path(raw)
            for folder in (path, path.parent):
                persona_id = _persona_of(folder)
                if persona_id is not None and folder.parent == directory:
                    touched.add(persona_id)
        for persona_id in sorted(touched):
            if not is_persona(persona_id):
                continue
            try:
                await sync_folder(knowledge, persona_id, directory / f"{persona_id}{FOLDER_SUFFIX}")
            except Exception:
                logger.exception("Could not take in the documents folder of %s", persona_id)


class DocumentFolders:
    """The documents folders of ``directory``, kept in step: all at start, each as it
    changes on disk (``watch``), and a persona's when it is created or replaced (its
    folder may have been there before it)."""

    def __init__(
        self,
        knowledge: Knowledge,
        directory: Path,
        is_persona: Callable[[str], bool],
        *,
        watch: bool,
    ) -> None:
        self.knowledge = knowledge
        self.directory = directory
        self.is_persona = is_persona
        self.watch = watch
        self._syncs: set[asyncio.Task[None]] = set()

    async def run(self, stop: asyncio.Event) -> None:
        """Every folder taken in, then (``watch``) followed until ``stop`` is set."""
        try:
            await sync_all_folders(self.knowledge, self.directory, self.is_persona)
        except Exception:
            logger.exception("Could not take in the documents folders of %s", self.directory)
        if self.watch:
            await watch_folders(self.knowledge, self.directory, self.is_persona, stop)

    def on_change(self, change: PersonaChange) -> None:
        """A persona store subscriber: a created or replaced persona's folder, if any."""
        folder = self.directory / f"{change.persona_id}{FOLDER_SUFFIX}"
        if change.kind != "upsert" or not folder.is_dir():
            return
        task = asyncio.create_task(self._sync(change.persona_id, folder))
        self._syncs.add(task)
        task.add_done_callback(self._syncs.discard)

    async def aclose(self) -> None:
        """Wait for the syncs under way."""
        if self._syncs:
            await asyncio.gather(*self._syncs, return_exceptions=True)

    async def _sync(self, persona_id: str, folder: Path) -> None:
        try:
            await sync_folder(self.knowledge, persona_id, folder)
        except Exception:
            logger.exception("Could not take in the documents folder of %s", persona_id)


def _folders(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_dir() and p.name.endswith(FOLDER_SUFFIX))


def _files(folder: Path) -> list[Path]:
    """The folder's documents (a file of another type, or hidden, is left alone)."""
    if not folder.is_dir():
        return []
    return sorted(
        path
        for path in folder.iterdir()
        if path.is_file()
        and not path.name.startswith(".")
        and path.suffix.lower() in DOCUMENT_TYPES
    )
