"""Snapshots of the embedded model's KV cache, so a persona's prompt is read once.

Every answer of the local model starts by reading a prompt of some 500 tokens, more for
a long character card (the persona, its sample exchanges, the conversation), which
takes the two cores seconds. llama.cpp reuses whatever prefix of the new prompt is still
in its cache, so a conversation that goes on with the same persona is fast; switching
personas is not. :class:`PrefixStates` keeps cache snapshots (about 18 KB a token) of
two kinds, within one byte budget:

- a persona's *fixed prefix* (everything before the conversation's turns), saved the
  first time it is read: a new conversation with that persona reads only its own turns;
- recent *transcripts* (the prefix and a conversation), so a conversation that goes on
  after other personas spoke is not read again either.

When the budget is exceeded, the oldest transcripts go first, then the least recently
used prefixes. A snapshot is restored before a generation when it saves enough reading.

``Llama.save_state()`` is not used: it copies every row of logits (over 500 MB
for such a prompt with Gemma's 262k vocabulary); only the KV data and the token
ids are needed, since the model re-reads at least the last prompt token anyway.
Worker-thread only, like every other use of the model.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = ["PrefixStates", "shared_length"]

MIN_GAIN = 64
"""Tokens a snapshot must save over the live cache to be worth restoring."""


@dataclass(frozen=True, slots=True)
class _Snapshot:
    ids: npt.NDArray[np.intc]
    data: bytes


class PrefixStates:
    """Persona prefixes and recent transcripts, bounded together in bytes (see the module)."""

    def __init__(self, capacity_bytes: int) -> None:
        self._capacity = capacity_bytes
        self._prefixes: OrderedDict[bytes, _Snapshot] = OrderedDict()  # by their token ids
        self._snapshots: OrderedDict[int, _Snapshot] = OrderedDict()
        self._next_key = 0

    @property
    def size_bytes(self) -> int:
        kept = [*self._prefixes.values(), *self._snapshots.values()]
        return sum(len(snapshot.data) for snapshot in kept)

    def __len__(self) -> int:
        return len(self._prefixes) + len(self._snapshots)

    @property
    def prefixes(self) -> int:
        """How many persona prefixes are kept."""
        return len(self._prefixes)

    def restore_best(self, llama: Llama, tokens: list[int]) -> int:
        """Load the snapshot sharing the longest prefix with ``tokens``, if it beats the live cache.

        Returns the number of prompt tokens the cache now holds for ``tokens``.
        """
        wanted = np.asarray(tokens, dtype=np.intc)
        live = _shared(llama.input_ids[: llama.n_tokens], wanted)
        best: _Snapshot | None = None
        shared_best = live
        for kept in (self._prefixes, self._snapshots):
            for snapshot in kept.values():
                shared = _shared(snapshot.ids, wanted)
                if shared > shared_best:
                    best, shared_best = snapshot, shared
        if best is None or shared_best < live + MIN_GAIN:
            return live
        self._touch(best)
        buffer = (ctypes.c_uint8 * len(best.data)).from_buffer_copy(best.data)
        if _set_state(llama, buffer, len(best.data)) != len(best.data):
            llama.n_tokens = 0  # a snapshot the model refuses: read the prompt from scratch
            return 0
        llama.input_ids[: len(best.ids)] = best.ids
        llama.n_tokens = len(best.ids)
        return shared_best

    def has_prefix(self, ids: list[int]) -> bool:
        """Whether the prefix ``ids`` is kept (too short a prefix counts as kept: it is
        not worth a snapshot)."""
        return len(ids) < MIN_GAIN or _key(ids) in self._prefixes

    def read_prefix(self, llama: Llama, ids: list[int]) -> None:
        """Bring the live cache to exactly ``ids`` (reading what it lacks), and keep it
        as a persona prefix."""
        wanted = np.asarray(ids, dtype=np.intc)
        llama.n_tokens = _shared(llama.input_ids[: llama.n_tokens], wanted)
        llama.eval(ids[llama.n_tokens :])  # drops the cache past n_tokens first
        snapshot = self._snapshot(llama)
        if snapshot is not None:
            self._prefixes[_key(ids)] = snapshot
            self._evict()

    def save(self, llama: Llama) -> None:
        """Keep a snapshot of the live cache, replacing snapshots of the same transcript."""
        snapshot = self._snapshot(llama)
        if snapshot is None:
            return
        ids = snapshot.ids
        for key in [k for k, s in self._snapshots.items() if _shared(s.ids, ids) >= MIN_GAIN]:
            del self._snapshots[key]
        self._snapshots[self._next_key] = snapshot
        self._next_key += 1
        self._evict()

    def _snapshot(self, llama: Llama) -> _Snapshot | None:
        ids = llama.input_ids[: llama.n_tokens].copy()
        if len(ids) < MIN_GAIN:
            return None
        context = llama._ctx.ctx  # the state API needs the raw context
        size = _state_size(context)
        buffer = (ctypes.c_uint8 * size)()
        written = _get_state(context, buffer, size)
        if written <= 0 or written > self._capacity:
            return None
        return _Snapshot(ids, ctypes.string_at(buffer, written))

    def _touch(self, snapshot: _Snapshot) -> None:
        for kept in (self._prefixes, self._snapshots):
            for key, value in kept.items():
                if value is snapshot:
                    kept.move_to_end(key)  # type: ignore[arg-type]
                    return

    def _evict(self) -> None:
        while self.size_bytes > self._capacity:
            (self._snapshots or self._prefixes).popitem(last=False)


def shared_length(a: list[int], b: list[int]) -> int:
    """The length of the common prefix of two token lists."""
    return _shared(np.asarray(a, dtype=np.intc), np.asarray(b, dtype=np.intc))


def _key(ids: list[int] | npt.NDArray[np.intc]) -> bytes:
    return np.asarray(ids, dtype=np.intc).tobytes()


def _shared(a: npt.NDArray[np.intc], b: npt.NDArray[np.intc]) -> int:
    """The length of the common prefix of two token arrays."""
    length = min(len(a), len(b))
    differs = np.flatnonzero(a[:length] != b[:length])
    return int(differs[0]) if len(differs) else length


def _state_size(context: object) -> int:
    from llama_cpp import llama_state_get_size

    return int(llama_state_get_size(context))


def _get_state(context: object, buffer: ctypes.Array[ctypes.c_uint8], size: int) -> int:
    from llama_cpp import llama_state_get_data

    return int(llama_state_get_data(context, buffer, size))


def _set_state(llama: Llama, buffer: ctypes.Array[ctypes.c_uint8], size: int) -> int:
    from llama_cpp import llama_state_set_data

    return int(llama_state_set_data(llama._ctx.ctx, buffer, size))
