"""The parsed content of persona files, kept between runs so a restart skips YAML parsing.

Parsing YAML is most of the cost of loading a persona (PyYAML builds Python
objects in Python, even with libyaml): some 0.3 ms a file on two cores, three
seconds for 10,000 personas. This cache keeps what each valid file parsed to,
as JSON, keyed by the file's name, size, modification time and inode, the way
Python keeps bytecode next to sources. A file whose metadata differs is parsed
again. The cache only replaces parsing: every persona is still validated
against the model at every start, so a bad persona stops start-up whether it
came from the cache or not.

One JSON line a file, in a file of the data directory; a cache that cannot be
read or written is ignored (logged at DEBUG): it is never needed for
correctness.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["ParseCache"]

logger = logging.getLogger(__name__)

_FORMAT = "persona-parse-cache/1"


def _key(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


class ParseCache:
    """File name -> parsed content, valid while the file's (size, mtime, inode) is unchanged.

    :meth:`get` and :meth:`put` during one load; :meth:`save` then writes the
    entries of this load only (files gone since are forgotten).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._old: dict[str, tuple[list[int], str]] = {}
        self._new: dict[str, tuple[list[int], str]] = {}
        self._changed = False
        try:
            with path.open(encoding="utf-8") as file:
                if file.readline().rstrip("\n") != _FORMAT:
                    return
                for line in file:
                    name, size, mtime, inode, data = line.rstrip("\n").split("\t", 4)
                    self._old[name] = ([int(size), int(mtime), int(inode)], data)
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as error:
            logger.debug("Persona parse cache %s not used: %s", path, error)
            self._old.clear()

    def get(self, name: str, stat: os.stat_result) -> dict[str, Any] | None:
        """What ``name`` parsed to, if the file is as it was then."""
        entry = self._old.get(name)
        if entry is None or entry[0] != _key(stat):
            return None
        try:
            data = json.loads(entry[1])
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        self._new[name] = entry
        return data

    def put(self, name: str, stat: os.stat_result, data: dict[str, Any]) -> None:
        """Remember what ``name`` (with metadata ``stat`` from before it was read) parsed to.

        Content that JSON cannot hold exactly (bytes, dates, non-string keys) is not kept.
        """
        try:
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            return
        if any(not isinstance(key, str) for key in data) or "\n" in text:
            return
        self._new[name] = (_key(stat), text)
        self._changed = True

    def save(self) -> None:
        """Write this load's entries, if anything changed; errors are logged, not raised."""
        if not self._changed and self._new.keys() == self._old.keys():
            return
        lines = [_FORMAT]
        for name, (key, text) in sorted(self._new.items()):
            if "\t" in name or "\n" in name:
                continue
            lines.append("\t".join([name, *map(str, key), text]))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(prefix=".personas.", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as file:
                    file.write("\n".join(lines) + "\n")
                os.replace(temporary, self.path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as error:
            logger.debug("Persona parse cache %s not written: %s", self.path, error)
