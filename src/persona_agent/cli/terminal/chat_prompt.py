"""The terminal chat's ``/prompt``: what reached the model for the last answer, by section
(docs/prompt.md): each section's title and estimated tokens, its items (a lore entry with
the keys that fired it), then what was cut to fit (a memory or a passage over its budget
with its text)."""

from __future__ import annotations

from typing import Any

import typer

__all__ = ["show_prompt"]


def show_prompt(record: dict[str, Any] | None) -> None:
    """Print ``record`` (the hub's ``GET .../prompt``; ``None``: the hub kept none)."""
    if record is None:
        typer.secho("(no prompt kept for the last answer: send a message first)", dim=True)
        return
    typer.secho(
        f"The prompt of the last answer: {record['model']}, {record['messages']} messages, "
        f"~{record['tokens']} tokens (estimated; the model read {record['promptTokens']} "
        f"in {record['modelCalls']} call(s))",
        dim=True,
    )
    for section in record["sections"]:
        typer.secho(f"── {section['title']} (~{section['tokens']} tokens)", bold=True)
        for item in section["items"]:
            typer.echo(f"  {_label(item)}: " + _indented(_text(item)))
        for cut in section["cut"]:
            tokens = f", ~{cut['tokens']} tokens" if "tokens" in cut else ""
            typer.secho(f"  cut: {_label(cut)}{tokens}: {cut['reason']}", fg="yellow")
            if cut.get("text"):  # a memory or a passage left out: what it said
                typer.secho("    " + _indented(_text(cut)), fg="yellow", dim=True)


def _label(item: dict[str, Any]) -> str:
    label = str(item.get("label", ""))
    if item.get("constant"):
        return f"{label} [constant]"
    if item.get("keys"):
        return f"{label} [keys: {', '.join(item['keys'])}]"
    return label


def _text(item: dict[str, Any]) -> str:
    text = str(item.get("text", ""))
    text += "".join(f" {placeholder}" for placeholder in item.get("attached", ()))
    if item.get("clipped"):
        text += f" … ({item['clipped']} more characters not kept)"
    return text


def _indented(text: str) -> str:
    return text.replace("\n", "\n    ")
