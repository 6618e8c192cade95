"""``persona-agent personas ...``: manage the personas of a running hub over its REST API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    import httpx

__all__ = ["personas_app"]

personas_app = typer.Typer(
    name="personas",
    help="Manage the personas of a running hub through its REST API (/api/v1).",
    no_args_is_help=True,
)

HubUrl = Annotated[
    str,
    typer.Option(
        "--url", envvar="PERSONA_AGENT_URL", help="Base URL of the running hub", show_envvar=True
    ),
]
ApiKey = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar="PERSONA_AGENT_API_KEY",
        help="API key, if the hub requires one",
        show_envvar=True,
    ),
]
IfMatch = Annotated[
    str | None,
    typer.Option("--if-match", help="Only if the persona is still at this version (ETag)"),
]
AsJson = Annotated[
    bool, typer.Option("--json", help="Print the persona's whole document as JSON instead")
]
DEFAULT_URL = "http://127.0.0.1:8000"
FILE_MEDIA_TYPES = {
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".json": "application/json",
}
"""The body's type of ``update``'s file (PUT .../file), by its name's suffix."""


API_PATH = "/api/v1"


def _call(method: str, url: str, path: str, api_key: str | None, **kwargs: Any) -> httpx.Response:
    import httpx  # here, not at the top: `serve` need not wait for it (cli.py)

    base = url.rstrip("/")
    if base.endswith(API_PATH):  # the REST API's URL: the hub's would answer 404
        typer.secho(
            f"--url is the hub's base URL, without {API_PATH}: --url {base.removesuffix(API_PATH)}",
            err=True,
            fg="red",
        )
        raise typer.Exit(2)
    headers = dict(kwargs.pop("headers", {}))
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        response = httpx.request(
            method, f"{base}{API_PATH}{path}", headers=headers, timeout=30, **kwargs
        )
    except httpx.HTTPError as error:
        typer.secho(f"Cannot reach the hub at {url}: {error}", err=True, fg="red")
        raise typer.Exit(2) from error
    if response.is_error:
        typer.secho(f"{response.status_code}: {_detail(response)}", err=True, fg="red")
        raise typer.Exit(1)
    return response


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        return response.text
    if isinstance(detail, list):
        return "; ".join(_problem(item) for item in detail if isinstance(item, dict))
    return str(detail)


def _problem(item: dict[str, Any]) -> str:
    """One problem of a 422: the field it is in (below ``body``), if any, then why."""
    where = ".".join(str(part) for part in item.get("loc", [])[1:])
    return f"{where}: {item.get('msg')}" if where else str(item.get("msg"))


def _print(response: httpx.Response) -> None:
    typer.echo(json.dumps(response.json(), indent=2, ensure_ascii=False))


def _report(response: httpx.Response, done: str, url: str, *, as_json: bool) -> None:
    """One line on what was ``done`` to the persona (its id, name, version and A2A URL), or
    the whole document with ``as_json``."""
    if as_json:
        _print(response)
        return
    persona = response.json()
    persona_id = persona.get("id", "?")
    typer.echo(
        f"{done} '{persona_id}' ({persona.get('name', '?')}), version {persona.get('version', '?')}"
        f"; it answers at {_endpoint(url, persona_id)}"
    )


def _endpoint(url: str, persona_id: str) -> str:
    """The persona's JSON-RPC URL as its card gives it (built from the hub's public base URL:
    the address clients use, not the replica ``url`` may name), or else as ``url`` has it."""
    import httpx  # here, not at the top: `serve` need not wait for it (cli.py)

    base = url.rstrip("/")
    try:
        card = httpx.get(
            f"{base}/a2a/{persona_id}/.well-known/agent-card.json",
            headers={"A2A-Version": "1.0"},
            timeout=10,
        ).json()
        for interface in card.get("supportedInterfaces", []):
            if interface.get("protocolBinding") == "JSONRPC" and interface.get("url"):
                return str(interface["url"])
    except (httpx.HTTPError, ValueError, AttributeError):
        pass  # the one-line report is a courtesy: the persona was written all the same
    return f"{base}/a2a/{persona_id}/"


@personas_app.command("list")
def list_command(
    url: HubUrl = DEFAULT_URL,
    api_key: ApiKey = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the listing's items as one JSON array instead")
    ] = False,
) -> None:
    """List the hub's personas: one line each (id, name, version); --json: the items."""
    offset = 0
    items: list[dict[str, Any]] = []
    while True:
        page = _call("GET", url, f"/personas?offset={offset}&limit=500", api_key).json()
        items += page["items"]
        offset += len(page["items"])
        if not page["items"] or offset >= page["total"]:
            break
    if as_json:
        typer.echo(json.dumps(items, indent=2, ensure_ascii=False))
        return
    for item in items:
        typer.echo(f"{item['id']:<24} {item['name']:<24} {item['version']}")


@personas_app.command("get")
def get_command(persona_id: str, url: HubUrl = DEFAULT_URL, api_key: ApiKey = None) -> None:
    """Print one persona as JSON (with its version)."""
    _print(_call("GET", url, f"/personas/{persona_id}", api_key))


@personas_app.command("create")
def create_command(
    file: Annotated[
        Path, typer.Argument(help="Persona file (.yaml, .yml or .json); its stem is the id")
    ],
    url: HubUrl = DEFAULT_URL,
    api_key: ApiKey = None,
    as_json: AsJson = False,
) -> None:
    """Create a persona from a file; it answers over A2A at once. Prints one line (--json:
    the persona's document)."""
    try:
        content = file.read_bytes()
    except OSError as error:
        typer.secho(f"Cannot read {file}: {error}", err=True, fg="red")
        raise typer.Exit(1) from error
    # The header a keyless upload needs (no web page's form can send it): docs/security.md.
    headers = {"X-Requested-With": "persona-agent"}
    files = {"file": (file.name, content)}
    response = _call("POST", url, "/personas/upload", api_key, files=files, headers=headers)
    _report(response, "Created", url, as_json=as_json)


@personas_app.command("update")
def update_command(
    persona_id: str,
    file: Annotated[Path, typer.Argument(help="Persona file (.yaml, .yml or .json)")],
    url: HubUrl = DEFAULT_URL,
    api_key: ApiKey = None,
    if_match: IfMatch = None,
    as_json: AsJson = False,
) -> None:
    """Replace a persona with a file, stored as written (comments and layout kept, as an
    upload or the console's editor stores it). Prints one line (--json: the persona's
    document)."""
    media = FILE_MEDIA_TYPES.get(file.suffix.lower())
    if media is None:
        typer.secho(f"{file}: a persona file ends in .yaml, .yml or .json", err=True, fg="red")
        raise typer.Exit(1)
    try:
        content = file.read_bytes()
    except OSError as error:
        typer.secho(f"Cannot read {file}: {error}", err=True, fg="red")
        raise typer.Exit(1) from error
    headers = {"Content-Type": media, **({"If-Match": if_match} if if_match else {})}
    path = f"/personas/{persona_id}/file"
    response = _call("PUT", url, path, api_key, content=content, headers=headers)
    _report(response, "Updated", url, as_json=as_json)


@personas_app.command("delete")
def delete_command(
    persona_id: str, url: HubUrl = DEFAULT_URL, api_key: ApiKey = None, if_match: IfMatch = None
) -> None:
    """Delete a persona: its A2A endpoints answer 404 at once."""
    headers = {"If-Match": if_match} if if_match else {}
    _call("DELETE", url, f"/personas/{persona_id}", api_key, headers=headers)
    typer.echo(f"Deleted '{persona_id}'")
