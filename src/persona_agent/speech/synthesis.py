"""Text spoken by a Piper voice in ONE worker thread, for the whole hub: each voice loaded
there on first use (and kept, a few at most), each sentence synthesized there in turn, so
that speech takes one core of the machine at most and the event loop never waits for it.

The sentences wait in a fair queue (:class:`~persona_agent.speech.fair_queue.FairQueue`):
callers are served in turn, one sentence each, so that a caller's answers wait behind its
own and not behind everyone's; each caller may have at most ``caller_chars`` characters
waiting to be spoken (:meth:`Speech.hold`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from persona_agent.errors import PersonaAgentError
from persona_agent.personas.sections import VoiceSettings
from persona_agent.speech.fair_queue import FairQueue
from persona_agent.speech.voices import BUNDLED_VOICE, VoiceFiles, VoiceLibrary

__all__ = ["NO_SPEECH", "Speech", "SpeechError", "Spoken", "Voice"]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")


class SpeechError(PersonaAgentError):
    """A voice could not be loaded, or a text not spoken; the message is safe to show."""

    message = "The answer could not be spoken"


@dataclass(frozen=True, slots=True)
class Voice:
    """A voice to speak with, at a speed (1.0: the voice's own; 2.0: twice as fast)."""

    files: VoiceFiles
    speed: float = 1.0


@dataclass(frozen=True, slots=True)
class Spoken:
    """Speech as 16-bit mono PCM samples at ``rate`` a second."""

    pcm: bytes
    rate: int

    @property
    def seconds(self) -> float:
        return len(self.pcm) / 2 / self.rate


@dataclass(eq=False, slots=True)
class _Job:
    """A sentence waiting to be spoken, and where its speech goes."""

    text: str
    voice: Voice
    result: asyncio.Future[Spoken]


class Speech:
    """The hub's speech: which voice a persona speaks with, and speaking.

    ``library`` ``None``: speech is off (no persona speaks). ``default_voice``: the voice
    of a persona that names none; ``threads``: onnxruntime's threads for the one worker
    (1: one core); ``max_voices``: voices kept loaded (the least recently used goes);
    ``max_chars``, ``max_seconds``: characters and seconds of one answer spoken at most
    (the rest is not); ``caller_chars``: characters one caller may have waiting to be
    spoken, all its answers together (0: no limit).
    """

    def __init__(
        self,
        library: VoiceLibrary | None,
        *,
        default_voice: str = BUNDLED_VOICE,
        threads: int = 1,
        max_voices: int = 2,
        max_chars: int = 3000,
        max_seconds: float = 120.0,
        caller_chars: int = 12_000,
    ) -> None:
        self.library = library
        self.default_voice = default_voice
        self.threads = threads
        self.max_voices = max_voices
        self.max_chars = max_chars
        self.max_seconds = max_seconds
        self.caller_chars = caller_chars
        self._queue: FairQueue[_Job] = FairQueue()
        self._speaking = False
        self._held: dict[str, int] = {}
        self._worker: ThreadPoolExecutor | None = None
        self._loaded: OrderedDict[VoiceFiles, Any] = OrderedDict()  # the worker's only
        self._failed: dict[tuple[VoiceFiles, int, int], str] = {}
        self.spoken = 0
        """Texts spoken so far (counted in the worker)."""

    @property
    def enabled(self) -> bool:
        return self.library is not None

    @property
    def started(self) -> bool:
        """Whether anything was asked to be spoken yet (the worker exists)."""
        return self._worker is not None

    def voice(self, setting: VoiceSettings | bool | None) -> Voice | None:
        """The voice a persona with ``setting`` (its ``voice:``) speaks with; ``None``: it
        does not speak (speech off, ``voice: false``, or its voice is not installed)."""
        name, speed = self._wanted(setting)
        if name is None or self.library is None:
            return None
        files = self.library.find(name)
        return Voice(files, speed) if files is not None else None

    def missing(self, setting: VoiceSettings | bool | None) -> str | None:
        """Why a persona that should speak cannot: its voice is not installed (``None``:
        it can, or it should not speak at all)."""
        name, _ = self._wanted(setting)
        if name is None or self.library is None or self.library.find(name) is not None:
            return None
        known = ", ".join(self.library.names()) or "none"
        return f"The voice '{name}' is not installed on this hub (its voices: {known})"

    def _wanted(self, setting: VoiceSettings | bool | None) -> tuple[str | None, float]:
        if self.library is None or setting is False:
            return None, 1.0
        if isinstance(setting, VoiceSettings):
            return setting.name or self.default_voice, setting.speed
        return self.default_voice, 1.0

    def warm(self, voice: Voice) -> None:
        """Have the worker load ``voice`` now, if it has not yet (while the model thinks
        of its first sentence); a voice that fails says so when it is spoken with."""
        # Read outside the worker, which alone writes it: at worst a load asked for twice,
        # and the worker's own look finds the voice loaded the second time.
        if voice.files not in self._loaded:
            self._submit(self._load_quietly, voice.files)

    def _load_quietly(self, files: VoiceFiles) -> None:
        with contextlib.suppress(SpeechError):
            self._load(files)

    def _submit(self, function: Callable[..., _T], *arguments: Any) -> Future[_T]:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="persona-agent-speech")
        return self._worker.submit(function, *arguments)

    def hold(self, caller: str, chars: int) -> bool:
        """Count ``chars`` more characters waiting to be spoken for ``caller``; ``False``
        (nothing counted) when that would pass ``caller_chars``."""
        held = self._held.get(caller, 0) + chars
        if self.caller_chars and held > self.caller_chars:
            return False
        self._held[caller] = held
        return True

    def release(self, caller: str, chars: int) -> None:
        """``chars`` of ``caller``'s characters spoken, or given up."""
        left = self._held.get(caller, 0) - chars
        if left > 0:
            self._held[caller] = left
        else:
            self._held.pop(caller, None)

    def held(self, caller: str) -> int:
        """Characters ``caller`` has waiting to be spoken now."""
        return self._held.get(caller, 0)

    async def speak(self, text: str, voice: Voice, caller: str = "") -> Spoken:
        """``text`` spoken by ``voice``, in the worker thread, in ``caller``'s turn (after
        what it speaks now, and what waits of the callers before it in the fair queue).
        Cancelled before its turn, it is never spoken.

        Raises:
            SpeechError: the voice could not be loaded, or the text not spoken.
        """
        loop = asyncio.get_running_loop()
        job = _Job(text, voice, loop.create_future())
        self._queue.put(caller, job)
        self._next(loop)
        try:
            return await job.result
        except asyncio.CancelledError:
            self._queue.remove(caller, job)
            raise

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand the worker the next sentence in turn, if it is free."""
        while not self._speaking and (taken := self._queue.take()) is not None:
            job = taken[1]
            if job.result.done():  # its caller gave up
                continue
            self._speaking = True
            done = self._submit(self._speak, job.text, job.voice)
            done.add_done_callback(functools.partial(_call_soon, loop, self._spoke, loop, job))

    def _spoke(self, loop: asyncio.AbstractEventLoop, job: _Job, done: Future[Spoken]) -> None:
        self._speaking = False
        if not job.result.done():
            if done.cancelled():
                job.result.cancel()
            elif (error := done.exception()) is not None:
                job.result.set_exception(error)
            else:
                job.result.set_result(done.result())
        self._next(loop)

    async def aclose(self) -> None:
        """Stop the worker: what waits is dropped, what runs ends in the background."""
        for job in self._queue.drain():
            job.result.cancel()
        self._speaking = False
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)
            self._worker = None

    def _speak(self, text: str, voice: Voice) -> Spoken:
        from piper import SynthesisConfig  # the engine: imported when first asked for

        piper_voice = self._load(voice.files)
        config = SynthesisConfig(length_scale=1 / voice.speed)
        try:
            chunks = list(piper_voice.synthesize(text, config))
        except Exception as error:  # the engine's own, on a text it cannot read
            logger.warning("Voice %s could not speak %r", voice.files.name, text, exc_info=True)
            raise SpeechError(f"The voice '{voice.files.name}' could not speak this") from error
        rate = chunks[0].sample_rate if chunks else piper_voice.config.sample_rate
        self.spoken += 1
        return Spoken(b"".join(chunk.audio_int16_bytes for chunk in chunks), rate)

    def _load(self, files: VoiceFiles) -> Any:
        """The loaded voice (the worker thread's: no lock), loading it the first time."""
        loaded = self._loaded.get(files)
        if loaded is not None:
            self._loaded.move_to_end(files)
            return loaded
        try:
            stat = files.model.stat()
            key = (files, stat.st_mtime_ns, stat.st_size)
        except OSError:
            key = (files, 0, 0)
        failed = self._failed.get(key)
        if failed is not None:  # the same file fails the same way: not read again
            raise SpeechError(failed)
        try:
            loaded = _load_piper(files, self.threads)
        except Exception as error:
            logger.warning(
                "Voice %s (%s) could not be loaded", files.name, files.model, exc_info=True
            )
            reason = f"The voice '{files.name}' could not be loaded (see the hub's log)"
            self._failed[key] = reason
            raise SpeechError(reason) from error
        self._loaded[files] = loaded
        while len(self._loaded) > self.max_voices:
            self._loaded.popitem(last=False)
        return loaded


def _load_piper(files: VoiceFiles, threads: int) -> Any:
    """A Piper voice whose onnxruntime session uses ``threads`` threads (Piper's own
    ``PiperVoice.load`` takes every core)."""
    import json

    import onnxruntime
    from piper import PiperVoice
    from piper.config import PiperConfig

    config = PiperConfig.from_dict(json.loads(files.config.read_text(encoding="utf-8")))
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        str(files.model), sess_options=options, providers=["CPUExecutionProvider"]
    )
    return PiperVoice(session=session, config=config)


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: Any) -> None:
    """``callback`` on ``loop``, from the worker thread (not once the loop is closed: the
    hub stopped)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, *args)


NO_SPEECH = Speech(None)
"""Speech off: no persona speaks."""
