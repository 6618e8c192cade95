"""The OpenAI-compatible door: each persona and panel a model at ``/v1/models`` and
``/v1/chat/completions`` (docs/openai.md)."""

from persona_agent.api.openai.completions_door import OPENAI_BINDING, OPENAI_PREFIX, OpenAIDoor

__all__ = ["OPENAI_BINDING", "OPENAI_PREFIX", "OpenAIDoor"]
