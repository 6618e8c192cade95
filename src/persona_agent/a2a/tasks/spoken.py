"""The ``voice`` artifact of a task: its answer spoken as it streams, a WAV file for each
sentence (or group of short ones), or one WAV of the whole answer for a blocking send."""

from __future__ import annotations

import asyncio
import logging
import uuid

from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Artifact, Part, TaskArtifactUpdateEvent

from persona_agent.a2a.context_keys import PARTS_METADATA_KEY
from persona_agent.speech import (
    SentenceSplitter,
    Speech,
    SpeechError,
    Voice,
    silence,
    speakable,
    wav_bytes,
)
from persona_agent.speech.synthesis import Spoken

__all__ = ["VOICE_ARTIFACT_NAME", "VOICE_ERROR_METADATA_KEY", "VOICE_MEDIA_TYPE", "SpokenAnswer"]

logger = logging.getLogger(__name__)

VOICE_ARTIFACT_NAME = "voice"
VOICE_MEDIA_TYPE = "audio/wav"
VOICE_ERROR_METADATA_KEY = "voiceError"
"""The final message's metadata key saying why the answer was not spoken (or not all of it)."""
PAUSE_SECONDS = 0.2
"""Silence between sentences in the one WAV of a blocking send (and the whole of a closing
chunk: see :meth:`SpokenAnswer.finish`)."""
_UNKNOWN = object()  # the next sentence has not been written yet


class SpokenAnswer:
    """Speaks one task's answer as its pieces stream in (:meth:`add`), each sentence as
    soon as the next one begins, in the hub's speech worker, while the text goes on.

    Streaming (``whole`` false): each sentence spoken is a chunk of the ``voice`` artifact,
    one part each (a complete WAV file, ``voice-<n>.wav``), ``append`` after the first,
    ``last_chunk`` on the last. Blocking: one chunk, one WAV of the whole answer, its
    sentences apart by :data:`PAUSE_SECONDS`. At most the speech's ``max_chars`` and
    ``max_seconds`` are spoken (the audio is cut there). ``caller``: whose turn its
    sentences wait for in the speech's fair queue, and whose ``caller_chars`` they count
    against while they wait (past it, the rest is not spoken, and :meth:`finish` says
    so). A voice that fails ends the speaking, not the task: :meth:`finish` says why.
    """

    def __init__(
        self, speech: Speech, voice: Voice, updater: TaskUpdater, *, whole: bool, caller: str = ""
    ) -> None:
        self._speech, self._voice, self._updater, self._whole = speech, voice, updater, whole
        self._caller = caller
        self._splitter = SentenceSplitter()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._chars = 0
        self._held = 0
        """Characters put to be spoken, not spoken yet (counted in the caller's)."""
        self._seconds = 0.0
        self._stopped = False
        """The answer's seconds are all spoken: the speaking ends at once."""
        self._refused = False
        """The caller's characters are all counted: no more sentences are taken."""
        self._worker: asyncio.Task[None] | None = None
        self._artifact_id = str(uuid.uuid4())
        self._parts = 0
        self._ended = False
        self._pcm: list[bytes] = []
        self._rate = 0
        self._error: str | None = None
        speech.warm(voice)  # loaded while the model thinks of its first sentence

    def add(self, piece: str) -> None:
        """A piece of the answer: the sentences it completes go to be spoken."""
        for sentence in self._splitter.feed(piece):
            self._put(sentence)

    async def finish(self) -> str | None:
        """Speak what is left, and wait until every chunk is out; why the answer was not
        (all) spoken, or ``None``."""
        self._put(self._splitter.rest())
        if self._worker is None:
            return self._error
        self._queue.put_nowait(None)
        await self._worker
        return self._error

    def cancel(self) -> None:
        """Stop speaking (the task is canceled or failed): what waits is never spoken."""
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
        self._release(self._held)  # the worker may be canceled before it ever ran

    def _release(self, chars: int) -> None:
        chars = min(chars, self._held)
        self._held -= chars
        self._speech.release(self._caller, chars)

    def _put(self, sentence: str) -> None:
        text = speakable(sentence)
        room = self._speech.max_chars - self._chars
        if not text or room <= 0 or self._stopped or self._refused:
            return
        if len(text) > room:
            text = text[:room].rsplit(" ", 1)[0] or text[:room]
        if not self._speech.hold(self._caller, len(text)):
            self._refused = True  # a later, shorter sentence is not spoken either
            limit = self._speech.caller_chars
            self._error = (
                f"This caller has {self._speech.held(self._caller):,} characters of answers "
                f"waiting to be spoken, the most it may have is {limit:,} "
                "(PERSONA_AGENT_VOICE_CALLER_CHARS): the rest of this answer is not spoken"
            )
            return
        self._held += len(text)
        self._chars += len(text)
        if self._worker is None:
            self._worker = asyncio.create_task(self._speak_all(), name="speak-answer")
        self._queue.put_nowait(text)

    async def _speak_all(self) -> None:
        text: object = await self._queue.get()
        try:
            while isinstance(text, str):
                spoken = await self._speech.speak(text, self._voice, self._caller)
                self._release(len(text))
                spoken = self._within_seconds(spoken)
                following: object = (
                    None
                    if self._stopped
                    else self._queue.get_nowait()
                    if self._queue.qsize()
                    else _UNKNOWN
                )
                await self._out(spoken, last=following is None)
                text = await self._queue.get() if following is _UNKNOWN else following
        except SpeechError as error:
            self._error = error.message
        except Exception:
            logger.exception("Speaking task %s's answer failed", self._updater.task_id)
            self._error = "Internal error while speaking the answer (see the hub's log)"
        finally:
            self._release(self._held)  # what was put and will not be spoken
        if self._whole and self._pcm:
            await self._chunk(wav_bytes(b"".join(self._pcm), self._rate), last=True)
        elif not self._whole and self._parts and not self._ended:  # close the artifact
            rate = self._rate or 22050
            await self._chunk(wav_bytes(silence(PAUSE_SECONDS, rate), rate), last=True)

    def _within_seconds(self, spoken: Spoken) -> Spoken:
        """``spoken``, cut where the answer reaches the speech's ``max_seconds`` (and the
        speaking stopped there)."""
        room = self._speech.max_seconds - self._seconds
        if spoken.seconds >= room:
            self._stopped = True
            spoken = Spoken(spoken.pcm[: 2 * max(0, int(room * spoken.rate))], spoken.rate)
        self._seconds += spoken.seconds
        return spoken

    async def _out(self, spoken: Spoken, *, last: bool) -> None:
        self._rate = spoken.rate
        if not self._whole:
            await self._chunk(wav_bytes(spoken.pcm, spoken.rate), last=last)
            return
        if self._pcm:
            self._pcm.append(silence(PAUSE_SECONDS, spoken.rate))
        self._pcm.append(spoken.pcm)

    async def _chunk(self, wav: bytes, *, last: bool) -> None:
        self._parts += 1
        self._ended = last
        part = Part(raw=wav, media_type=VOICE_MEDIA_TYPE, filename=f"voice-{self._parts}.wav")
        updater = self._updater
        event = TaskArtifactUpdateEvent(
            task_id=updater.task_id,
            context_id=updater.context_id,
            artifact=Artifact(
                artifact_id=self._artifact_id, name=VOICE_ARTIFACT_NAME, parts=[part]
            ),
            append=self._parts > 1,
            last_chunk=last,
        )
        event.metadata.update({PARTS_METADATA_KEY: self._parts})
        await updater.event_queue.enqueue_event(event)
