"""The terminal chat's media: files queued with ``/attach`` for the next message (sent as
A2A file parts), and answers' spoken ``voice`` artifacts saved as WAV files (``/voice DIR``,
``--voice-dir``) -- docs/chat.md, docs/media.md.

A file is read when it is attached, so that a missing or unreadable one is said at once;
its media type comes from its extension (the hub refuses, naming the part, a type it does
not read). Each answer's voice is one WAV file a chunk (a sentence or a few), saved once
the answer has ended as ``{task id's first 8}-{n}.wav``: the files of an answer sort in the
order they are played.
"""

from __future__ import annotations

import io
import mimetypes
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from a2a.types.a2a_pb2 import AgentCard, Part

from persona_agent.cli.command_settings import fail
from persona_agent.knowledge.documents import DOCUMENT_TYPES

if TYPE_CHECKING:
    from PIL.Image import Image

__all__ = [
    "AUDIO_MODES",
    "MAX_ATTACHMENT_BYTES",
    "MEDIA_COMMANDS",
    "MEDIA_TYPES",
    "Attached",
    "Attachments",
    "MediaCommands",
    "MediaError",
    "VoiceFiles",
    "media_type_of",
    "modes_in_words",
    "size_text",
    "takes",
    "voice_files",
]

MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
    **DOCUMENT_TYPES,
}
"""The media type sent for each extension the hub reads (docs/media.md); any other file
is sent with the type Python's ``mimetypes`` guesses, and the hub says whether it reads it."""

MAX_ATTACHMENT_BYTES = 32 * 1024 * 1024
"""A file larger than this is not attached: the hub's own limit on a message
(``PERSONA_AGENT_MAX_MESSAGE_BYTES``) is lower by default, and says so."""

AUDIO_MODES = ("audio/wav", "text/plain")

_DOCUMENT_NAMES = {
    "application/pdf": "PDF",
    "text/markdown": "Markdown",
    "text/csv": "CSV",
    "application/json": "JSON",
    "application/yaml": "YAML",
    "application/xml": "XML",
    "text/xml": "XML",
    "text/html": "HTML",
}
"""Documents by the names people know them by."""


def takes(modes: list[str], media_type: str) -> bool:
    """Whether an agent whose card lists ``modes`` (its input modes) takes ``media_type``;
    a card that lists none says nothing, so it may."""
    family = media_type.split("/", 1)[0]
    return not modes or any(m in (media_type, f"{family}/*", "*/*", "*") for m in modes)


def kind_in_words(media_type: str) -> str:
    """``image/png`` as "an image (PNG)", ``application/pdf`` as "a PDF document"."""
    family, _, subtype = media_type.partition("/")
    if family in ("image", "audio", "video"):
        noun = {"image": "an image", "audio": "a sound file", "video": "a video"}[family]
        return f"{noun} ({subtype.upper()})"
    if media_type in _DOCUMENT_NAMES:
        return f"a {_DOCUMENT_NAMES[media_type]} document"
    return f"a {media_type} file"


def modes_in_words(modes: list[str]) -> str:
    """What an agent takes, from its card's input modes, as a person would say it:
    "text, images and documents (PDF, Markdown, CSV)"."""
    said = ["text"] if any(m in ("text/plain", "text/*", "*/*") for m in modes) else []
    said += ["images"] if any(m.startswith("image/") for m in modes) else []
    said += ["sound"] if any(m.startswith("audio/") for m in modes) else []
    documents = list(dict.fromkeys(_DOCUMENT_NAMES[m] for m in modes if m in _DOCUMENT_NAMES))
    said += [f"documents ({', '.join(documents)})"] if documents else []
    others = [m for m in modes if m not in _DOCUMENT_NAMES and m.split("/")[0] == "application"]
    said += others
    if not said:
        return "text"
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


"""The output modes a chat that saves voice accepts (acceptedOutputModes)."""


MEDIA_COMMANDS = frozenset({"/attach", "/detach", "/voice"})
"""The commands :class:`MediaCommands` carries out."""


class MediaError(Exception):
    """A file that cannot be attached, or voice that cannot be saved: told in one line."""


def media_type_of(path: Path) -> str:
    """The media type the hub is told for ``path``: by its extension."""
    known = MEDIA_TYPES.get(path.suffix.lower())
    if known is not None:
        return known
    guessed, _ = mimetypes.guess_type(path.name)
    return guessed or "application/octet-stream"


def size_text(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count / 1024 / 1024:.1f} MiB"


SCALE_ABOVE = 512 * 1024
"""A picture larger than this (bytes) is scaled down before it is sent, as the console
does: a phone's photo is over the hub's default message size (1 MiB, base64 included)."""
SCALED_SIDE = 1568
"""The longer side it is scaled to: the hub's default ``PERSONA_AGENT_IMAGE_MAX_SIDE``."""


@dataclass(frozen=True)
class Attached:
    """One queued file: where it was, its media type and its bytes (a large picture's
    scaled down: ``original`` is then the file's own size)."""

    path: Path
    media_type: str
    data: bytes
    name: str
    original: int | None = None

    def part(self) -> Part:
        return Part(raw=self.data, media_type=self.media_type, filename=self.name)

    def describe(self) -> str:
        scaled = f", scaled down from {size_text(self.original)}" if self.original else ""
        return f"{self.name} ({self.media_type}, {size_text(len(self.data))}{scaled})"


def _scaled(path: Path, media_type: str, data: bytes) -> Attached:
    """``data`` as attached: a PNG, JPEG or WebP picture over :data:`SCALE_ABOVE` bytes
    scaled to :data:`SCALED_SIDE` (a PNG still large as JPEG), when that makes it smaller."""
    plain = Attached(path, media_type, data, path.name)
    formats = {"image/jpeg": "JPEG", "image/png": "PNG", "image/webp": "WEBP"}
    if media_type not in formats or len(data) <= SCALE_ABOVE:
        return plain
    from PIL import Image, ImageOps  # only for a large picture

    try:
        with Image.open(io.BytesIO(data)) as opened:
            picture = ImageOps.exif_transpose(opened)
            picture.thumbnail((SCALED_SIDE, SCALED_SIDE))
            kind = formats[media_type]
            out = _encoded(picture, kind)
            if len(out) > SCALE_ABOVE and kind != "JPEG":
                kind, out = "JPEG", _encoded(picture.convert("RGB"), "JPEG")
    except (OSError, ValueError, Image.DecompressionBombError):
        return plain  # the hub says what it makes of it
    if len(out) >= len(data):
        return plain
    scaled_type = "image/jpeg" if kind == "JPEG" else media_type
    name = path.name if scaled_type == media_type else f"{path.stem}.jpg"
    return Attached(path, scaled_type, out, name, len(data))


def _encoded(picture: Image, kind: str) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, format=kind, quality=85)
    return buffer.getvalue()


class Attachments:
    """The files queued for the next message, in the order they were attached."""

    def __init__(self) -> None:
        self._files: list[Attached] = []

    def add(self, given: str) -> Attached:
        """Read and queue the file at ``given`` (``~`` expanded).

        Raises:
            MediaError: it is not a readable file, or it is too large.
        """
        path = Path(given).expanduser()
        try:
            if not path.is_file():
                raise MediaError(f"/attach: no file {path}")
            if path.stat().st_size > MAX_ATTACHMENT_BYTES:
                raise MediaError(
                    f"/attach: {path} is {size_text(path.stat().st_size)}, more than "
                    f"{size_text(MAX_ATTACHMENT_BYTES)}"
                )
            data = path.read_bytes()
        except OSError as error:
            raise MediaError(f"/attach: cannot read {path}: {error.strerror or error}") from error
        attached = _scaled(path, media_type_of(path), data)
        self._files.append(attached)
        return attached

    @property
    def files(self) -> tuple[Attached, ...]:
        return tuple(self._files)

    def clear(self) -> int:
        """Forget the queued files; how many there were."""
        count = len(self._files)
        self._files.clear()
        return count

    def take(self) -> list[Part]:
        """The queued files as file parts, the queue emptied (they go with this message)."""
        parts = [attached.part() for attached in self._files]
        self._files.clear()
        return parts

    def restore(self, files: tuple[Attached, ...]) -> None:
        """Queue again, first, the files of a message that was refused."""
        self._files[:0] = files


class VoiceFiles:
    """Where answers' voice is saved: a directory, or nowhere (``None``: voice is not asked
    for)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory

    def use(self, given: str) -> Path:
        """Save voice in ``given`` from now on (made if missing).

        Raises:
            MediaError: the directory cannot be made, or is a file.
        """
        directory = Path(given).expanduser()
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise MediaError(
                f"/voice: cannot use {directory}: {error.strerror or error}"
            ) from error
        self.directory = directory
        return directory

    def save(self, task_id: str, parts: list[Part]) -> list[Path]:
        """Write each audio part of an answer's voice as a file of its own; the files.

        Raises:
            MediaError: a file cannot be written.
        """
        if self.directory is None:
            return []
        stem = (task_id or "answer")[:8]
        saved = []
        for number, part in enumerate(parts, start=1):
            target = self.directory / f"{stem}-{number:02d}{_extension(part.media_type)}"
            try:
                target.write_bytes(part.raw)
            except OSError as error:
                raise MediaError(f"Cannot save the voice in {target}: {error}") from error
            saved.append(target)
        return saved


def voice_files(voice_dir: Path | None) -> VoiceFiles:
    """Where voice is saved from the start: ``--voice-dir``, or nowhere. Exits, saying
    why, when the directory cannot be made."""
    voice = VoiceFiles()
    if voice_dir is not None:
        try:
            voice.use(str(voice_dir))
        except MediaError as error:
            fail(str(error).replace("/voice", "--voice-dir"), 2)
    return voice


def _extension(media_type: str) -> str:
    if media_type in ("audio/wav", "audio/x-wav", "audio/wave"):
        return ".wav"
    return mimetypes.guess_extension(media_type) or ".audio"


class MediaCommands:
    """``/attach [PATH]``, ``/detach`` and ``/voice [DIR|off]``: what the next messages
    carry, and where their answers' voice goes. ``offers_audio()``: whether the agent's card
    says it speaks (audio among its output modes)."""

    def __init__(self, voice: VoiceFiles, card: Callable[[], AgentCard]) -> None:
        self.attachments = Attachments()
        self.voice = voice
        self._card = card

    @property
    def accepted(self) -> tuple[str, ...]:
        """The output modes the next message asks for: audio too while voice is saved."""
        return AUDIO_MODES if self.voice.directory is not None else ()

    def run(self, name: str, argument: str) -> None:
        try:
            if name == "/attach":
                self._attach(argument)
            elif name == "/detach":
                count = self.attachments.clear()
                _note(
                    f"({count} file{'s' if count != 1 else ''} detached)"
                    if count
                    else "(nothing was attached)"
                )
            else:
                self._voice(argument)
        except MediaError as error:
            typer.secho(str(error), fg="red")

    def _attach(self, argument: str) -> None:
        if argument:
            attached = self.attachments.add(argument)
            _note(f"(attached {attached.describe()}: it goes with your next message)")
            self.not_taken((attached,))
            return
        files = self.attachments.files
        card = self._card()
        if not files:
            _note("(nothing attached: /attach PATH attaches a file to your next message)")
        else:
            typer.echo("Attached to your next message:")
            for number, attached in enumerate(files, start=1):
                typer.echo(f"  {number}. {attached.describe()}")
        _note(f"({card.name} takes {modes_in_words(list(card.default_input_modes))})")

    def not_taken(self, files: tuple[Attached, ...]) -> bool:
        """Say which of ``files`` the agent's card says it does not take, and what it does;
        whether there were any."""
        card = self._card()
        modes = list(card.default_input_modes)
        refused = [f for f in files if not takes(modes, f.media_type)]
        for attached in refused:
            typer.secho(
                f"({card.name} does not take {kind_in_words(attached.media_type)} "
                f"({attached.name}): it takes {modes_in_words(modes)}. "
                "/detach forgets the files attached.)",
                fg="yellow",
            )
        return bool(refused)

    def _voice(self, argument: str) -> None:
        if argument == "off":
            self.voice.directory = None
            _note("(voice off: answers are text only)")
        elif argument:
            directory = self.voice.use(argument)
            _note(f"(voice on: each answer's speech is saved as WAV files in {directory})")
            self.warn_silent()
        elif self.voice.directory is None:
            _note("(voice is off: /voice DIR saves each answer's speech as WAV files in DIR)")
        else:
            _note(f"(voice on: saved in {self.voice.directory}; /voice off stops it)")

    def warn_silent(self) -> None:
        """Say so when voice is on and the agent's card offers no audio."""
        modes = self._card().default_output_modes
        if self.voice.directory is not None and not any(m.startswith("audio/") for m in modes):
            _note("(the agent's card offers no audio: its answers may come as text only)")

    def saved(self, task_id: str, audio: list[Part]) -> None:
        """Save an answer's voice, if any came, and say where."""
        if not audio or self.voice.directory is None:
            return
        try:
            files = self.voice.save(task_id, audio)
        except MediaError as error:
            typer.secho(str(error), fg="red")
            return
        names = files[0].name if len(files) == 1 else f"{files[0].name} … {files[-1].name}"
        count = f"{len(files)} WAV file{'s' if len(files) != 1 else ''}"
        _note(f"(voice: {count} in {self.voice.directory}: {names})")


def _note(text: str) -> None:
    typer.secho(text, dim=True)
