"""Images and speech: who sees the images sent and where they are kept, what an image part
may be, and the hub's spoken answers, built from the settings."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from persona_agent.a2a.tasks.image_parts import ImageIntake
from persona_agent.db import GroupCommitWriter
from persona_agent.llm.base import LLMBackend
from persona_agent.media.images import ImageLimits
from persona_agent.media.media_store import MediaStore
from persona_agent.media.turn_images import TurnImages
from persona_agent.media.vision import Vision
from persona_agent.security.egress.push_urls import PushUrlGuard
from persona_agent.settings import Settings
from persona_agent.speech import Speech, VoiceLibrary
from persona_agent.speech.voices import engine_installed

__all__ = ["Media", "build_images", "build_media", "build_speech", "image_limits", "vision_of"]

logger = logging.getLogger(__name__)


@dataclass
class Media:
    """Images and speech, built once: the engine's images (who sees them, where they are
    kept), the A2A services' intake of image parts and the spoken answers."""

    images: TurnImages
    intake: ImageIntake
    """What an image part may be, and how one given by URL is fetched."""
    speech: Speech


def build_media(settings: Settings, writer: GroupCommitWriter, llm: LLMBackend) -> Media:
    """The hub's images and speech (docs/media.md)."""
    intake = ImageIntake(
        image_limits(settings),
        PushUrlGuard(settings.image_url_allowed_host_list),
        workers=settings.image_workers,
    )
    return Media(build_images(settings, writer, llm), intake, build_speech(settings))


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


def build_images(settings: Settings, writer: GroupCommitWriter, llm: LLMBackend) -> TurnImages:
    """Who sees the images sent, and where a conversation's are kept (docs/media.md)."""
    return TurnImages(
        vision_of(settings, llm), MediaStore(writer), shown=settings.image_max_per_message
    )


def vision_of(settings: Settings, llm: LLMBackend) -> Vision:
    """Which personas see images, on the hub of ``settings`` answering with ``llm``."""
    return Vision(
        models=settings.vision_model_list,
        default_model=llm.default_model,
        embedded=not llm.supports_images,
    )


def image_limits(settings: Settings) -> ImageLimits:
    """What an image part may be (the ``PERSONA_AGENT_IMAGE_*`` settings)."""
    return ImageLimits(
        max_bytes=settings.image_max_bytes,
        max_pixels=settings.image_max_pixels,
        max_side=settings.image_max_side,
        fetch_seconds=settings.image_fetch_seconds,
        per_message=settings.image_max_per_message,
        message_bytes=settings.image_message_bytes,
        message_pixels=settings.image_message_pixels,
    )
