"""``chat --agent URL`` when URL is an AI Catalog: its A2A agents listed, one chosen.

``--agent https://host/.well-known/ai-catalog.json`` lists the catalog's agents (name and
description, numbered) and asks which one; ``--agent URL#name`` chooses without asking (a
name, identifier or display name of the catalog's, any case), for scripts. A signed
catalog is verified first (against the key set at its origin) and refused when it does
not verify. The catalog is read within the hub's catalog limits (``PERSONA_AGENT_CATALOG_*``:
bytes, nesting, entries, time); its entries that cannot be used are named on standard
error and left out. A URL that is no catalog is an agent's card or base URL, as before.

This module imports httpx and the SDK, so :mod:`persona_agent.cli.terminal.chat` imports it only
when the command runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import typer
from a2a.client.card_resolver import parse_agent_card
from google.protobuf.json_format import ParseError

from persona_agent.a2a.discovery.catalog_reader import (
    DEFAULT_CATALOG_LIMITS,
    Catalog,
    CatalogAgent,
    CatalogError,
    CatalogLimits,
    choose_agent,
    is_catalog,
    open_catalog,
    read_document,
)
from persona_agent.cli.command_settings import fail
from persona_agent.cli.terminal.a2a_chat import Target
from persona_agent.settings import Settings

__all__ = ["agent_target", "catalog_limits"]

T = TypeVar("T")
Run = Callable[[Coroutine[Any, Any, T]], T]


def catalog_limits(settings: Settings) -> CatalogLimits:
    """The settings' limits on reading a catalog."""
    return CatalogLimits(
        max_bytes=settings.catalog_max_bytes,
        max_depth=settings.catalog_max_depth,
        max_entries=settings.catalog_max_entries,
        seconds=settings.catalog_read_seconds,
    )


def agent_target(
    run: Run[Any],
    http: httpx.AsyncClient,
    url: str,
    limits: CatalogLimits = DEFAULT_CATALOG_LIMITS,
) -> Target:
    """The agent ``--agent URL`` names: one of a catalog's (chosen by ``#name`` or by the
    user), or the agent whose card or base URL it is. A catalog that cannot be used ends
    the command with its reason."""
    location, _, wanted = url.partition("#")
    try:
        catalog: Catalog | None = run(_catalog(http, location, bool(wanted), limits))
    except CatalogError as error:
        fail(str(error))
    if catalog is None:
        return Target.agent(url)
    for skipped in catalog.skipped:
        typer.secho(f"The AI Catalog's entry {skipped}: left out", fg="yellow", err=True)
    if not catalog.agents:
        fail(f"The AI Catalog at {location} lists no A2A agents")
    try:
        agent = choose_agent(catalog, wanted) if wanted else _ask(catalog)
    except CatalogError as error:
        fail(str(error))
    if agent.card is None:
        return Target.agent(agent.url or agent.identifier)
    try:
        card = parse_agent_card(agent.card)
    except (ValueError, ParseError) as error:
        fail(f"The AI Catalog's card of {agent.display_name} cannot be used: {error}")
    return Target(agent.identifier, card=card)


async def _catalog(
    http: httpx.AsyncClient, url: str, named: bool, limits: CatalogLimits
) -> Catalog | None:
    """The catalog at ``url``; None when it is none (and no ``#name`` said it must be).

    Raises:
        CatalogError: it is one (or must be) and cannot be used, or it is over a limit.
    """
    if not named and not urlsplit(url).path.endswith(".json"):
        return None  # an agent's base URL
    try:
        async with asyncio.timeout(limits.seconds):
            try:
                document = await read_document(
                    http, url, "The AI Catalog", "application/json", limits
                )
            except CatalogError as error:
                if named or "is refused" in str(error):  # over a limit: never read further
                    raise
                return None  # a card, or an error the card's reading will tell
            if not is_catalog(document):
                if named:
                    raise CatalogError(
                        f"{url} is not an AI Catalog (#name chooses an agent of one)"
                    )
                return None
            return await open_catalog(http, url, document, limits=limits)
    except TimeoutError:
        raise CatalogError(
            f"The AI Catalog {url} was not read within {limits.seconds:g} s "
            "(PERSONA_AGENT_CATALOG_READ_SECONDS)"
        ) from None


def _ask(catalog: Catalog) -> CatalogAgent:
    verified = " (signature verified)" if catalog.signed else ""
    typer.echo(f"The AI Catalog at {catalog.url}{verified} lists:")
    for number, agent in enumerate(catalog.agents, start=1):
        about = " ".join(agent.description.split())
        about = f": {about[:97]}..." if len(about) > 100 else f": {about}" if about else ""
        typer.echo(f"  {number}. {agent.display_name} ({agent.name}){about}")
    while True:
        answer = typer.prompt("Talk with (number or name)").strip()
        if answer.isdigit() and 1 <= int(answer) <= len(catalog.agents):
            return catalog.agents[int(answer) - 1]
        try:
            return choose_agent(catalog, answer)
        except CatalogError as error:
            typer.secho(str(error), fg=typer.colors.RED, err=True)
