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
from persona_agent.personas.user_identity import DEFAULT_USER, UserPersona

__all__ = [
    "PROMPT_CACHE_SIZE",
    "USER_HEADING",
    "USER_NAME",
    "apply_macros",
    "conversation_turns",
    "render_background",
    "render_character",
    "render_frame",
    "render_greeting",
    "render_profile",
    "render_system_prompt",
    "sample_exchanges",
    "user_section",
]

PROMPT_CACHE_SIZE = 512
"""How many rendered prompts are kept (least recently used are dropped)."""


def render_system_prompt(
    persona: Persona, lore: LoreSelection | None = None, user: UserPersona = DEFAULT_USER
) -> str:
    """The system prompt that makes the model speak as ``persona`` to ``user``.

    The same persona and user always give the same string: sections in a fixed order,
    domains, topics and samples in file order. ``lore``, the lore entries the
    conversation brought up, goes in where each entry's position says: before the
    character's description or after it. ``{{user}}`` is the user's name; a user who
    said who they are (not :data:`DEFAULT_USER`) has a section of their own, after the
    character's (their name, and ``{{user}}'s persona:`` their description). Rendered
    prompts are cached by persona (its hash is its id and version) and user name; lore
    and the user's section are added to the cached parts.
    """
    parts = _render_cached(persona, user.name)
    about = user_section(persona, user)
    if (lore is None or not lore) and not about:
        return parts.whole
    name = persona.name.strip()
    sections = [parts.opening]
    if lore is not None:
        sections += [apply_macros(text.strip(), name, user.name) for text in lore.before]
    sections.append(parts.character)
    if lore is not None:
        sections += [apply_macros(text.strip(), name, user.name) for text in lore.after]
    sections += [about, parts.rules]
    return "\n\n".join(section for section in sections if section) + "\n"


USER_HEADING = "# Who you are talking to"
"""What opens the user's section of the system prompt (:func:`user_section`)."""


def user_section(persona: Persona, user: UserPersona) -> str:
    """The system prompt's section on who the user is: ``""`` for :data:`DEFAULT_USER`
    (nobody said), else their name and, when they gave one, their description (macros
    replaced), as SillyTavern's persona description: ``Ann's persona: ...``."""
    if user == DEFAULT_USER:
        return ""
    lines = [USER_HEADING, f"You are talking to {user.name}."]
    if user.description:
        said = apply_macros(user.description, persona.name.strip(), user.name)
        lines.append(f"{user.name}'s persona: {said}")
    return "\n".join(lines)


def render_character(persona: Persona, user: str = USER_NAME) -> str:
    """The sections that describe the persona (who, personality, background, speech,
    knowledge, scenario, examples), without the opening and the rules; ``user``: what
    ``{{user}}`` becomes."""
    return _render_cached(persona, user).character


def render_frame(persona: Persona, user: str = USER_NAME) -> tuple[str, str]:
    """The system prompt's frame around the character: its opening (the persona's own
    ``system_prompt``, or who to speak as) and its rules, as :func:`render_system_prompt`
    writes them (the same cached rendering)."""
    parts = _render_cached(persona, user)
    return parts.opening, parts.rules


def render_greeting(persona: Persona, user: str = USER_NAME) -> str | None:
    """The persona's greeting with its macros replaced (``{{user}}`` as ``user``), or
    ``None``."""
    if persona.greeting is None:
        return None
    return apply_macros(persona.greeting, persona.name.strip(), user)


def sample_exchanges(persona: Persona, user: str = USER_NAME) -> list[tuple[str, str]]:
    """The interaction samples as (question, answer) pairs, macros replaced (``{{user}}``
    as ``user``): an exchange as it is, a conversation's turns paired up, a quote or other
    sample as an answer to nothing (``""``)."""
    name = persona.name.strip()

    def text(value: str) -> str:
        return apply_macros(value, name, user)

    pairs: list[tuple[str, str]] = []
    for sample in persona.interaction_samples:
        if sample.user is not None and sample.assistant is not None:
            pairs.append((text(sample.user), text(sample.assistant)))
            continue
        content = sample.content or ""
        if is_conversation(sample):
            question = ""
            for speaker, said in conversation_turns(content, name):
                if speaker == "user":
                    question = text(said)
                else:
                    pairs.append((question, text(said)))
                    question = ""
        else:
            pairs.append(("", text(content.strip())))
    return pairs


@dataclass(frozen=True, slots=True)
class _Parts:
    opening: str
    character: str
    rules: str
    whole: str


@functools.lru_cache(maxsize=PROMPT_CACHE_SIZE)
def _render_cached(persona: Persona, user: str) -> _Parts:
    name = persona.name.strip()
    opening = (
        f"You are {name}. Speak as {name}: in the first person, in your own voice, "
        "staying in character throughout the conversation."
    )
    if persona.system_prompt is not None:
        own = apply_macros(persona.system_prompt.strip(), name, user)
        opening = ORIGINAL.sub(lambda _: opening, own)
    character = "\n\n".join("\n".join(lines) for lines in _character(persona, name, user))
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


def _character(persona: Persona, name: str, user: str) -> list[list[str]]:
    def text(value: str) -> str:
        return apply_macros(value.strip(), name, user)

    sections: list[list[str]] = [["# Who you are", f"Name: {name}", text(persona.description)]]
    if persona.personality is not None:
        sections.append(["# Your personality", text(persona.personality)])
    sections += _profile(persona, name, user)
    if persona.scenario is not None:
        sections.append(["# The scenario", text(persona.scenario)])
    if persona.interaction_samples:
        examples = [
            "# Example exchanges",
            "These show your voice and manner; do not repeat them word for word.",
        ]
        for sample in persona.interaction_samples:
            examples += ["", *_sample_lines(sample, name, user)]
        sections.append(examples)
    return sections


def render_background(persona: Persona, user: str = USER_NAME) -> str:
    """The persona's background as plain text (a mapping as an outline), macros replaced
    (``{{user}}`` as ``user``); ``""`` without one."""
    background = persona.personal_background
    name = persona.name.strip()
    if isinstance(background, str):
        return apply_macros(background.strip(), name, user)
    if background is None:
        return ""
    return "\n".join(_outline(background, "", name, user))


def render_profile(persona: Persona) -> str:
    """The background, speech and knowledge sections (``""`` when the persona has none):
    what a character card's description carries of a persona that has them."""
    return "\n\n".join("\n".join(lines) for lines in _profile(persona, persona.name.strip()))


def _profile(persona: Persona, name: str, user: str = USER_NAME) -> list[list[str]]:
    def text(value: str) -> str:
        return apply_macros(value.strip(), name, user)

    sections: list[list[str]] = []
    background = persona.personal_background
    if isinstance(background, str):
        sections.append(["# Your background", text(background)])
    elif background is not None:
        sections.append(["# Your background", *_outline(background, "", name, user)])

    style = persona.language_style
    if style is not None:
        speech = ["# How you speak", f"Tone: {text(style.tone)}"]
        if style.characteristics:
            speech += ["Characteristics:", *_bullets(style.characteristics, "", name, user)]
        if style.sample_phrases:
            speech += ["Phrases you might use:", *_bullets(style.sample_phrases, "", name, user)]
        for key, value in style.further().items():
            if isinstance(value, str):
                speech.append(f"{_label(key)}: {text(value)}")
            elif value:
                speech += [f"{_label(key)}:", *_bullets(value, "", name, user)]
        sections.append(speech)

    if persona.knowledge_domains:
        knowledge = ["# What you know"]
        for domain, topics in persona.knowledge_domains.items():
            knowledge += [f"{domain.strip()}:", *_bullets(topics, "  ", name, user)]
        sections.append(knowledge)
    return sections


def _sample_lines(sample: InteractionSample, name: str, user: str) -> list[str]:
    if sample.user is not None and sample.assistant is not None:
        return [
            f"{user}: {apply_macros(sample.user.strip(), name, user)}",
            f"{name}: {apply_macros(sample.assistant.strip(), name, user)}",
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
            who = user if speaker == "user" else name
            lines.append(f"{who}: {apply_macros(said, name, user)}")
        return lines
    return [f"{heading}:", apply_macros(content.strip(), name, user)]


def _label(key: str) -> str:
    """A key as a heading: ``common_phrases`` → ``Common phrases``."""
    words = re.sub(r"[_\-\s]+", " ", key).strip()
    return words[:1].upper() + words[1:] if words else key


def _bullets(items: list[str], indent: str, name: str, user: str) -> list[str]:
    return [f"{indent}- {apply_macros(item.strip(), name, user)}" for item in items]


def _outline(value: Any, indent: str, name: str, user: str = USER_NAME) -> list[str]:
    """A mapping or list of any depth as indented lines; empty values are left out."""
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if item is None or item == "" or item == [] or item == {}:
                continue
            if isinstance(item, dict | list):
                lines += [f"{indent}{_label(key)}:", *_outline(item, indent + "  ", name, user)]
            else:
                lines.append(f"{indent}{_label(key)}: {_scalar(item, name, user)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list):
                nested = _outline(item, indent + "  ", name, user)
                if nested:
                    lines += [f"{indent}- {nested[0].strip()}", *nested[1:]]
            elif item is not None and item != "":
                lines.append(f"{indent}- {_scalar(item, name, user)}")
    return lines


def _scalar(value: Any, name: str, user: str) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return apply_macros(str(value).strip(), name, user)
