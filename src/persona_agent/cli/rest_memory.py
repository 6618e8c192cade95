"""``persona-agent memory ...``: list, export and forget what a running hub's personas
remember of a caller, over its REST API (docs/memory.md, "Managing memory")."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlencode

import typer

from persona_agent.cli.rest_personas import DEFAULT_URL, ApiKey, HubUrl, _call

__all__ = ["memory_app"]

memory_app = typer.Typer(
    name="memory",
    help="What a running hub's personas remember of a caller (the API key's own, by default).",
    no_args_is_help=True,
)

Caller = Annotated[
    str | None,
    typer.Option(
        "--caller",
        help="Whose memory (key:{name}, oidc:{sub}): another caller's needs the scope "
        "memory:admin; on a hub without keys, required",
    ),
]


def _query(**values: str | int | None) -> str:
    given = {name: value for name, value in values.items() if value is not None}
    return f"?{urlencode(given)}" if given else ""


@memory_app.command("list")
def list_command(
    persona_id: str, url: HubUrl = DEFAULT_URL, api_key: ApiKey = None, caller: Caller = None
) -> None:
    """List the caller's memories with a persona, newest first: id, who said it, when,
    and its text (on one line)."""
    before: int | None = None
    while True:
        query = _query(caller=caller, before=before, limit=500)
        page = _call("GET", url, f"/personas/{persona_id}/memories{query}", api_key).json()
        for item in page["items"]:
            text = " ".join(item["text"].split())
            typer.echo(f"{item['id']:>8}  {item['role']:<9}  {item['rememberedAt'][:19]}  {text}")
        before = page["next"]
        if before is None:
            break


@memory_app.command("export")
def export_command(
    persona_id: str,
    url: HubUrl = DEFAULT_URL,
    api_key: ApiKey = None,
    caller: Caller = None,
    format: Annotated[
        Literal["json", "jsonl"],
        typer.Option("--format", help="json: one document; jsonl: one memory a line"),
    ] = "json",
) -> None:
    """Print every memory of the caller's with a persona, oldest first, as the hub exports
    them (redirect to a file to keep them)."""
    query = _query(caller=caller, format=format)
    response = _call("GET", url, f"/personas/{persona_id}/memories/export{query}", api_key)
    typer.echo(response.text, nl=False)


@memory_app.command("forget")
def forget_command(
    url: HubUrl = DEFAULT_URL,
    api_key: ApiKey = None,
    caller: Caller = None,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation")] = False,
) -> None:
    """Forget the caller: delete its memories, conversations and tasks with every persona
    (recorded in the hub's audit log). Asks first, unless --yes."""
    whom = caller or "the API key's caller"
    if not yes:
        typer.confirm(f"Delete everything the hub keeps of {whom}, with every persona?", abort=True)
    gone = _call("DELETE", url, f"/memories{_query(caller=caller)}", api_key).json()
    typer.echo(
        f"Forgot {gone['caller']}: {gone['memories']} memories, {gone['conversations']} "
        f"conversations ({gone['messages']} messages), {gone['tasks']} tasks"
    )
