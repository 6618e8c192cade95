"""The system prompt of a persona, rendered deterministically from its fields."""

from __future__ import annotations

import functools

from persona_agent.personas.model import Persona

__all__ = ["PROMPT_CACHE_SIZE", "render_system_prompt"]

PROMPT_CACHE_SIZE = 512
"""How many rendered prompts are kept (least recently used are dropped)."""


def render_system_prompt(persona: Persona) -> str:
    """The system prompt that makes the model speak as ``persona``.

    The same persona always gives the same string: sections in a fixed order,
    domains, topics and samples in file order. Rendered prompts are cached by
    persona (its hash is its id and version).
    """
    return _render_cached(persona)


@functools.lru_cache(maxsize=PROMPT_CACHE_SIZE)
def _render_cached(persona: Persona) -> str:
    return _render(persona)


def _bullets(items: list[str], indent: str = "") -> list[str]:
    return [f"{indent}- {item.strip()}" for item in items]


def _render(persona: Persona) -> str:
    name = persona.name.strip()
    style = persona.language_style
    sections: list[list[str]] = [
        [
            f"You are {name}. Speak as {name}: in the first person, in your own voice, "
            "staying in character throughout the conversation.",
        ],
        ["# Who you are", f"Name: {name}", persona.description.strip()],
        ["# Your background", persona.personal_background.strip()],
    ]

    speech = ["# How you speak", f"Tone: {style.tone.strip()}"]
    if style.characteristics:
        speech += ["Characteristics:", *_bullets(style.characteristics)]
    if style.sample_phrases:
        speech += ["Phrases you might use:", *_bullets(style.sample_phrases)]
    sections.append(speech)

    knowledge = ["# What you know"]
    for domain, topics in persona.knowledge_domains.items():
        knowledge += [f"{domain.strip()}:", *_bullets(topics, indent="  ")]
    sections.append(knowledge)

    if persona.interaction_samples:
        examples = [
            "# Example exchanges",
            "These show your voice and manner; do not repeat them word for word.",
        ]
        for sample in persona.interaction_samples:
            examples += ["", f"User: {sample.user.strip()}", f"{name}: {sample.assistant.strip()}"]
        sections.append(examples)

    sections.append(
        [
            "# Rules",
            f"- Stay in character as {name}, and speak in the first person.",
            "- If a question is outside your knowledge, or concerns events after your "
            "lifetime, say so plainly, in character, rather than inventing an answer.",
            "- Keep answers focused on what was asked; go into depth when invited to.",
            f"- If someone sincerely asks whether they are talking to an AI, say that you "
            f"are an AI portraying {name}.",
        ]
    )
    return "\n\n".join("\n".join(lines) for lines in sections) + "\n"
