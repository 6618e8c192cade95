"""What the commands share: their settings (options over the environment), the persona
directory's option and personas, and how a command fails.

A bad setting exits 2 naming the option or environment variable it came from (never
its value: it may be a secret); a bad persona file or another failure exits 1, said on
standard error.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from persona_agent.errors import PersonaFileError
from persona_agent.hub.persona_store import persona_limits
from persona_agent.personas.model import Persona
from persona_agent.personas.scan import load_persona_dir
from persona_agent.settings import Settings

__all__ = [
    "PersonasDir",
    "command_settings",
    "fail",
    "load_all",
    "read_dir",
    "report",
    "setting_name",
]

PersonasDir = Annotated[
    Path | None,
    typer.Option(
        "--personas-dir",
        "-d",
        help="Directory of persona YAML files [default: PERSONA_AGENT_PERSONAS_DIR or ./personas]",
        show_default=False,
    ),
]


def command_settings(**overrides: Any) -> Settings:
    """The settings, with the commands' options (``overrides``) over the environment;
    a bad one exits 2, naming each problem's option or environment variable."""
    values = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**values)
    except ValidationError as error:
        # Without a traceback, and without the values given: one may be a secret.
        problems = [
            f"  {setting_name(e['loc'], values)}: {e['msg'].removeprefix('Value error, ')}"
            for e in error.errors(include_url=False, include_input=False)
        ]
        typer.secho("Invalid settings:\n" + "\n".join(problems), err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from error


_OPTION_NAMES = {"public_base_url": "--base-url"}
"""The options not named after the setting they set."""


def setting_name(loc: tuple[int | str, ...], options: Mapping[str, Any]) -> str:
    """What a user set a setting with: the command's option, or the environment variable
    (also a ``.env`` line's name), never pydantic's field name."""
    field = str(loc[0]) if loc else ""
    if field in options:
        return _OPTION_NAMES.get(field, "--" + field.replace("_", "-"))
    if field.isupper():  # a setting read under another name (OPENAI_API_KEY): that name
        return field
    return "PERSONA_AGENT_" + "_".join(map(str, loc)).upper()


def read_dir(settings: Settings) -> tuple[dict[str, Persona], list[PersonaFileError]]:
    """The personas of the persona directory (with the examples, those of the user
    persona directory over them), and its bad files' errors; exits 2 when there is no
    such directory."""
    directory = settings.personas_dir
    if not directory.is_dir():
        typer.secho(f"Persona directory {directory} does not exist", err=True, fg="red")
        raise typer.Exit(2)
    personas, errors = load_persona_dir(directory, persona_limits(settings))
    own = settings.writable_personas_dir
    if own != directory and own.is_dir():
        mine, my_errors = load_persona_dir(own, persona_limits(settings))
        personas, errors = {**personas, **mine}, errors + my_errors
    return personas, errors


def report(errors: list[PersonaFileError]) -> None:
    for error in errors:
        typer.secho(f"error: {error}", err=True, fg="red")


def load_all(settings: Settings) -> dict[str, Persona]:
    """Every persona of the directory; exits with the errors if any file is bad."""
    personas, errors = read_dir(settings)
    report(errors)
    if errors:
        raise typer.Exit(1)
    return personas


def fail(message: str, code: int = 1) -> NoReturn:
    """Exit ``code`` (1: a failure; 2: a usage error), saying why on standard error."""
    typer.secho(f"error: {message}", err=True, fg="red")
    raise typer.Exit(code)
