"""A new persona's file: every section, each with a short placeholder (``persona-agent new``)."""

from __future__ import annotations

import json
import unicodedata

from persona_agent.personas.model import slugify

__all__ = ["persona_template", "template_id"]

_TEMPLATE = """\
# {name}: a persona for persona-agent, with a placeholder in every section. Replace them,
# then check the file: persona-agent validate {path}
# docs/personas.md explains every field; examples/grace-hopper.yaml is a whole persona.
# The file's name is the persona's id: {persona_id}.
name: {quoted_name}
description: >-
  One or two sentences on who {name} is, shown on the agent card.
personal_background: |
  A few paragraphs on {name}'s life and work, in the third person: where they come
  from, what they did, what they care about.
language_style:
  tone: {tone}
  characteristics:
    - {characteristic}
  sample_phrases:
    - {phrase}
knowledge_domains:               # each domain becomes a skill on the agent card
  Main subject:
    - {topic}
interaction_samples:
  - user: {question}
    assistant: {answer}
card:
  examples:
    - {example}
model: {{}}     # name, temperature, max_tokens; left empty, the hub's defaults
tools: {{}}     # allow: [server, server__tool]; left empty, every configured MCP tool
"""


def template_id(name: str) -> str:
    """The id a persona called ``name`` gets: the name as a slug, its accents left off
    (``Émilie du Châtelet``: ``emilie-du-chatelet``); not a valid id for a name without a
    letter or digit."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return slugify(ascii_name)[:63].strip("-")


def persona_template(name: str, persona_id: str, path: str) -> str:
    """The YAML text of a new persona called ``name`` (one line), to be saved at ``path``.
    Where the name is in a plain value it is quoted, so no name can break the YAML."""

    def quoted(text: str) -> str:
        return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML string

    return _TEMPLATE.format(
        name=name,
        path=path,
        persona_id=persona_id,
        quoted_name=quoted(name),
        tone=quoted(f"How {name} sounds, in a few words"),
        characteristic=quoted(f"A habit of {name}'s speech or thought"),
        phrase=quoted(f"Something {name} would say."),
        topic=quoted(f"A topic {name} knows well"),
        question=quoted(f"A question someone might ask {name}"),
        answer=quoted(f"{name}'s answer, in their own voice."),
        example=quoted(f"A first question to ask {name}"),
    )
