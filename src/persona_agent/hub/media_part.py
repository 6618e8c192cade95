"""Speech and images: the hub's spoken answers, built from the settings."""

from __future__ import annotations

import logging

from persona_agent.settings import Settings
from persona_agent.speech import Speech, VoiceLibrary
from persona_agent.speech.voices import engine_installed

__all__ = ["build_speech"]

logger = logging.getLogger(__name__)


def build_speech(settings: Settings) -> Speech:
    """The hub's speech (docs/media.md#voice): off when ``PERSONA_AGENT_VOICE=off`` or the
    engine is not installed. Nothing is loaded here: the engine and a voice are, in the
    speech worker, when a client first asks for audio."""
    if settings.voice == "off":
        return Speech(None)
    if not engine_installed():
        logger.info("Spoken answers are off: install the voice extra (piper-tts) for them")
        return Speech(None)
    library = VoiceLibrary(settings.voices_dir or settings.data_dir / "voices")
    if library.find(settings.default_voice) is None:
        logger.warning(
            "The default voice %r is not installed (voices: %s): only personas naming "
            "another voice speak",
            settings.default_voice,
            ", ".join(library.names()) or "none",
        )
    return Speech(
        library,
        default_voice=settings.default_voice,
        threads=settings.voice_threads,
        max_chars=settings.voice_max_chars,
        max_seconds=settings.voice_max_seconds,
        caller_chars=settings.voice_caller_chars,
    )
