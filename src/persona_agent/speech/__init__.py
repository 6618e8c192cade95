"""Spoken answers: Piper voices found and loaded, answers cut into sentences and spoken in
one worker thread, as WAV files (docs/media.md#voice). Nothing of the engine (``piper``,
``onnxruntime``) is imported until the first sentence is spoken."""

from persona_agent.speech.sentences import SentenceSplitter, speakable
from persona_agent.speech.synthesis import NO_SPEECH, Speech, SpeechError, Voice
from persona_agent.speech.voices import BUNDLED_VOICE, VoiceFiles, VoiceLibrary
from persona_agent.speech.wav import silence, wav_bytes

__all__ = [
    "BUNDLED_VOICE",
    "NO_SPEECH",
    "SentenceSplitter",
    "Speech",
    "SpeechError",
    "Voice",
    "VoiceFiles",
    "VoiceLibrary",
    "silence",
    "speakable",
    "wav_bytes",
]
