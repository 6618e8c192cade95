"""llama.cpp's own server inside the hub's process (xllamacpp), on 127.0.0.1, for the local model.

The server loads the model once and answers many conversations at once: ``slots``
parallel sequences with continuous batching, each slot keeping the prompt it last read
(a new request goes to the slot whose prompt shares the longest start with its own, so a
persona's card is read once), and a RAM prompt cache over them. Everything goes through
the server's loopback HTTP port, which nothing outside the machine reaches: generations as
through any OpenAI-compatible server (:class:`~persona_agent.llm.openai_backend.OpenAIBackend`;
closing a stream frees its slot at once), tokenizing and chat templates here, and saving a
slot to a file and restoring it (:meth:`EmbeddedServer.save_slot`,
:meth:`EmbeddedServer.restore_slot`: what a slot read, kept across restarts).
"""

from __future__ import annotations

import json
import logging
import os
import urllib.request
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, Literal

__all__ = ["EmbeddedServer", "KvCacheType", "choose_openmp_wait"]

logger = logging.getLogger(__name__)

# How long llama.cpp's OpenMP threads spin while they wait for each other before they sleep.
# libgomp's default (300,000 turns, about 3 ms) takes, on cores other work keeps busy, the
# core the awaited thread needs: 1 to 3 tokens a second. Never spinning (passive) is robust
# there but 41 % slower on quiet cores (each of a token's hundreds of waits pays a wake-up).
# A short spin (10,000 turns, about 0.1 ms) measured on two cores: 1.66x passive quiet (as
# fast as spinning long), level with it beside two busy loops, 0.65x beside eight
# (docs/local-model.md#openmps-wait-on-the-server). libgomp reads it when it is loaded, so
# it is set before xllamacpp is imported; a wait the user chose (either variable) wins.
_SPIN_COUNT = "10000"
_HTTP_TIMEOUT = 60.0
_READ_TIMEOUT = 900.0  # reading a long card on two busy cores took 83 to 102 s
_CACHE_RAM_MIB = 256  # the server's prompt cache (idle slots' prompts), in RAM

KvCacheType = Literal["f16", "q8_0"]
"""The types the KV cache may hold its keys, or its values, in: ``q8_0`` takes about half
the memory of ``f16`` (docs/local-model.md#the-kv-cache-keys-in-q8_0)."""


def choose_openmp_wait(environ: MutableMapping[str, str]) -> None:
    """Give llama.cpp's OpenMP threads the short spin (:data:`_SPIN_COUNT`) in ``environ``,
    unless it already says how they wait (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``)."""
    if "OMP_WAIT_POLICY" not in environ and "GOMP_SPINCOUNT" not in environ:
        environ["GOMP_SPINCOUNT"] = _SPIN_COUNT


class EmbeddedServer:
    """A started llama.cpp server; :meth:`start` makes one. Its methods block (call them from
    a worker thread)."""

    def __init__(self, server: Any, address: str, *, slots: int) -> None:
        self._server = server
        self.address = address
        """The server's own HTTP address (``http://127.0.0.1:PORT``)."""
        self.slots = slots
        self.slot_dir: Path | None = None
        """Where slots are saved to and restored from (:meth:`save_slot`); None: nowhere."""
        self.model_file: Path | None = None
        """The model file it serves."""
        self.build = ""
        """What a saved slot depends on besides the model: the server's version, the
        context of a slot, the KV cache's types."""

    @classmethod
    def start(
        cls,
        model: Path,
        *,
        threads: int,
        slots: int,
        context_tokens: int,
        cache_type_k: KvCacheType = "q8_0",
        cache_type_v: KvCacheType = "f16",
        mmproj: Path | None = None,
        chat_template: str | None = None,
        slot_dir: Path | None = None,
    ) -> EmbeddedServer:
        """Load ``model`` and start serving it: ``slots`` conversations at once, each with
        ``context_tokens`` of context, on ``threads`` CPU threads, the KV cache's keys of type
        ``cache_type_k`` and its values of ``cache_type_v``; ``chat_template`` (Jinja) instead
        of the file's own; slots saved to and restored from files in ``slot_dir`` (created if
        missing), if given.

        Raises:
            RuntimeError: llama.cpp could not load the model (or the projector).
        """
        choose_openmp_wait(os.environ)
        import xllamacpp  # imported on use: loading its library costs memory

        params = xllamacpp.CommonParams()
        params.model.path = str(model)
        if mmproj is not None:
            params.mmproj.path = str(mmproj)
        params.n_parallel = slots
        # One pool of cells for every slot (kv_unified), sized so that every slot can hold a
        # whole context at once: a pool that fills fails every answer being made ("Context
        # size has been exceeded"), and the same prefix in two slots takes its cells twice
        # (both measured: docs/local-model.md#the-kv-pool-a-whole-context-for-every-slot).
        params.n_ctx = context_tokens * slots
        params.kv_unified = True
        # Gemma 3's sliding-window layers keep only the last window by default, and then a
        # cached prompt can be reused only up to its last checkpoint, taken a few tokens before
        # the end of a prompt read, never inside an answer: every second message would read the
        # first answer again (75 tokens a persona against 16), for 64-67 MB less at rest and
        # more after use (docs/local-model.md#gemma-3s-sliding-window-without-the-full-cache).
        params.swa_full = True
        # Keys in q8_0 halve their memory for no cost shown; values in q8_0 cost 37 % more
        # CPU to read a prompt, and answered worse (docs/local-model.md). A quantized V cache
        # needs flash attention, which llama.cpp's default (auto) turns on wherever the
        # backend has it (every CPU: the log says "Flash Attention enabled").
        params.cache_type_k = getattr(xllamacpp.ggml_type, f"GGML_TYPE_{cache_type_k.upper()}")
        params.cache_type_v = getattr(xllamacpp.ggml_type, f"GGML_TYPE_{cache_type_v.upper()}")
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        # An HTTP thread serves one connection for as long as it stays open (its streamed
        # answer, then kept alive for the next request): one a slot, and room for the
        # tokenizer's calls and a connection kept alive, so no request waits for a thread.
        params.n_threads_http = slots + 4
        if chat_template is not None:
            params.chat_template = chat_template
        params.use_jinja = True
        params.cache_ram_mib = _CACHE_RAM_MIB
        params.endpoint_metrics = False
        params.endpoint_slots = False
        params.warmup = True
        params.verbosity = 0 if logger.isEnabledFor(logging.DEBUG) else -1
        if slot_dir is not None:
            slot_dir.mkdir(parents=True, exist_ok=True)
            # The server writes to this string followed by the file's name: the slash is ours.
            params.slot_save_path = f"{slot_dir.resolve()}{os.sep}"
        server = xllamacpp.Server(params)
        started = cls(server, server.listening_address, slots=slots)
        started.slot_dir = slot_dir
        started.model_file = model
        # A slot file holds the cache in its type: one of another type is never restored.
        version = getattr(xllamacpp, "__version__", "?")
        started.build = f"xllamacpp {version}, {context_tokens}, {cache_type_k}/{cache_type_v}"
        return started

    def prime(self, tokens: list[int], slot: int) -> int:
        """Read ``tokens`` into ``slot`` (and generate one token after them); the number of
        them found already read (in the slot or the server's prompt cache). A new task on a
        slot also moves what the slot held before into the prompt cache."""
        reply = self._post(
            "/completion",
            {"prompt": tokens, "n_predict": 1, "id_slot": slot, "cache_prompt": True},
            timeout=_READ_TIMEOUT,
        )
        timings = reply.get("timings")
        return int(timings.get("cache_n") or 0) if isinstance(timings, dict) else 0

    def save_slot(self, slot: int, filename: str) -> int:
        """Save what ``slot`` read to ``filename`` in :attr:`slot_dir`; the tokens saved.

        Raises:
            RuntimeError: the server refused (no slot directory, a busy slot).
        """
        reply = self._post(f"/slots/{slot}?action=save", {"filename": filename})
        return int(reply.get("n_saved") or 0)

    def restore_slot(self, slot: int, filename: str) -> int:
        """Load ``filename`` of :attr:`slot_dir` into ``slot``; the tokens restored.

        Raises:
            RuntimeError: the server refused (a busy slot, a file it cannot read).
        """
        reply = self._post(f"/slots/{slot}?action=restore", {"filename": filename})
        return int(reply.get("n_restored") or 0)

    def tokenize(self, text: str, *, special: bool) -> list[int]:
        """``text`` as the model's tokens, with the BOS token first as the model wants it."""
        reply = self._post(
            "/tokenize", {"content": text, "add_special": True, "parse_special": special}
        )
        return [int(token) for token in reply["tokens"]]

    def apply_template(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> str:
        """``messages`` (and the ``tools`` offered) through the model file's chat template:
        the prompt, ending where the answer begins.

        Raises:
            RuntimeError: the template refused them (e.g. a system message).
        """
        body: dict[str, Any] = {"messages": messages}
        if tools:
            body["tools"] = tools
        reply = self._post("/apply-template", body)
        prompt = reply.get("prompt")
        if not isinstance(prompt, str):
            raise RuntimeError(f"the chat template refused the messages: {reply}")
        return prompt

    def template_calls_tools(self) -> bool:
        """Whether the chat template the server reads offers tools and writes their calls
        (its ``/props``): a template that does not ignores the tools a request sends.

        Raises:
            RuntimeError: the server did not say.
        """
        try:
            with urllib.request.urlopen(self.address + "/props", timeout=_HTTP_TIMEOUT) as response:
                props = json.loads(response.read())
        except (OSError, ValueError) as error:
            raise RuntimeError(f"llama.cpp's server did not tell its template: {error}") from error
        caps = props.get("chat_template_caps") if isinstance(props, dict) else None
        return isinstance(caps, dict) and caps.get("supports_tool_calls") is True

    def close(self) -> None:
        """Stop the server and free the model (the native object goes with its last reference)."""
        self._server = None

    def _post(
        self, path: str, body: dict[str, Any], *, timeout: float = _HTTP_TIMEOUT
    ) -> dict[str, Any]:
        request = urllib.request.Request(
            self.address + path,
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                reply = json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise RuntimeError(
                f"llama.cpp's server answered {error.code}: {error.read()!r}"
            ) from error
        if not isinstance(reply, dict):
            raise RuntimeError(f"llama.cpp's server answered {reply!r}")
        return reply
