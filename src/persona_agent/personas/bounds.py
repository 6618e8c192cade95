"""Bounds a persona is held to once it is valid: what its text becomes when rendered, and how
large its lorebook is. Checked at load (every door: a file, an upload, a REST body, a card).

Macros multiply text: ``{{char}}`` is 8 characters and becomes the persona's name, which may
be long, so a 60 KB card became a 97 MB agent card, a 100 MB prompt and a 100 MB database
row. The size a persona's text will have is therefore computed, linearly and without
replacing anything (:func:`rendered_chars`): every text the prompt and the cards are made
of, with ``{{char}}`` counted as the name, ``{{user}}`` as a name of
:data:`~persona_agent.personas.macros.MAX_USER_NAME_CHARS`, ``{{original}}`` as the hub's
opening, plus the name (or the user's) once for each place the prompt and the agent card
repeat it: the fixed ones (:data:`NAME_REPEATS`), each sample's turns, each knowledge
domain's skill. It may not be larger than the persona file may be
(``PERSONA_AGENT_MAX_PERSONA_BYTES``): the same bound as YAML aliases, which expand text
in the same way. The system prompt, the agent card and an exported card are each made of
this text with a few labels and headings per item, so each stays within a small multiple
of the limit, whatever the persona.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from persona_agent.personas.macros import MAX_USER_NAME_CHARS, ORIGINAL, expanded_length
from persona_agent.personas.samples import conversation_turns, is_conversation
from persona_agent.security.limits import Limits

if TYPE_CHECKING:
    from persona_agent.personas.model import Persona

__all__ = ["NAME_REPEATS", "OPENING_CHARS", "check_bounds", "rendered_chars"]

NAME_REPEATS = 8
"""Places the system prompt and the agent card say the persona's name once each (the
opening twice, the ``Name:`` line, the rules twice, the card's name, its conversation
skill), with one to spare."""

OPENING_CHARS = 200
"""The hub's opening of a system prompt without the name (which it says twice): what each
``{{original}}`` in a persona's own ``system_prompt`` stands for."""

Location = tuple[str | int, ...]


def rendered_chars(persona: Persona) -> Iterator[tuple[Location, int]]:
    """Each field the prompt and the cards are made of, with the number of characters it
    renders to (macros expanded, repeated names counted): at most one pass over each text."""
    name = len(persona.name.strip())

    def size(text: str) -> int:
        return expanded_length(text, name)

    yield ("name",), name * NAME_REPEATS
    yield ("description",), size(persona.description)
    for field in ("personality", "scenario", "greeting", "post_history_instructions"):
        value = getattr(persona, field)
        if value is not None:
            yield (field,), size(value)
    if persona.system_prompt is not None:
        originals = sum(1 for _ in ORIGINAL.finditer(persona.system_prompt))
        yield (
            ("system_prompt",),
            size(persona.system_prompt) + originals * (OPENING_CHARS + 2 * name),
        )
    for index, greeting in enumerate(persona.alternate_greetings):
        yield ("alternate_greetings", index), size(greeting)
    if persona.personal_background is not None:
        yield ("personal_background",), _tree(persona.personal_background, size)
    if persona.language_style is not None:
        yield ("language_style",), _tree(persona.language_style.model_dump(), size)
    for domain, topics in persona.knowledge_domains.items():
        # The agent card's skill for the domain names the persona.
        yield ("knowledge_domains", domain), size(domain) + _tree(topics, size) + name
    for index, sample in enumerate(persona.interaction_samples):
        yield ("interaction_samples", index), _sample(sample, persona.name, size)
    if persona.lore is not None:
        for index, entry in enumerate(persona.lore.entries):
            yield ("lore", "entries", index, "content"), size(entry.content)


def _tree(value: Any, size: Any) -> int:
    """The rendered size of text, or of the keys and texts of lists and mappings in it."""
    total = 0
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            total += size(item)
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif item is not None:
            total += len(str(item))
    return total


def _sample(sample: Any, name: str, size: Any) -> int:
    """A sample's texts, and a speaker's name for each of its turns."""
    own = len(name.strip())
    total = _tree(sample.model_dump(exclude_none=True), size)
    if sample.user is not None and sample.assistant is not None:
        return total + own + MAX_USER_NAME_CHARS
    if sample.content is not None and is_conversation(sample):
        for speaker, _ in conversation_turns(sample.content, name):
            total += own if speaker == "persona" else MAX_USER_NAME_CHARS
    return total


def check_bounds(persona: Persona, limits: Limits) -> None:
    """Refuse a persona whose rendered text (:func:`rendered_chars`) is larger than
    ``limits.max_bytes``, or whose lorebook has more than ``limits.max_lore_entries``.

    Raises:
        pydantic.ValidationError: located at the field that is too large (the largest
            one, for the rendered size), saying the size, the limit and the setting.
    """
    errors: list[InitErrorDetails] = []
    book = persona.lore
    if book is not None and len(book.entries) > limits.max_lore_entries:
        errors.append(
            _error(
                ("lore", "entries"),
                "the lorebook has {count:,} entries, more than the limit of {limit:,} "
                "(PERSONA_AGENT_MAX_LORE_ENTRIES)",
                count=len(book.entries),
                limit=limits.max_lore_entries,
            )
        )
    total = 0
    fields: dict[str, int] = {}  # by top-level field
    largest: dict[str, tuple[Location, int]] = {}  # its largest part
    for location, chars in rendered_chars(persona):
        total += chars
        field = str(location[0])
        fields[field] = fields.get(field, 0) + chars
        if chars > largest.get(field, (location, -1))[1]:
            largest[field] = (location, chars)
    if total > limits.max_bytes:
        field = max(fields, key=lambda name: fields[name])
        errors.append(
            _error(
                largest[field][0],
                "with its macros expanded ({{{{char}}}} as the name, {{{{user}}}} as a name of "
                "up to {user} characters) and the name counted where the prompt and the "
                "agent card repeat it, the persona's text would be {total:,} characters, "
                "more than the limit of {limit:,} (PERSONA_AGENT_MAX_PERSONA_BYTES); {whose} "
                "{chars:,} of them",
                user=MAX_USER_NAME_CHARS,
                total=total,
                limit=limits.max_bytes,
                whose="this field makes"
                if len(largest[field][0]) == 1
                else "this field and the others beside it make",
                chars=fields[field],
            )
        )
    if errors:
        raise ValidationError.from_exception_data("Persona", errors)


def _error(location: Location, message: str, **context: Any) -> InitErrorDetails:
    text = message.format(**context)
    return {
        "type": PydanticCustomError("persona_too_large", text),
        "loc": location,
        "input": None,
    }
