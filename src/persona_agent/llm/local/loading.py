"""Starting the embedded model: its file found, llama.cpp's server started on it (through
the file's chat template, or the pass-through one that reads a transcript as it is), the
openai client on the server's port, and the model's special tokens read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from persona_agent.errors import LLMError
from persona_agent.llm.local.chat_template import ChatTemplate, has_chat_template
from persona_agent.llm.local.server import EmbeddedServer
from persona_agent.llm.local.source import ModelSource
from persona_agent.llm.local.special_tokens import SpecialText, read_specials

if TYPE_CHECKING:
    from persona_agent.llm.openai_backend import OpenAIBackend

__all__ = ["KEEPALIVE", "PASS_THROUGH_TEMPLATE", "SAMPLING", "PromptStyle", "Ready", "start_model"]

logger = logging.getLogger(__name__)

PromptStyle = Literal["auto", "transcript", "template"]
# The sampling is tuned on bench/local_eval.py (docs/local-model.md#how-good-its-answers-are).
SAMPLING: dict[str, object] = {
    "top_k": 40,
    "top_p": 0.9,
    "min_p": 0.05,
    "repeat_penalty": 1.1,
    "repeat_last_n": 128,  # tokens the repetition penalty looks back over
    # The samplers the binding used (no DRY, XTC or typical-p: DRY is slow).
    "samplers": ["penalties", "top_k", "top_p", "min_p", "temperature"],
    "cache_prompt": True,
    # The prompt's progress in the first chunks, with the tokens found in the cache (an
    # answer closed early has no usage); not timings_per_token, which adds to every chunk.
    "return_progress": True,
}
"""llama.cpp's own fields of every request: the tuned sampling, and the prompt cache."""
PASS_THROUGH_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
"""The chat template of a model prompted with a transcript: one user message, the transcript,
read as it is (a base model's file has no template, and the server would write ChatML)."""
KEEPALIVE = 2.0
"""Seconds an idle connection to the server is kept: under the server's own 5 s, so the
client does not send on a connection the server is closing (a probe saw one request in five
fail so before any byte; the client's retries cover what is left: docs/local-model.md)."""


@dataclass(frozen=True, slots=True)
class Ready:
    """The started server and the client on its port."""

    server: EmbeddedServer
    client: OpenAIBackend
    template: ChatTemplate | None
    """The file's chat template, or None: prompted with a transcript."""
    tools: bool
    """The template offers tools and writes their calls (a transcript has none)."""
    specials: SpecialText
    """The model's special tokens, which no text of a card, a user or a tool may write."""


def start_model(
    source: ModelSource,
    model_dir: Path,
    *,
    style: PromptStyle,
    start_server: Callable[..., EmbeddedServer],
    timeout: float,
    **options: object,
) -> Ready:
    """Start the server on the model file (``options`` go to ``start_server``), and the client
    on its port. Blocking: a worker thread's.

    Raises:
        LLMError: the file cannot be had, has no template though one is asked for, or
            llama.cpp cannot load it.
    """
    path = source.resolve(model_dir)
    where = source.describe(model_dir)
    wants_template = style == "template" or (
        style == "auto" and not source.bundled and has_chat_template(path)
    )
    if style == "template" and not has_chat_template(path):
        raise LLMError(
            f"{where} has no chat template (tokenizer.chat_template); set "
            "PERSONA_AGENT_LOCAL_PROMPT=transcript to prompt it with a transcript"
        )
    try:
        server = start_server(
            path, chat_template=None if wants_template else PASS_THROUGH_TEMPLATE, **options
        )
    except (RuntimeError, ValueError) as error:
        name = f"PERSONA_AGENT_LOCAL_MODEL names {path}, which" if source.path else str(path)
        raise LLMError(
            f"{name} llama.cpp could not load ({error}): a damaged or incomplete GGUF "
            "file, or a model architecture this llama.cpp does not know"
        ) from error
    try:
        specials = read_specials(path)
    except (OSError, ValueError) as error:
        server.close()
        raise LLMError(f"The special tokens of {path} could not be read: {error}") from error
    # Imported on load, as xllamacpp is: a hub built and never asked (a CLI command)
    # pays for neither.
    from persona_agent.llm.openai_backend import OpenAIBackend

    client = OpenAIBackend(
        base_url=f"{server.address}/v1",
        api_key=None,
        model=source.name,
        timeout=timeout,
        # A request refused before any byte (a connection the server had just closed) is
        # safe to send again.
        max_retries=2,
        extra_body=SAMPLING,
        keepalive=KEEPALIVE,
    )
    template = ChatTemplate(server.apply_template) if wants_template else None
    tools = template is not None and _calls_tools(server)
    logger.info(
        "Local model %s loaded from %s (llama.cpp server on %s, %s threads, %s slots; "
        "prompted with %s%s; %d special tokens)",
        source.name,
        where,
        server.address,
        options.get("threads"),
        options.get("slots"),
        "its chat template" if template else "a transcript",
        ", which calls tools" if tools else "",
        len(specials.texts),
    )
    return Ready(server, client, template, tools, specials)


def _calls_tools(server: EmbeddedServer) -> bool:
    """Whether the server's chat template calls tools; False (and a warning) if it did not
    say."""
    try:
        return server.template_calls_tools()
    except RuntimeError as error:
        logger.warning("The local model is offered no tools: %s", error)
        return False
