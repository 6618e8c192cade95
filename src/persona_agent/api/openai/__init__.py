"""The OpenAI-compatible door: each persona and panel a model at ``/v1/models`` and
``/v1/chat/completions`` (docs/openai.md). Its names here; the door itself
(:mod:`.completions_door`) is imported by its first request (``create_app``)."""

__all__ = ["OPENAI_BINDING", "OPENAI_PREFIX"]

OPENAI_PREFIX = "/v1"
OPENAI_BINDING = "openai"
"""A chat completion's binding label in the request metrics."""
