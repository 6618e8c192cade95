"""What the voice tests hear in a WAV file: its length, its loudness, and its words (an
offline recognizer, pocketsphinx, with the English model its wheel ships)."""

from __future__ import annotations

import functools
import io
import re
import wave
from dataclasses import dataclass

import numpy as np
from pocketsphinx import Decoder

__all__ = ["Heard", "hear", "joined", "read_wav", "recall"]

RECOGNIZER_RATE = 16_000


@dataclass(frozen=True)
class Heard:
    seconds: float
    rms: float
    """Root mean square of the samples, full scale 1.0."""
    words: str
    """What the recognizer heard."""


def read_wav(data: bytes) -> tuple[bytes, int]:
    """The PCM samples and rate of a 16-bit mono WAV file (anything else fails the test)."""
    with wave.open(io.BytesIO(data), "rb") as reader:
        assert reader.getnchannels() == 1
        assert reader.getsampwidth() == 2
        return reader.readframes(reader.getnframes()), reader.getframerate()


def joined(wavs: list[bytes]) -> bytes:
    """WAV files played one after the other, as one WAV file."""
    pcm, rates = zip(*(read_wav(data) for data in wavs), strict=True)
    assert len(set(rates)) == 1, rates
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rates[0])
        writer.writeframes(b"".join(pcm))
    return buffer.getvalue()


@functools.cache
def _decoder() -> Decoder:
    return Decoder(samprate=RECOGNIZER_RATE)


def hear(data: bytes, *, words: bool = True) -> Heard:
    """A WAV file's length, loudness and (unless ``words`` is false: the recognizer takes
    a second or more of CPU a sentence) words."""
    pcm, rate = read_wav(data)
    samples = np.frombuffer(pcm, dtype=np.int16).astype(np.float32)
    seconds = len(samples) / rate
    rms = float(np.sqrt(np.mean((samples / 32768.0) ** 2))) if len(samples) else 0.0
    if not words:
        return Heard(seconds, rms, "")
    count = int(len(samples) * RECOGNIZER_RATE / rate)
    resampled = np.interp(np.linspace(0, len(samples) - 1, count), np.arange(len(samples)), samples)
    decoder = _decoder()
    decoder.start_utt()
    decoder.process_raw(resampled.astype(np.int16).tobytes(), full_utt=True)
    decoder.end_utt()
    hypothesis = decoder.hyp()
    return Heard(seconds, rms, hypothesis.hypstr if hypothesis is not None else "")


def recall(text: str, heard: str) -> float:
    """The share of ``text``'s words of four letters or more that the recognizer heard
    (it mishears some of a synthetic voice's words, not most)."""
    words = {word for word in re.findall(r"[a-z]+", text.lower()) if len(word) >= 4}
    return len(words & set(heard.split())) / len(words)
