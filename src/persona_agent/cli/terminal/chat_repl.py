"""The terminal chat's read-eval-print loop: the prompt, its slash commands, and each turn.

The main thread reads each line with ``input()`` (line editing, and Ctrl-C as
``KeyboardInterrupt`` wherever it waits) and hands what talks to the chat's event loop
(:mod:`persona_agent.cli.terminal.chat_loop`): a message is a turn of the A2A session
(:mod:`persona_agent.cli.terminal.a2a_chat`), whose answer Ctrl-C cancels on the agent; a slash
command is carried out here, or by the conversation commands
(:mod:`persona_agent.cli.terminal.chat_branches`) or the media commands
(:mod:`persona_agent.cli.terminal.chat_media`). At the prompt, Ctrl-C or Ctrl-D leaves.

This module imports the SDK and httpx (through the session), so
:mod:`persona_agent.cli.terminal.chat` imports it only when the command runs.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import typer

from persona_agent.cli.terminal.a2a_chat import CANCEL_WAIT, ChatError, ChatSession, greeting
from persona_agent.cli.terminal.chat_branches import COMMANDS, STREAMED, BranchCommands, greetings
from persona_agent.cli.terminal.chat_contexts import ContextMemory
from persona_agent.cli.terminal.chat_loop import ChatLoop
from persona_agent.cli.terminal.chat_media import MEDIA_COMMANDS, Attached, MediaCommands
from persona_agent.cli.terminal.markup import echo_rendered

__all__ = ["ACCEPTED", "HELP", "begin", "introduce", "repl"]

HELP = """\
Commands:
  /help            this help
  /new             start a new conversation
  /persona ID      talk with another persona of the same hub
  /history         the conversation, its messages numbered
  /retry           another answer in place of the last one (the others kept)
  /swipe N         show alternative N of the last answer instead
  /continue        the persona goes on with its last answer
  /edit [N] TEXT   change message N (else the last) to TEXT
  /delete N        delete message N
  /fork [N]        a new conversation up to message N (else the last), continued here
  /greeting [K]    list the persona's greetings; K: open the new conversation with it
  /me NAME [-- DESCRIPTION]   who you are to the persona in this conversation
  /prompt          what reached the model for the last answer, by section
  /attach PATH     attach a file (an image, a document) to your next message
  /attach          list the files attached;  /detach  forgets them
  /voice DIR       save each answer's speech as WAV files in DIR;  /voice off
  /quit, /exit     leave (Ctrl-D too)
Ctrl-C cancels an answer while it is written; at the prompt it leaves.
A line starting with // is sent as a message, without its first /."""

OWN = frozenset({"/help", "/new", "/persona", "/quit", "/exit"})
"""The commands this module carries out itself."""
ACCEPTED = OWN | COMMANDS | MEDIA_COMMANDS
"""Every command the chat takes; any other is answered "Unknown command" (HELP and the
``chat`` command's help name each, tests/cli/test_chat_help.py)."""


def _dim(text: str) -> None:
    typer.secho(text, dim=True)


def introduce(session: ChatSession) -> None:
    """Say who the chat talks with, and where."""
    target = session.target
    hub = target.persona_id is not None and target.hub_url is not None
    where = f"({target.persona_id}) on {target.hub_url}" if hub else f"at {target.card_url}"
    _dim(f"Talking with {session.name} {where}. /help lists the commands.")


def begin(session: ChatSession, memory: ContextMemory, context_id: str | None) -> None:
    """Continue a conversation, or start a new one with the persona's greeting."""
    session.use_context(context_id)
    if context_id is not None:
        memory.put(session.target.key, context_id)
        _dim(f"Continuing conversation {context_id} (/new starts a new one).")
        return
    text = greeting(session.card)
    if text:
        typer.echo(typer.style(f"{session.name}: ", fg="cyan", bold=True), nl=False)
        echo_rendered(text)
    if len(others := greetings(session.card)[1:]) > 0:
        _dim(f"({len(others) + 1} greetings: /greeting lists them, /greeting K chooses one)")


def repl(
    loop: ChatLoop,
    session: ChatSession,
    memory: ContextMemory,
    branches: BranchCommands,
    media: MediaCommands,
) -> None:
    """Read lines until the user leaves (``/quit``, Ctrl-D, or Ctrl-C at the prompt)."""
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history at the prompt)
    while True:
        try:
            line = input("you> ").strip()
        except (EOFError, KeyboardInterrupt):
            typer.echo()
            return
        if line.startswith("/") and not line.startswith("//"):
            if not _command(loop, session, memory, branches, media, line):
                return
        elif line:
            _turn(loop, session, branches, media, line.removeprefix("/"))


def _command(
    loop: ChatLoop,
    session: ChatSession,
    memory: ContextMemory,
    branches: BranchCommands,
    media: MediaCommands,
    line: str,
) -> bool:
    """Carry out a slash command; ``False`` to leave."""
    name, _, argument = line.partition(" ")
    argument = argument.strip()
    target = session.target
    if name not in ACCEPTED:
        typer.echo(f"Unknown command {name}: /help lists them.")
    elif name in ("/quit", "/exit"):
        return False
    elif name == "/help":
        typer.echo(HELP)
    elif name in COMMANDS:
        _branch(loop, branches, name, argument)
    elif name in MEDIA_COMMANDS:
        media.run(name, argument)
    elif name == "/new":
        memory.put(target.key, None)
        branches.reset()
        _dim("A new conversation.")
        begin(session, memory, None)
    elif name == "/persona" and argument:
        try:
            loop.run(session.connect(target.switched(argument)))
        except ChatError as error:
            typer.secho(str(error), fg="red")
            return True
        introduce(session)
        branches.reset()
        begin(session, memory, memory.get(session.target.key))
    else:  # /persona with no id
        typer.echo("/persona ID: which persona?")
    return True


def _branch(loop: ChatLoop, branches: BranchCommands, name: str, argument: str) -> None:
    """A conversation command (:mod:`persona_agent.cli.terminal.chat_branches`); Ctrl-C cancels
    it: the request is closed, and a streamed answer (``/retry``, ``/continue``: a task of
    the hub's) is canceled by the hub when its stream closes. A change the hub was making
    may have been made: ``/history`` shows it."""
    try:
        with keys_kept():
            loop.run_or_cancel(branches.run(name, argument))
    except ChatError as error:
        typer.secho(str(error), fg="red")
    except KeyboardInterrupt:
        if name in STREAMED:
            typer.secho("(answer canceled)", fg="yellow")  # its line ended as it unwound
        else:
            typer.secho("\n(stopped: /history shows what the hub did)", fg="yellow")


def _turn(
    loop: ChatLoop, session: ChatSession, branches: BranchCommands, media: MediaCommands, text: str
) -> None:
    """One message (with the files attached) and its answer, its voice saved; Ctrl-C while
    it is written cancels it."""
    metadata = branches.first_message_metadata()  # a new one's greeting, who the user is
    attached = media.attachments.files
    files = media.attachments.take()
    answer = loop.submit(session.send(text, metadata, files, media.accepted))
    try:
        with keys_kept():
            sent = answer.result()
        media.saved(sent.task_id, sent.audio)
    except KeyboardInterrupt:
        _cancel(loop, session, answer)
    except ChatError as error:
        typer.secho(str(error), fg="red")
        _keep(text, attached, media)
    else:
        if sent.refused:
            _keep(text, attached, media)


def _keep(text: str, attached: tuple[Attached, ...], media: MediaCommands) -> None:
    """A refused message is not lost: its files stay attached (those the agent does not
    take named, with what it takes), and its text is offered at the next prompt."""
    media.attachments.restore(attached)
    media.not_taken(attached)
    count = len(attached)
    files = f"; {count} file{'s' if count != 1 else ''} still attached" if count else ""
    if offer_again(text):
        _dim(f"(your message is kept{files}: it is on the prompt again, Enter sends it)")
    else:
        _dim(f"(your message was not sent{files})")


@contextlib.contextmanager
def keys_kept() -> Iterator[None]:
    """While an answer is written, the keys typed are not echoed into it: they wait in the
    terminal, unread, and the next prompt shows them as typed (Ctrl-C still cancels)."""
    try:
        import termios
    except ImportError:  # Windows
        yield
        return
    try:
        descriptor = sys.stdin.fileno()
        before = termios.tcgetattr(descriptor)
    except (termios.error, OSError, ValueError):  # not a terminal: a pipe, a file
        yield
        return
    quiet = [*before]
    quiet[3] = before[3] & ~termios.ECHO
    termios.tcsetattr(descriptor, termios.TCSANOW, quiet)  # TCSANOW: typed keys are kept
    try:
        yield
    finally:
        termios.tcsetattr(descriptor, termios.TCSANOW, before)


def offer_again(text: str) -> bool:
    """Put ``text`` on the next prompt, to edit or send again (with readline: a terminal);
    whether it could."""
    if not sys.stdin.isatty():
        return False
    try:
        import readline
    except ImportError:
        return False

    def put() -> None:
        readline.insert_text(text)
        readline.set_startup_hook(None)  # once

    readline.set_startup_hook(put)
    return True


def _cancel(loop: ChatLoop, session: ChatSession, answer: concurrent.futures.Future[Any]) -> None:
    """Ask the agent to cancel the answer (CancelTask); it then ends the answer's stream as
    canceled, which the answer prints. An agent that does not (or a second Ctrl-C) is left
    to itself: the chat stops reading the answer."""
    try:
        loop.run(session.cancel())
        answer.result(timeout=CANCEL_WAIT)
        return
    except ChatError as error:
        typer.secho(str(error), fg="red")
    except (concurrent.futures.TimeoutError, KeyboardInterrupt):
        pass
    answer.cancel()
    typer.secho("(stopped reading the answer)", fg="yellow")
