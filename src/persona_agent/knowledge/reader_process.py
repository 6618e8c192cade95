"""A document reader process: reads the documents the hub sends it on stdin, one at a
time, and answers each with its pages of text (or why not) on stdout
(:mod:`persona_agent.knowledge.reader_pool` starts it: ``python -m`` this module).

A request is ``>II`` (header length, data length), a JSON header (``name``,
``media_type``, ``limits``) and the document's bytes; an answer is ``>I`` and a JSON
object: ``{"pages": [[page, text], ...]}`` or ``{"error": message, "kind": kind}``. The
process lowers its priority (the hub's event loop comes first), takes at most
``argv[1]`` bytes of memory, and stops its own reading at the CPU-seconds limit; the hub
kills it when it runs past that anyway, or when the task waiting for it is canceled.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from dataclasses import fields
from typing import Any, BinaryIO

from persona_agent.errors import DocumentError, DocumentTooLargeError, UnsupportedDocumentError
from persona_agent.knowledge.documents import read_document
from persona_agent.knowledge.pdf_text import OutOfBudget, ReadLimits, cpu_alarm

__all__ = ["answer", "main"]

REQUEST_HEAD = struct.Struct(">II")
ANSWER_HEAD = struct.Struct(">I")
_LIMIT_NAMES = frozenset(field.name for field in fields(ReadLimits))


def answer(header: dict[str, Any], data: bytes) -> dict[str, Any]:
    """One document read within its limits, as the JSON answer."""
    name = str(header.get("name", "document"))
    limits = ReadLimits(
        **{key: value for key, value in header.get("limits", {}).items() if key in _LIMIT_NAMES}
    )
    try:
        with cpu_alarm(limits):
            pages = read_document(name, data, str(header.get("media_type", "")), limits)
    except OutOfBudget as spent:
        return {"error": f"{name}: the document is over a limit: {spent.reason}", "kind": "large"}
    except MemoryError:
        return {
            "error": f"{name}: the document needs more memory to read than its reader may take "
            "(PERSONA_AGENT_DOCUMENT_WORKER_MEMORY_BYTES)",
            "kind": "large",
        }
    except DocumentTooLargeError as error:
        return {"error": error.message, "kind": "large"}
    except UnsupportedDocumentError as error:
        return {"error": error.message, "kind": "unsupported"}
    except DocumentError as error:
        return {"error": error.message, "kind": "document"}
    return {"pages": pages}


def _read_exactly(source: BinaryIO, size: int) -> bytes | None:
    data = source.read(size)
    return data if len(data) == size else None


def main() -> None:
    """Serve requests until the hub closes stdin."""
    memory = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if memory > 0:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    os.nice(10)  # a reader waits for the CPU; the hub's event loop does not
    import pypdf  # noqa: F401  (loaded before the first reading, not counted in its time)

    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print goes to stderr, never into an answer
    source = sys.stdin.buffer
    while True:
        head = _read_exactly(source, REQUEST_HEAD.size)
        if head is None:
            return  # the hub closed its end
        header_size, data_size = REQUEST_HEAD.unpack(head)
        header_bytes = _read_exactly(source, header_size)
        data = _read_exactly(source, data_size)
        if header_bytes is None or data is None:
            return
        body = json.dumps(answer(json.loads(header_bytes), data), ensure_ascii=False).encode()
        out.write(ANSWER_HEAD.pack(len(body)) + body)
        out.flush()


if __name__ == "__main__":
    main()
