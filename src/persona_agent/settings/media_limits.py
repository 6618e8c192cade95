"""Settings of media in messages: images, documents read into a turn, and spoken answers.

A section of :class:`persona_agent.settings.Settings`, which is composed of them and read
once at the edge; each field is ``PERSONA_AGENT_<NAME>`` there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings

__all__ = ["MediaSettings"]


class MediaSettings(BaseSettings):
    """Images, documents and voice."""

    # Media: images
    vision_models: str = (
        "gpt-4o*,gpt-4.1*,gpt-5*,o3*,o4*,claude-*,gemini-*,*vision*,llava*,*-vl*,pixtral*"
    )
    """Comma-separated patterns (``fnmatch``, case-insensitive: ``gpt-4o*``) of the model
    names that see images; a persona's ``model.vision`` overrides; the embedded model
    sees none (docs/media.md). Empty: no model sees unless its persona says so."""
    image_max_bytes: int = Field(default=10 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    """Largest image part (bytes sent inline, or fetched from its URL)."""
    image_max_pixels: int = Field(default=25_000_000, ge=10_000, le=200_000_000)
    """Most pixels (width × height, read from the header before decoding; a JPEG's at the
    1/2, 1/4 or 1/8 scale it is decoded at) an image part may decode into: more is
    refused as a decompression bomb. 25 million: a 6000×4000 photo, about 100 MB decoded."""
    image_max_side: int = Field(default=1568, ge=64, le=8192)
    """Images are scaled down to this longest side before they are stored and sent."""
    image_fetch_seconds: float = Field(default=10.0, gt=0, le=120)
    """The most an image URL's fetch may take, redirects included."""
    image_url_allowed_hosts: str = ""
    """Comma-separated hosts (``host`` or ``host:port``) an image URL may be on although
    they are not public addresses, for local development (as ``push_allowed_hosts``)."""
    max_message_parts: int = Field(default=64, ge=1, le=10_000)
    """Most parts (text, data, files, images) a sent message may have; more is refused
    (Invalid params) before any task is made."""
    image_max_per_message: int = Field(default=16, ge=1, le=1000)
    """Most image parts (bytes or URL) a message may have; more is refused before any
    image is fetched or decoded. Also the most images a prompt shows the model, the
    newest (the older are notes): a conversation's images are not all loaded every turn."""
    image_message_bytes: int = Field(default=32 * 1024 * 1024, ge=1024, le=1024**3)
    """Most bytes a message's images may have together: sent inline (refused before the
    task), fetched (a fetch stops once it passes what is left), and again once prepared
    (what is kept and sent to the model)."""
    image_message_pixels: int = Field(default=100_000_000, ge=10_000, le=2_000_000_000)
    """Most pixels a message's images may decode into together (each read from its header
    before it is decoded): the CPU one message's images cost."""
    image_workers: int = Field(default=2, ge=1, le=32)
    """Threads that decode and re-encode images, the hub's own: at most this many images
    are decoded at once, hub-wide (each message's one at a time), and other work never
    waits behind them in the shared thread pool."""
    # Media: documents
    document_tokens: int = Field(default=8000, ge=0)
    """Tokens (characters / 4) of documents one message shows the model, its documents
    together; a document over its share is cut, said so, and kept as the conversation's
    document (docs/media.md#documents). With the embedded model, at most a quarter of what
    its prompt may take (``local_context_tokens`` less ``local_max_tokens``)."""
    document_max_pages: int = Field(default=500, ge=1)
    """Pages of a PDF read; a PDF of more is refused, naming its part."""
    document_max_decoded_bytes: int = Field(default=32 * 1024 * 1024, ge=1024 * 1024)
    """Bytes a PDF's content streams may decode to, all pages together (a "PDF bomb" is
    refused, naming its part, as soon as it passes this)."""
    document_max_operators: int = Field(default=2_000_000, ge=10_000)
    """Content-stream operators a PDF's reading may run, all pages together (a stream of
    millions of operators, or one busy stream shared by every page, is stopped here)."""
    document_max_chars: int = Field(default=2_000_000, ge=10_000)
    """Characters of text a PDF's reading may write out, all pages together."""
    document_max_seconds: float = Field(default=30.0, gt=0, le=3600)
    """CPU seconds reading one PDF or HTML document may take; its reader process is also
    killed past twice this (plus 5 s) in wall-clock time."""
    document_workers: int = Field(default=2, ge=1, le=64)
    """Processes that read PDF and HTML documents, each one at a time (a core at most);
    more documents wait their turn, never the hub's other work."""
    document_worker_memory_bytes: int = Field(default=1024 * 1024 * 1024, ge=0)
    """Address space each document reader process may take (``0``: no cap); a document
    that needs more is refused."""
    # Media: voice
    voice: Literal["auto", "off"] = "auto"
    """Spoken answers (docs/media.md#voice) for clients whose ``acceptedOutputModes`` name
    ``audio/wav``: ``auto``, when the speech engine is installed (the ``voice`` extra);
    ``off``: never (cards do not offer audio)."""
    voices_dir: Path | None = None
    """A directory of further Piper voices, each ``NAME.onnx`` beside ``NAME.onnx.json``
    (read when a voice is looked up); default ``<data_dir>/voices``."""
    default_voice: str = Field(
        default="en_US-joe-medium", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
    )
    """The voice of a persona that names none (the voice extra ships ``en_US-joe-medium``)."""
    voice_threads: int = Field(default=1, ge=1, le=64)
    """Threads of the one speech worker (onnxruntime's): 1 keeps speech to one core."""
    voice_max_chars: int = Field(default=3000, ge=1, le=100_000)
    """Characters of one answer spoken at most; the rest is not spoken."""
    voice_max_seconds: float = Field(default=120.0, gt=0, le=3600)
    """Seconds of one answer spoken at most (the audio is cut there): what one answer's
    audio may take, in the task and in memory (about 44 KB a second at 22,050 Hz)."""
    voice_caller_chars: int = Field(default=12_000, ge=0)
    """Characters one caller (API key, token, or client address) may have waiting to be
    spoken, all its answers together; past it, the rest of an answer is not spoken and
    ``voiceError`` says so (``0``: no limit)."""

    @property
    def image_url_allowed_host_list(self) -> list[str]:
        return [host.strip() for host in self.image_url_allowed_hosts.split(",") if host.strip()]

    @property
    def vision_model_list(self) -> tuple[str, ...]:
        return tuple(name.strip() for name in self.vision_models.split(",") if name.strip())
