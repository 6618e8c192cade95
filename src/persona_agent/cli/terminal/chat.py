"""``persona-agent chat``: the command, its options, and the chat's parts put together.

A chat is three parts, each in a module of its own: the event loop on a thread of its own
that runs everything that talks (:mod:`persona_agent.cli.terminal.chat_loop`), the hub the
chat starts in its process when it is given no ``--url``
(:mod:`persona_agent.cli.terminal.embedded_hub`),
and the prompt the main thread keeps, its commands and turns
(:mod:`persona_agent.cli.terminal.chat_repl`), over the chat's A2A client
(:mod:`persona_agent.cli.terminal.a2a_chat`).

The SDK, httpx, uvicorn and the hub are imported when the command runs, not with this
module: :mod:`persona_agent.cli.commands` imports it, and ``persona-agent --help``
need not wait for them.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from persona_agent.cli.command_settings import command_settings, fail
from persona_agent.cli.terminal.chat_contexts import CONTEXTS_FILE, ContextMemory
from persona_agent.cli.terminal.chat_loop import ChatLoop, running_loop
from persona_agent.settings import Settings

if TYPE_CHECKING:
    import httpx

__all__ = ["chat"]

EMBEDDED = "embedded"
"""The remembered contexts' name for the hub started in this process (its port changes)."""

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

    In the chat: /help, /new, /persona ID, /quit (or /exit); and on the conversation with a
    persona: /history (numbered), /retry, /swipe N, /continue, /edit [N] TEXT, /delete N,
    /fork [N], /greeting K, /me NAME [-- DESCRIPTION], /prompt (what reached the model for
    the last answer); /attach PATH (a file for the next message), /attach, /detach, /voice
    DIR, /voice off. Ctrl-C cancels an answer while it is written; at the prompt, Ctrl-C or
    Ctrl-D leaves. See docs/chat.md.
    """
    if agent is not None and (persona_id is not None or url is not None):
        fail("--agent names the agent to talk with: give it without a persona id or --url", 2)
    if agent is None and persona_id is None:
        fail("name a persona (persona-agent chat socrates) or an agent (--agent URL)", 2)
    if context is not None and new:
        fail("--context continues a conversation and --new starts one: give only one", 2)
    settings = command_settings(personas_dir=personas_dir)
    memory = ContextMemory(settings.data_dir / CONTEXTS_FILE)
    with running_loop() as loop:
        try:
            _chat(loop, settings, memory, persona_id, url, agent, context, new, api_key, voice_dir)
        except KeyboardInterrupt:  # while starting; at the prompt, the chat ends by itself
            typer.echo()
            raise typer.Exit(130) from None


def anonymous_memory(name: str) -> str:
    """What memory does for a caller the hub cannot tell from another (docs/memory.md)."""
    return (
        f"(memory is on, but the hub does not know who you are (no API key): {name} "
        "remembers within this conversation only; /new starts with nothing remembered)"
    )


async def remembers_anonymously(http: httpx.AsyncClient, hub_url: str) -> bool:
    """Whether the hub at ``hub_url`` has memory on and takes this chat's caller for
    anonymous (``GET /api/v1/memory``: ``{on, caller}``). A hub that does not say (an older
    one, a refusal, no answer) is taken not to: the chat says nothing of memory."""
    import httpx

    try:
        response = await http.get(f"{hub_url.rstrip('/')}/api/v1/memory")
        state = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return False
    return isinstance(state, dict) and state.get("on") is True and state.get("caller") is None


def _chat(
    loop: ChatLoop,
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

    from persona_agent.cli.terminal.a2a_chat import TIMEOUT, ChatError, ChatSession, Target
    from persona_agent.cli.terminal.chat_branches import BranchCommands
    from persona_agent.cli.terminal.chat_catalog import agent_target, catalog_limits
    from persona_agent.cli.terminal.chat_media import MediaCommands, voice_files
    from persona_agent.cli.terminal.chat_repl import begin, introduce, repl
    from persona_agent.cli.terminal.embedded_hub import EmbeddedHub

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
            hub = EmbeddedHub(settings)
            typer.secho(f"starting the hub... (its log: {hub.log_file})", dim=True)
            target = Target.hub_persona(hub.start(loop), persona_id or "", hub_key=EMBEDDED)
        try:
            loop.run(session.connect(target))
        except ChatError as error:
            fail(str(error))
        introduce(session)
        if target.hub_url is not None and loop.run(remembers_anonymously(http, target.hub_url)):
            typer.secho(anonymous_memory(session.name), dim=True)
        if context is None and not new:
            context = memory.get(target.key)
        begin(session, memory, context)
        media.warn_silent()
        repl(loop, session, memory, branches, media)
    finally:
        for closing in (session.close(), http.aclose()):
            with contextlib.suppress(Exception):  # leaving: nothing left to tell
                loop.run(closing, timeout=5)
        if hub is not None:
            loop.run(hub.stop())
