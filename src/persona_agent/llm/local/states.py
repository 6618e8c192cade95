"""Snapshots of the embedded model's KV cache, so a persona's transcript is read once.

Every answer of the local model starts by reading a transcript of some 500
tokens (the persona, its sample exchanges, the conversation), which takes the
two cores a few seconds. llama.cpp reuses whatever prefix of the new prompt is
still in its cache, so a conversation that goes on with the same persona is
fast; switching personas is not. :class:`PrefixStates` keeps a small LRU of
cache snapshots (about 10 MB each), one per recent transcript prefix, and
restores the best one before a generation when it saves enough reading.

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

__all__ = ["PrefixStates"]

MIN_GAIN = 64
"""Tokens a snapshot must save over the live cache to be worth restoring."""


@dataclass(frozen=True, slots=True)
class _Snapshot:
    ids: npt.NDArray[np.intc]
    data: bytes


class PrefixStates:
    """An LRU of KV-cache snapshots, bounded in bytes; one per transcript prefix."""

    def __init__(self, capacity_bytes: int) -> None:
        self._capacity = capacity_bytes
        self._snapshots: OrderedDict[int, _Snapshot] = OrderedDict()
        self._next_key = 0

    @property
    def size_bytes(self) -> int:
        return sum(len(snapshot.data) for snapshot in self._snapshots.values())

    def __len__(self) -> int:
        return len(self._snapshots)

    def restore_best(self, llama: Llama, tokens: list[int]) -> int:
        """Load the snapshot sharing the longest prefix with ``tokens``, if it beats the live cache.

        Returns the number of prompt tokens the cache now holds for ``tokens``.
        """
        wanted = np.asarray(tokens, dtype=np.intc)
        live = _shared(llama.input_ids[: llama.n_tokens], wanted)
        best_key, best = None, live
        for key, snapshot in self._snapshots.items():
            shared = _shared(snapshot.ids, wanted)
            if shared > best:
                best_key, best = key, shared
        if best_key is None or best < live + MIN_GAIN:
            return live
        snapshot = self._snapshots[best_key]
        self._snapshots.move_to_end(best_key)
        buffer = (ctypes.c_uint8 * len(snapshot.data)).from_buffer_copy(snapshot.data)
        if _set_state(llama, buffer, len(snapshot.data)) != len(snapshot.data):
            llama.n_tokens = 0  # a snapshot the model refuses: read the prompt from scratch
            return 0
        llama.input_ids[: len(snapshot.ids)] = snapshot.ids
        llama.n_tokens = len(snapshot.ids)
        return best

    def save(self, llama: Llama) -> None:
        """Keep a snapshot of the live cache, replacing snapshots of the same transcript."""
        ids = llama.input_ids[: llama.n_tokens].copy()
        if len(ids) < MIN_GAIN:
            return
        context = llama._ctx.ctx  # the state API needs the raw context
        size = _state_size(context)
        buffer = (ctypes.c_uint8 * size)()
        written = _get_state(context, buffer, size)
        if written <= 0 or written > self._capacity:
            return
        for key in [k for k, s in self._snapshots.items() if _shared(s.ids, ids) >= MIN_GAIN]:
            del self._snapshots[key]
        self._snapshots[self._next_key] = _Snapshot(ids, ctypes.string_at(buffer, written))
        self._next_key += 1
        while self.size_bytes > self._capacity:
            self._snapshots.popitem(last=False)


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
