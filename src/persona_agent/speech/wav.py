"""WAV files made of 16-bit mono PCM samples: what a client plays."""

from __future__ import annotations

import io
import wave

__all__ = ["silence", "wav_bytes"]


def wav_bytes(pcm: bytes, rate: int) -> bytes:
    """A complete WAV file (RIFF, PCM, 16-bit, mono) of ``pcm`` at ``rate`` samples a second."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(pcm)
    return buffer.getvalue()


def silence(seconds: float, rate: int) -> bytes:
    """``seconds`` of 16-bit silence at ``rate``, as PCM samples."""
    return bytes(2 * round(seconds * rate))
