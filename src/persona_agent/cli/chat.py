"""``persona-agent chat``: talk with a persona, or with any A2A agent, in the terminal.

The terminal belongs to the main thread: it reads each line with ``input()`` (line
editing, and Ctrl-C as ``KeyboardInterrupt`` wherever it waits). Everything that talks
runs on an event loop in a thread of its own (:class:`_Loop`): the A2A client, and the
hub itself when the chat starts one in this process, so the hub keeps serving while the
prompt waits. An answer is a coroutine the main thread waits for; Ctrl-C while it waits
asks the agent to cancel it (:mod:`persona_agent.cli.a2a_chat`).

The SDK, httpx, uvicorn and the hub are imported when the command runs, not with this
module: :mod:`persona_agent.cli.commands` imports it, and ``persona-agent --help``
need not wait for them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import socket
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from persona_agent.cli.chat_contexts import CONTEXTS_FILE, ContextMemory
from persona_agent.cli.command_settings import command_settings, fail
from persona_agent.settings import Settings

if TYPE_CHECKING:
    import uvicorn

    from persona_agent.cli.a2a_chat import ChatSession
    from persona_agent.cli.chat_branches import BranchCommands
    from persona_agent.cli.chat_media import MediaCommands

__all__ = ["chat"]

T = TypeVar("T")

HUB_LOG_FILE = "chat-hub.log"
"""In the data directory: the log of the hub a chat starts in its process."""
EMBEDDED = "embedded"
"""The remembered contexts' name for the hub started in this process (its port changes)."""

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
  /attach PATH     attach a file (an image, a document) to your next message
  /attach          list the files attached;  /detach  forgets them
  /voice DIR       save each answer's speech as WAV files in DIR;  /voice off
  /quit            leave (Ctrl-D too)
Ctrl-C cancels an answer while it is written; at the prompt it leaves.
A line starting with // is sent as a message, without its first /."""


class _Loop:
    """An event loop running on a thread of its own while the chat lasts."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chat", daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait for it; Ctrl-C interrupts the wait."""
        return self.submit(coroutine).result(timeout)

    def close(self) -> None:
        """Cancel what still runs (an abandoned answer), then stop the loop and its thread."""
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            self.run(_cancel_others(), timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()


async def _cancel_others() -> None:
    others = asyncio.all_tasks() - {asyncio.current_task()}
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


@contextlib.contextmanager
def _running_loop() -> Iterator[_Loop]:
    loop = _Loop()
    try:
        yield loop
    finally:
        loop.close()


class _EmbeddedHub:
    """The hub on the settings of ``serve``, served on a free loopback port of this
    process while the chat lasts; its log goes to a file in the data directory, not
    between the lines of the chat."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.log_file = settings.data_dir / HUB_LOG_FILE
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self, loop: _Loop) -> str:
        """Start the hub; its base URL. Exits, saying why, if it cannot start."""
        _dim(f"starting the hub... (its log: {self.log_file})")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        settings = self.settings.model_copy(
            update={"host": "127.0.0.1", "port": sock.getsockname()[1], "public_base_url": url}
        )
        self._log_to_file(settings)
        import uvicorn

        from persona_agent.api.app import create_app
        from persona_agent.errors import ConfigError, PersonaFileError

        try:
            application = create_app(settings)
        except (ConfigError, PersonaFileError) as error:
            sock.close()
            fail(f"Cannot start the hub: {error}")
        config = uvicorn.Config(
            application,
            lifespan="on",
            log_config=None,  # the hub's redacting logging, to the file
            timeout_graceful_shutdown=max(1, int(settings.shutdown_grace_seconds)),
        )
        self._server = uvicorn.Server(config)
        if not loop.run(self._serve(self._server, sock)):
            fail(f"The hub did not start: see its log, {self.log_file}")
        return url

    async def _serve(self, server: uvicorn.Server, sock: socket.socket) -> bool:
        """Whether the server started (its start-up, the lifespan, may have failed)."""
        self._task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if self._task.done():
                if (error := self._task.exception()) is not None:
                    logging.getLogger(__name__).error("The hub stopped", exc_info=error)
                return False
            await asyncio.sleep(0.02)
        return True

    async def stop(self) -> None:
        """Stop the hub, its lifespan's shutdown included."""
        if self._server is None or self._task is None or self._task.done():
            return
        self._server.should_exit = True
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            async with asyncio.timeout(self.settings.shutdown_grace_seconds + 5):
                await self._task

    def _log_to_file(self, settings: Settings) -> None:
        from persona_agent.cli.secrets import configured_secrets
        from persona_agent.observe.logs import configure_logging

        root = logging.getLogger()
        try:
            configure_logging(
                settings.log_level, configured_secrets(settings, os.environ), settings.log_format
            )
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            to_file = logging.FileHandler(self.log_file, encoding="utf-8")
        except (ValueError, OSError) as error:
            fail(f"Cannot start the hub: its log: {error}")
        for handler in list(root.handlers):  # the one configure_logging set, to stderr
            to_file.setFormatter(handler.formatter)
            root.removeHandler(handler)
        root.addHandler(to_file)


def _dim(text: str) -> None:
    typer.secho(text, dim=True)


PersonaArgument = Annotated[
    str | None,
    typer.Argument(help="The persona to talk with (omit it with --agent)", show_default=False),
]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="PERSONA_AGENT_URL",
        show_envvar=True,
        help="Base URL of a running hub (http://host:port); without it, the chat "
        "starts a hub in its own process",
        show_default=False,
    ),
]
AgentOption = Annotated[
    str | None,
    typer.Option(
        "--agent",
        help="Any A2A agent instead of a persona: the URL of its agent card, its base URL "
        "(card at /.well-known/agent-card.json), or an AI Catalog's (URL#name picks one)",
        show_default=False,
    ),
]
ContextOption = Annotated[
    str | None,
    typer.Option(
        "--context", help="Continue this conversation (its A2A contextId)", show_default=False
    ),
]
NewOption = Annotated[
    bool, typer.Option("--new", help="Start a new conversation, not the last one")
]
PersonasDirOption = Annotated[
    Path | None,
    typer.Option(
        "--personas-dir",
        "-d",
        help="Persona directory of the hub the chat starts (without --url); "
        "default: PERSONA_AGENT_PERSONAS_DIR or ./personas",
        show_default=False,
    ),
]
VoiceDirOption = Annotated[
    Path | None,
    typer.Option(
        "--voice-dir",
        help="Ask for spoken answers and save each one's speech as WAV files in this "
        "directory (/voice DIR in the chat)",
        show_default=False,
    ),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar="PERSONA_AGENT_API_KEY",
        show_envvar=True,
        help="API key (sent as a Bearer token), if the hub or agent requires one",
        show_default=False,
    ),
]


def chat(
    persona_id: PersonaArgument = None,
    url: UrlOption = None,
    agent: AgentOption = None,
    context: ContextOption = None,
    new: NewOption = False,
    personas_dir: PersonasDirOption = None,
    api_key: ApiKeyOption = None,
    voice_dir: VoiceDirOption = None,
) -> None:
    """Chat with a persona in the terminal, over A2A; answers stream as they are written.

    chat ID: the persona of a hub started in this process, on the settings of serve (with
    no LLM configured, the embedded model; its log goes to chat-hub.log in the data
    directory).

    chat ID --url http://host:port: the persona of a hub that is running.

    chat --agent URL: any A2A agent, by its card's URL, its base URL, or an AI Catalog.

    The conversation goes on across runs: the last one with each persona of each hub is
    remembered in the data directory (PERSONA_AGENT_DATA_DIR, chat-contexts.json). --new
    starts a new one; --context ID continues any.

    In the chat: /help, /new, /persona ID, /quit; and on the conversation with a persona:
    /history (numbered), /retry, /swipe N, /continue, /edit [N] TEXT, /delete N, /fork [N],
    /greeting K, /me NAME [-- DESCRIPTION]; /attach PATH (a file for the next message),
    /attach, /detach, /voice DIR, /voice off. Ctrl-C cancels an answer while it is written; at
    the prompt, Ctrl-C or Ctrl-D leaves. See docs/chat.md.
    """
    if agent is not None and (persona_id is not None or url is not None):
        fail("--agent names the agent to talk with: give it without a persona id or --url", 2)
    if agent is None and persona_id is None:
        fail("name a persona (persona-agent chat socrates) or an agent (--agent URL)", 2)
    if context is not None and new:
        fail("--context continues a conversation and --new starts one: give only one", 2)
    settings = command_settings(personas_dir=personas_dir)
    memory = ContextMemory(settings.data_dir / CONTEXTS_FILE)
    with _running_loop() as loop:
        try:
            _chat(loop, settings, memory, persona_id, url, agent, context, new, api_key, voice_dir)
        except KeyboardInterrupt:  # while starting; at the prompt, the chat ends by itself
            typer.echo()
            raise typer.Exit(130) from None


def _chat(
    loop: _Loop,
    settings: Settings,
    memory: ContextMemory,
    persona_id: str | None,
    url: str | None,
    agent: str | None,
    context: str | None,
    new: bool,
    api_key: str | None,
    voice_dir: Path | None,
) -> None:
    import httpx

    from persona_agent.cli.a2a_chat import TIMEOUT, ChatError, ChatSession, Target
    from persona_agent.cli.chat_branches import BranchCommands
    from persona_agent.cli.chat_catalog import agent_target, catalog_limits
    from persona_agent.cli.chat_media import MediaCommands, voice_files

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    http = httpx.AsyncClient(timeout=TIMEOUT, headers=headers)
    session = ChatSession(http, lambda t, context_id: memory.put(t.key, context_id))
    branches = BranchCommands(http, session, lambda c: memory.put(session.target.key, c))
    media = MediaCommands(voice_files(voice_dir), lambda: session.card)
    hub = None
    try:
        if agent is not None:
            target = agent_target(loop.run, http, agent, catalog_limits(settings))
        elif url is not None:
            target = Target.hub_persona(url, persona_id or "")
        else:
            hub = _EmbeddedHub(settings)
            target = Target.hub_persona(hub.start(loop), persona_id or "", hub_key=EMBEDDED)
        try:
            loop.run(session.connect(target))
        except ChatError as error:
            fail(str(error))
        _introduce(session)
        if context is None and not new:
            context = memory.get(target.key)
        _begin(session, memory, context)
        media.warn_silent()
        _repl(loop, session, memory, branches, media)
    finally:
        for closing in (session.close(), http.aclose()):
            with contextlib.suppress(Exception):  # leaving: nothing left to tell
                loop.run(closing, timeout=5)
        if hub is not None:
            loop.run(hub.stop())


def _introduce(session: ChatSession) -> None:
    target = session.target
    hub = target.persona_id is not None and target.hub_url is not None
    where = f"({target.persona_id}) on {target.hub_url}" if hub else f"at {target.card_url}"
    _dim(f"Talking with {session.name} {where}. /help lists the commands.")


def _begin(session: ChatSession, memory: ContextMemory, context_id: str | None) -> None:
    """Continue a conversation, or start a new one with the persona's greeting."""
    from persona_agent.cli.a2a_chat import greeting

    session.use_context(context_id)
    if context_id is not None:
        memory.put(session.target.key, context_id)
        _dim(f"Continuing conversation {context_id} (/new starts a new one).")
        return
    from persona_agent.cli.chat_branches import greetings

    text = greeting(session.card)
    if text:
        typer.echo(typer.style(f"{session.name}: ", fg="cyan", bold=True) + text)
    if len(others := greetings(session.card)[1:]) > 0:
        _dim(f"({len(others) + 1} greetings: /greeting lists them, /greeting K chooses one)")


def _repl(
    loop: _Loop,
    session: ChatSession,
    memory: ContextMemory,
    branches: BranchCommands,
    media: MediaCommands,
) -> None:
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
    loop: _Loop,
    session: ChatSession,
    memory: ContextMemory,
    branches: BranchCommands,
    media: MediaCommands,
    line: str,
) -> bool:
    """Carry out a slash command; ``False`` to leave."""
    from persona_agent.cli.a2a_chat import ChatError
    from persona_agent.cli.chat_branches import COMMANDS
    from persona_agent.cli.chat_media import MEDIA_COMMANDS

    name, _, argument = line.partition(" ")
    argument = argument.strip()
    target = session.target
    if name in ("/quit", "/exit"):
        return False
    if name == "/help":
        typer.echo(HELP)
    elif name in COMMANDS:
        _branch(loop, branches, name, argument)
    elif name in MEDIA_COMMANDS:
        media.run(name, argument)
    elif name == "/new":
        memory.put(target.key, None)
        branches.reset()
        _dim("A new conversation.")
        _begin(session, memory, None)
    elif name == "/persona" and argument:
        try:
            loop.run(session.connect(target.switched(argument)))
        except ChatError as error:
            typer.secho(str(error), fg="red")
            return True
        _introduce(session)
        branches.reset()
        _begin(session, memory, memory.get(session.target.key))
    elif name == "/persona":
        typer.echo("/persona ID: which persona?")
    else:
        typer.echo(f"Unknown command {name}: /help lists them.")
    return True


def _branch(loop: _Loop, branches: BranchCommands, name: str, argument: str) -> None:
    """A conversation command (:mod:`persona_agent.cli.chat_branches`); Ctrl-C stops
    waiting for it (the hub finishes what it started)."""
    from persona_agent.cli.a2a_chat import ChatError

    try:
        loop.run(branches.run(name, argument))
    except ChatError as error:
        typer.secho(str(error), fg="red")
    except KeyboardInterrupt:
        typer.secho("\n(stopped waiting: /history shows what the hub did)", fg="yellow")


def _turn(
    loop: _Loop, session: ChatSession, branches: BranchCommands, media: MediaCommands, text: str
) -> None:
    """One message (with the files attached) and its answer, its voice saved; Ctrl-C while
    it is written cancels it."""
    from persona_agent.cli.a2a_chat import ChatError

    metadata = branches.first_message_metadata()  # a new one's greeting, who the user is
    files = media.attachments.take()
    answer = loop.submit(session.send(text, metadata, files, media.accepted))
    try:
        sent = answer.result()
        media.saved(sent.task_id, sent.audio)
    except KeyboardInterrupt:
        _cancel(loop, session, answer)
    except ChatError as error:
        typer.secho(str(error), fg="red")


def _cancel(loop: _Loop, session: ChatSession, answer: concurrent.futures.Future[Any]) -> None:
    """Ask the agent to cancel the answer (CancelTask); it then ends the answer's stream as
    canceled, which the answer prints. An agent that does not (or a second Ctrl-C) is left
    to itself: the chat stops reading the answer."""
    from persona_agent.cli.a2a_chat import CANCEL_WAIT, ChatError

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
