"""The system prompt of a persona, rendered deterministically from its fields.

Every field that says something about the persona reaches the prompt in a readable
form: a background given as a mapping becomes an outline, ``language_style``'s further
keys become labelled lines, each interaction sample is shown in its own shape. The
character-card macros ``{{char}}`` and ``{{user}}`` (and the older ``<BOT>``,
``<USER>``) are replaced here, at rendering; the stored text keeps them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from persona_agent.personas.formats.lorebook import LoreSelection
from persona_agent.personas.macros import ORIGINAL, USER_NAME, apply_macros
from persona_agent.personas.model import InteractionSample, Persona
from persona_agent.personas.samples import conversation_turns, is_conversation

__all__ = [
    "PROMPT_CACHE_SIZE",
    "USER_NAME",
    "apply_macros",
    "conversation_turns",
    "render_background",
    "render_character",
    "render_greeting",
    "render_profile",
    "render_system_prompt",
    "sample_exchanges",
]

PROMPT_CACHE_SIZE = 512
"""How many rendered prompts are kept (least recently used are dropped)."""


def render_system_prompt(persona: Persona, lore: LoreSelection | None = None) -> str:
    """The system prompt that makes the model speak as ``persona``.

    The same persona always gives the same string: sections in a fixed order,
    domains, topics and samples in file order. ``lore``, the lore entries the
    conversation brought up, goes in where each entry's position says: before the
    character's description or after it. Rendered prompts are cached by persona (its
    hash is its id and version); lore is added to the cached parts.
    """
    parts = _render_cached(persona)
    if lore is None or not lore:
        return parts.whole
    name = persona.name.strip()
    sections = [parts.opening]
    sections += [apply_macros(text.strip(), name) for text in lore.before]
    sections.append(parts.character)
    sections += [apply_macros(text.strip(), name) for text in lore.after]
    sections.append(parts.rules)
    return "\n\n".join(section for section in sections if section) + "\n"


def render_character(persona: Persona) -> str:
    """The sections that describe the persona (who, personality, background, speech,
    knowledge, scenario, examples), without the opening and the rules."""
    return _render_cached(persona).character


def render_greeting(persona: Persona) -> str | None:
    """The persona's greeting with its macros replaced, or ``None``."""
    if persona.greeting is None:
        return None
    return apply_macros(persona.greeting, persona.name.strip())


def sample_exchanges(persona: Persona) -> list[tuple[str, str]]:
    """The interaction samples as (question, answer) pairs, macros replaced: an exchange as
    it is, a conversation's turns paired up, a quote or other sample as an answer to
    nothing (``""``)."""
    name = persona.name.strip()
    pairs: list[tuple[str, str]] = []
    for sample in persona.interaction_samples:
        if sample.user is not None and sample.assistant is not None:
            pairs.append((apply_macros(sample.user, name), apply_macros(sample.assistant, name)))
            continue
        content = sample.content or ""
        if is_conversation(sample):
            question = ""
            for speaker, text in conversation_turns(content, name):
                if speaker == "user":
                    question = apply_macros(text, name)
                else:
                    pairs.append((question, apply_macros(text, name)))
                    question = ""
        else:
            pairs.append(("", apply_macros(content.strip(), name)))
    return pairs


@dataclass(frozen=True, slots=True)
class _Parts:
    opening: str
    character: str
    rules: str
    whole: str


@functools.lru_cache(maxsize=PROMPT_CACHE_SIZE)
def _render_cached(persona: Persona) -> _Parts:
    name = persona.name.strip()
    opening = (
        f"You are {name}. Speak as {name}: in the first person, in your own voice, "
        "staying in character throughout the conversation."
    )
    if persona.system_prompt is not None:
        own = apply_macros(persona.system_prompt.strip(), name)
        opening = ORIGINAL.sub(lambda _: opening, own)
    character = "\n\n".join("\n".join(lines) for lines in _character(persona, name))
    rules = "\n".join(
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
    whole = "\n\n".join((opening, character, rules)) + "\n"
    return _Parts(opening, character, rules, whole)


def _character(persona: Persona, name: str) -> list[list[str]]:
    def text(value: str) -> str:
        return apply_macros(value.strip(), name)

    sections: list[list[str]] = [["# Who you are", f"Name: {name}", text(persona.description)]]
    if persona.personality is not None:
        sections.append(["# Your personality", text(persona.personality)])
    sections += _profile(persona, name)
    if persona.scenario is not None:
        sections.append(["# The scenario", text(persona.scenario)])
    if persona.interaction_samples:
        examples = [
            "# Example exchanges",
            "These show your voice and manner; do not repeat them word for word.",
        ]
        for sample in persona.interaction_samples:
            examples += ["", *_sample_lines(sample, name)]
        sections.append(examples)
    return sections


def render_background(persona: Persona) -> str:
    """The persona's background as plain text (a mapping as an outline), macros replaced;
    ``""`` without one."""
    background = persona.personal_background
    name = persona.name.strip()
    if isinstance(background, str):
        return apply_macros(background.strip(), name)
    if background is None:
        return ""
    return "\n".join(_outline(background, "", name))


def render_profile(persona: Persona) -> str:
    """The background, speech and knowledge sections (``""`` when the persona has none):
    what a character card's description carries of a persona that has them."""
    return "\n\n".join("\n".join(lines) for lines in _profile(persona, persona.name.strip()))


def _profile(persona: Persona, name: str) -> list[list[str]]:
    def text(value: str) -> str:
        return apply_macros(value.strip(), name)

    sections: list[list[str]] = []
    background = persona.personal_background
    if isinstance(background, str):
        sections.append(["# Your background", text(background)])
    elif background is not None:
        sections.append(["# Your background", *_outline(background, "", name)])

    style = persona.language_style
    if style is not None:
        speech = ["# How you speak", f"Tone: {text(style.tone)}"]
        if style.characteristics:
            speech += ["Characteristics:", *_bullets(style.characteristics, "", name)]
        if style.sample_phrases:
            speech += ["Phrases you might use:", *_bullets(style.sample_phrases, "", name)]
        for key, value in style.further().items():
            if isinstance(value, str):
                speech.append(f"{_label(key)}: {text(value)}")
            elif value:
                speech += [f"{_label(key)}:", *_bullets(value, "", name)]
        sections.append(speech)

    if persona.knowledge_domains:
        knowledge = ["# What you know"]
        for domain, topics in persona.knowledge_domains.items():
            knowledge += [f"{domain.strip()}:", *_bullets(topics, "  ", name)]
        sections.append(knowledge)
    return sections


def _sample_lines(sample: InteractionSample, name: str) -> list[str]:
    if sample.user is not None and sample.assistant is not None:
        return [
            f"{USER_NAME}: {apply_macros(sample.user.strip(), name)}",
            f"{name}: {apply_macros(sample.assistant.strip(), name)}",
        ]
    content = sample.content or ""
    details = ", ".join(
        f"{_label(key).lower()}: {value}" for key, value in sample.details().items()
    )
    heading = _label(sample.type) if sample.type is not None else "Example"
    heading += f" ({details})" if details else ""
    turns = conversation_turns(content, name) if is_conversation(sample) else []
    if turns:
        lines = [f"{heading}:"] if sample.type is None or details else []
        for speaker, said in turns:
            who = USER_NAME if speaker == "user" else name
            lines.append(f"{who}: {apply_macros(said, name)}")
        return lines
    return [f"{heading}:", apply_macros(content.strip(), name)]


def _label(key: str) -> str:
    """A key as a heading: ``common_phrases`` → ``Common phrases``."""
    words = re.sub(r"[_\-\s]+", " ", key).strip()
    return words[:1].upper() + words[1:] if words else key


def _bullets(items: list[str], indent: str, name: str) -> list[str]:
    return [f"{indent}- {apply_macros(item.strip(), name)}" for item in items]


def _outline(value: Any, indent: str, name: str) -> list[str]:
    """A mapping or list of any depth as indented lines; empty values are left out."""
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if item is None or item == "" or item == [] or item == {}:
                continue
            if isinstance(item, dict | list):
                lines += [f"{indent}{_label(key)}:", *_outline(item, indent + "  ", name)]
            else:
                lines.append(f"{indent}{_label(key)}: {_scalar(item, name)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list):
                nested = _outline(item, indent + "  ", name)
                if nested:
                    lines += [f"{indent}- {nested[0].strip()}", *nested[1:]]
            elif item is not None and item != "":
                lines.append(f"{indent}- {_scalar(item, name)}")
    return lines


def _scalar(value: Any, name: str) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return apply_macros(str(value).strip(), name)
