"""How the terminal chat prints one answer as its A2A events stream in.

The answer's text as it is written, a tool call or a consulted persona's progress on a line
of its own, a panel member's answer whole under its name, and how the turn ended (failed,
canceled, waiting for the user); its ``voice`` artifact's audio is kept, never printed.
Any A2A agent's events read the same way; this hub's data parts add what they say
(:mod:`persona_agent.cli.terminal.chat_parts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import typer
from a2a.types.a2a_pb2 import Message, Part, StreamResponse, Task, TaskState

from persona_agent.cli.terminal.chat_parts import (
    from_demo_model,
    kind_of,
    progress_of,
    remembered_line,
)
from persona_agent.cli.terminal.markup import AnswerWriter, echo_rendered
from persona_agent.cli.terminal.waiting import WaitingLine

__all__ = ["VOICE_ARTIFACT", "AnswerPrinter"]

_ENDED = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
    TaskState.TASK_STATE_INPUT_REQUIRED,
    TaskState.TASK_STATE_AUTH_REQUIRED,
}
"""The states a turn ends in: terminal, or waiting for the user."""
VOICE_ARTIFACT = "voice"
"""The artifact of an answer's speech, beside ``answer`` (docs/media.md)."""


@dataclass
class AnswerPrinter:
    """Prints one turn as it comes: the answer's text chunks as they stream, a tool call on
    a line of its own, and how the turn ended.

    An answer may come as streamed artifact chunks (this hub), as a task holding its
    artifacts (an agent that does not stream), as the final status's message, or as a
    message instead of a task: each is printed once.
    """

    name: str
    streamed: set[str] = field(default_factory=set)
    """The artifacts already printed, chunk by chunk or whole."""
    text_shown: bool = False
    at_line_start: bool = True
    state: TaskState = TaskState.TASK_STATE_UNSPECIFIED
    status_text: str = ""
    progress_of: str = ""
    """The tool whose progress (a consulted persona's answer) is being printed."""
    held: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Artifacts named otherwise than ``answer`` (a panel member's), by id: their name and
    text so far, printed whole under the name once complete (members answer at once)."""
    waiting: WaitingLine = field(default_factory=WaitingLine)
    """What happens before anything else is printed, and for how long."""
    demo_model: bool = False
    """The answer came from the hub's embedded demo model (its cost-v1 says so)."""
    remembered: str = ""
    """What memory did for the answer, on one line (its memory-v1 data), or ''."""
    audio: list[Part] = field(default_factory=list)
    """The audio parts of the answer's ``voice`` artifact, in order (never printed)."""
    writer: AnswerWriter = field(default_factory=AnswerWriter)
    """The answer's text as the terminal can show it (``*actions*`` in italics, say)."""

    def show(self, event: StreamResponse) -> None:
        if event.HasField("artifact_update"):
            update = event.artifact_update
            artifact = update.artifact
            self.streamed.add(artifact.artifact_id)
            if artifact.name == VOICE_ARTIFACT:
                self.audio.extend(p for p in artifact.parts if p.HasField("raw"))
                return
            piece = "".join(p.text for p in artifact.parts if p.HasField("text"))
            if artifact.name and artifact.name != "answer":
                name, text = self.held.get(artifact.artifact_id, (artifact.name, ""))
                self.held[artifact.artifact_id] = (name, text + piece if update.append else piece)
                if update.last_chunk:
                    self.named(*self.held.pop(artifact.artifact_id))
            else:
                self.text(piece)
        elif event.HasField("status_update"):
            self.status(event.status_update.status.state, event.status_update.status.message)
        elif event.HasField("task"):
            self.task(event.task)
        elif event.HasField("message"):
            self.text(_text(event.message))
            self.demo_model = self.demo_model or from_demo_model(event.message)
            self.state = TaskState.TASK_STATE_COMPLETED

    def task(self, task: Task) -> None:
        for artifact in task.artifacts:
            if artifact.artifact_id not in self.streamed:
                self.streamed.add(artifact.artifact_id)
                if artifact.name == VOICE_ARTIFACT:
                    self.audio.extend(p for p in artifact.parts if p.HasField("raw"))
                    continue
                text = "".join(p.text for p in artifact.parts if p.HasField("text"))
                if artifact.name and artifact.name != "answer":
                    self.named(artifact.name, text)
                else:
                    self.text(text)
        self.status(task.status.state, task.status.message)

    def named(self, name: str, text: str) -> None:
        """A whole answer of a panel's member, under its name."""
        if text:
            self.waiting.clear()
            self.aside(f"== {name}", fg=typer.colors.CYAN)
            echo_rendered(text.rstrip("\n"))
            self.text_shown = True

    def status(self, state: TaskState, message: Message) -> None:
        self.state = state
        self.status_text = _text(message)
        if kind_of(message) == "progress":  # the model loading, waiting, reading
            self.waiting.set(self.status_text[:1].lower() + self.status_text[1:])
            self.status_text = ""
            return
        self.demo_model = self.demo_model or from_demo_model(message)
        self.remembered = remembered_line(message) or self.remembered
        progress = progress_of(message)
        if progress:  # a consulted persona's answer, streamed: dim, inline
            if progress != self.progress_of:
                self.aside(f"[{progress}:]", fg=None, dim=True)
                self.progress_of = progress
            _echo(self.status_text, dim=True)
            self.at_line_start = self.status_text.endswith("\n")
            return
        self.progress_of = ""
        if state == TaskState.TASK_STATE_WORKING and self.status_text:
            self.aside(f"[{self.status_text}]", fg=None, dim=True)  # a tool call, say

    def text(self, text: str) -> None:
        if not text:
            return
        self.waiting.clear()
        if self.at_line_start:
            _echo(f"{self.name}: ", fg=typer.colors.CYAN, bold=True)
        self.writer.write(text)
        self.text_shown = True
        self.at_line_start = text.endswith("\n")

    def aside(self, text: str, fg: str | None, dim: bool = False) -> None:
        """A line of its own, not part of the answer."""
        self.waiting.clear()
        self.writer.end()
        if not self.at_line_start:
            _echo("\n")
        _echo(text, fg=fg, dim=dim)
        _echo("\n")
        self.at_line_start = True

    def finish(self) -> None:
        """Print how the turn ended, after its last event."""
        self.waiting.clear()
        for name, text in self.held.values():  # members cut short (a failure, a cancel)
            self.named(name, text)
        self.held.clear()
        state = self.state
        if state == TaskState.TASK_STATE_COMPLETED and not self.text_shown:
            self.text(self.status_text or "(an empty answer)")
        if state in (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED):
            self.text(self.status_text)
        self.writer.end()
        if not self.at_line_start:
            _echo("\n")
            self.at_line_start = True
        if self.remembered:
            self.aside(self.remembered, fg=None, dim=True)
        if state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED):
            word = "failed" if state == TaskState.TASK_STATE_FAILED else "was rejected"
            reason = f": {self.status_text}" if self.status_text else ""
            self.aside(f"The answer {word}{reason}", fg=typer.colors.RED)
        elif state == TaskState.TASK_STATE_CANCELED:
            self.aside("(answer canceled)", fg=typer.colors.YELLOW)
        elif state == TaskState.TASK_STATE_AUTH_REQUIRED:
            self.aside("(the agent needs authorization to go on)", fg=typer.colors.YELLOW)
        elif state not in _ENDED:
            self.aside("(the answer's stream ended before the answer did)", fg="yellow")


def _text(message: Message) -> str:
    return "".join(part.text for part in message.parts if part.HasField("text"))


def _echo(text: str, fg: str | None = None, *, bold: bool = False, dim: bool = False) -> None:
    """Write at once (click flushes); styles only on a terminal (click strips them else)."""
    styled = typer.style(text, fg=fg, bold=bold, dim=dim) if fg or bold or dim else text
    typer.echo(styled, nl=False)
