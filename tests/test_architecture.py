"""The house keeps its plan (docs/architecture.md): imports point down, no package cycle,
no two modules share a name, every module's first line says its one job, and none grows
past the sizes the house keeps (modules 500 lines, functions 80, 15 modules at a package's
top level).

Each check names what breaks it, so a failure says where to look.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import grimp

from tests import architecture_table

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "persona_agent"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_PACKAGE_MODULES = 15


def _modules() -> list[Path]:
    """Every module of the package, but the migrations' generated revisions."""
    return sorted(p for p in SRC.rglob("*.py") if "migrations/versions" not in p.as_posix())


def test_imports_point_down() -> None:
    """pyproject.toml's import-linter contracts: the layers and the leaves."""
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_no_package_imports_another_that_imports_it() -> None:
    """Between the packages (and top-level modules) of persona_agent, imports form no
    cycle: each pair of them depends one way at most, and no longer loop exists."""
    graph = grimp.build_graph("persona_agent", cache_dir=None)
    tops = sorted(
        m for m in graph.modules if m.count(".") == 1 and not m.endswith(("__init__", "__main__"))
    )
    edges: dict[str, set[str]] = defaultdict(set)
    for importer in tops:
        for imported in tops:
            if importer != imported and graph.direct_import_exists(
                importer=importer, imported=imported, as_packages=True
            ):
                edges[importer].add(imported)
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for top in tops:
        if top not in state:
            visit(top, [top])
    assert not cycles, "package cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_two_modules_share_a_name() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        if path.name not in ("__init__.py", "__main__.py"):
            by_name[path.stem].append(path.relative_to(SRC).as_posix())
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not shared, f"module names used twice: {shared}"


def test_every_module_says_its_one_job_first() -> None:
    silent = [
        path.relative_to(SRC).as_posix()
        for path in _modules()
        if ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) is None
        or not path.read_text(encoding="utf-8").startswith('"""')
    ]
    assert not silent, f"modules whose first line is not a docstring: {silent}"


def test_modules_and_functions_keep_their_size() -> None:
    too_long: list[str] = []
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(SRC).as_posix()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{name}: {lines} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(
                        f"{name}:{node.lineno} {node.name}(): {length} lines "
                        f"(at most {MAX_FUNCTION_LINES})"
                    )
    assert not too_long, "grown past the house's sizes:\n" + "\n".join(too_long)


def test_packages_keep_few_modules_at_their_top_level() -> None:
    """A newcomer finds the room for a change from the names alone: a package with more
    modules at its top level than that is split into sub-packages by role (as a2a/ is
    into tasks/ and discovery/), never by trimming. ``__init__`` and ``__main__`` are not
    counted; the migrations' generated revisions are not modules of the hub's."""
    crowded: list[str] = []
    for package in sorted({path.parent for path in _modules()}):
        names = [p for p in package.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
        if len(names) > MAX_PACKAGE_MODULES:
            crowded.append(f"{package.relative_to(SRC).as_posix()}/: {len(names)} modules")
    assert not crowded, (
        f"packages with more than {MAX_PACKAGE_MODULES} modules at their top level "
        "(split by role):\n" + "\n".join(crowded)
    )


def test_the_architecture_page_lists_every_module_as_it_says_its_job() -> None:
    """docs/architecture.md's module table is the one made from the modules' docstrings
    (rewrite it with ``uv run python -m tests.architecture_table --write``)."""
    assert architecture_table.current() == architecture_table.table(), (
        "docs/architecture.md's module table is out of date: "
        "uv run python -m tests.architecture_table --write"
    )
