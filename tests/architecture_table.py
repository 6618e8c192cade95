"""docs/architecture.md's module table, made from each module's first docstring line.

``uv run python -m tests.architecture_table --write`` writes it between the page's markers;
tests/test_architecture.py fails when the page's table is not what this makes, so the table
cannot drift from the code.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "persona_agent"
PAGE = REPO / "docs" / "architecture.md"
BEGIN = "<!-- modules: made by `uv run python -m tests.architecture_table --write` -->"
END = "<!-- /modules -->"


def first_line(path: Path) -> str:
    """The first sentence line of a module's docstring, as one line of Markdown."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    line = docstring.strip().split("\n\n", 1)[0]
    return " ".join(line.split()).replace("|", "\\|")


def rows() -> list[tuple[str, str]]:
    """(module path from ``persona_agent/``, its job), packages first within a folder."""
    found: list[tuple[str, str]] = []
    for path in sorted(SRC.rglob("*.py")):
        if "migrations/versions" in path.as_posix() or path.name == "__main__.py":
            continue
        relative = path.relative_to(SRC)
        name = relative.parent.as_posix() + "/" if path.name == "__init__.py" else str(relative)
        if name == "./":
            name = "persona_agent/"
        found.append((name, first_line(path)))
    return sorted(found, key=lambda row: (row[0].rsplit("/", 1)[0] if "/" in row[0] else "", row))


def table() -> str:
    lines = [BEGIN, "", "| Module | Its one job |", "| --- | --- |"]
    lines += [f"| `{name}` | {job} |" for name, job in rows()]
    return "\n".join([*lines, "", END])


def current() -> str:
    """The table as docs/architecture.md has it now (empty if it has none)."""
    text = PAGE.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return ""
    start = text.index(BEGIN)
    return text[start : text.index(END, start) + len(END)]


def write() -> None:
    text = PAGE.read_text(encoding="utf-8")
    old = current()
    if not old:
        raise SystemExit(f"{PAGE}: no markers {BEGIN!r} ... {END!r} to write between")
    PAGE.write_text(text.replace(old, table()), encoding="utf-8")


if __name__ == "__main__":
    if "--write" in sys.argv:
        write()
    else:
        print(table())
