"""The settings walk: a value followed from a function's parameter through the package,
and how often that walk climbs back up (issue 47's measure of the hub's wiring).

``uv run python -m tests.architecture_walk src/persona_agent/api/app.py:create_app:settings``
(``--at REV`` walks a commit's tree, ``--max-events N`` cuts the walk, 400 by default;
``--events`` prints it). How the value is followed: :mod:`tests.walk_flow`. The figures:

- files entered: the files of the functions the walk enters;
- a visit of a file: an entry into one of its functions from another file's (the start
  counts as one);
- a climb back up: a visit of a file the walk had visited before. The flow comes back to
  a file it had already gone down into, from below or from a sibling branch, instead of
  going down a tree of builders in which each file is reached from one place.

docs/architecture.md ("The settings walk") gives the figures, at 848aa8a and now.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import tarfile
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.walk_flow import Event, Walk
from tests.walk_index import Index

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Climb:
    """A visit of a file the walk had visited before: ``event`` enters it, from
    ``caller`` (a function of another file); ``same_caller``: its last visit came from that
    same call of ``caller`` too (a builder entering one file twice), not from elsewhere."""

    event: Event
    caller: str
    same_caller: bool


@dataclass(frozen=True)
class Figures:
    """What a walk comes to: files entered, visits of each, climbs back up."""

    events: int
    files: list[str]
    visits: Counter[str]
    climbs: list[Climb]


def figures(events: list[Event]) -> Figures:
    """Files in order of first entry; a visit is an entry from another file (the start's
    counts as one); a climb back up is a visit of a file visited before."""
    files: list[str] = []
    visits: Counter[str] = Counter()
    climbs: list[Climb] = []
    frames: list[tuple[Event, int]] = []  # each function on the walk's stack, its call's id
    last_from: dict[str, int] = {}
    for number, event in enumerate(events):
        if event.kind == "return":
            frames.pop()
            continue
        caller = frames[-1] if frames else None
        if caller is None or caller[0].file != event.file:
            if event.file in visits:
                same = caller is not None and last_from.get(event.file) == caller[1]
                climbs.append(Climb(event, caller[0].function if caller else "", same))
            else:
                files.append(event.file)
            visits[event.file] += 1
            last_from[event.file] = caller[1] if caller else -1
        frames.append((event, number))
    return Figures(len(events), files, visits, climbs)


@contextmanager
def tree_at(rev: str | None) -> Iterator[Path]:
    """The ``src`` directory of the working tree, or of commit ``rev`` (git archive)."""
    if rev is None:
        yield REPO / "src"
        return
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "src"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="walk-") as directory:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(directory, filter="data")
        yield Path(directory) / "src"


def walk(src: Path, spec: str, max_events: int = 400) -> Walk:
    """The walk of ``spec`` (``path/to/module.py:function:parameter``, the function may be
    ``Class.method``) in the package under ``src``."""
    path, function, parameter = spec.rsplit(":", 2)
    relative = Path(path).relative_to("src") if Path(path).parts[0] == "src" else Path(path)
    module = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
    result = Walk(Index(src), max_events)
    result.run(module, function, parameter)
    return result


def report(result: Walk, top: int = 10) -> str:
    """The figures of ``result`` as text: counts, the most visited files, each climb."""
    found = figures(result.events)
    elsewhere = sum(not climb.same_caller for climb in found.climbs)
    lines = [
        f"events: {found.events}" + (" (cut)" if result.cut else ""),
        f"files entered: {len(found.files)}",
        f"climbs back up: {len(found.climbs)} ({elsewhere} from another call than the last)",
        "most visited:",
        *(f"  {count:3d}  {file}" for file, count in found.visits.most_common(top)),
        "climbs (the file come back to: the function entered <- from; * the same call again):",
    ]
    for climb in found.climbs:
        mark = "*" if climb.same_caller else " "
        lines.append(f" {mark} {climb.event.file}: {climb.event.function} <- {climb.caller}")
    if result.unresolved:
        lines.append("calls given the value, not followed (their target not resolved):")
        lines += [f"  {count:3d}  {text}" for text, count in result.unresolved.most_common()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.architecture_walk", description=__doc__)
    parser.add_argument("spec", help="path/to/module.py:function:parameter")
    parser.add_argument("--at", metavar="REV", help="walk this commit's tree (git archive)")
    parser.add_argument("--max-events", type=int, default=400, metavar="N")
    parser.add_argument("--events", action="store_true", help="print every event too")
    options = parser.parse_args(argv)
    with tree_at(options.at) as src:
        result = walk(src, options.spec, options.max_events)
    if options.events:
        for event in result.events:
            sign = ">" if event.kind == "enter" else "<"
            print(f"{'  ' * event.depth}{sign} {event.file} {event.function}")
    print(report(result))


if __name__ == "__main__":
    main()
