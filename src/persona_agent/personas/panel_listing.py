"""How a panel is described: on its agent card, and in the hub's persona listings."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from persona_agent.personas.model import Persona

__all__ = ["MODES", "card_description", "card_tags", "panel_listing", "with_panels"]


MODES = {
    "broadcast": "every member answers the same message at once",
    "round-table": "the members speak in order, each seeing the answers before it",
    "moderated": "a moderator gives the floor to one member at a time, then writes a synthesis",
}
"""What each mode does, as cards and docs say it."""


def card_description(panel: Persona, names: Mapping[str, str]) -> str:
    """What a panel's card adds to its description: its mode, members and moderator
    (``names``: persona id → name, for those served)."""
    settings = panel.panel
    if settings is None:
        return ""

    def named(persona_id: str) -> str:
        name = names.get(persona_id)
        return f"{name} ({persona_id})" if name else persona_id

    rounds = f", for {settings.rounds} rounds" if settings.rounds > 1 else ""
    said = (
        f" A panel of {len(settings.members)} personas of this hub ({settings.mode}: "
        f"{MODES[settings.mode]}{rounds}): {', '.join(map(named, settings.members))}."
    )
    if settings.moderator is not None:
        said += f" Moderator: {named(settings.moderator)}."
    return said + " Each member's answer is an artifact of its own, named after the member."


def card_tags(panel: Persona) -> list[str]:
    """``panel``, ``panel:{mode}``, ``member:{id}`` for each member, ``moderator:{id}``."""
    settings = panel.panel
    if settings is None:
        return []
    tags = ["panel", f"panel:{settings.mode}", *(f"member:{m}" for m in settings.members)]
    if settings.moderator is not None:
        tags.append(f"moderator:{settings.moderator}")
    return tags


def panel_listing(panel: Persona) -> dict[str, object] | None:
    """A panel as ``/a2a/personas`` and the aggregate card show it (``None``: not one)."""
    settings = panel.panel
    if settings is None:
        return None
    entry: dict[str, object] = {"mode": settings.mode, "members": list(settings.members)}
    if settings.mode != "broadcast":
        entry["rounds"] = settings.rounds
    if settings.moderator is not None:
        entry["moderator"] = settings.moderator
    return entry


def with_panels(
    entries: list[dict[str, str]], lookup: Callable[[str], Persona | None]
) -> list[dict[str, object]]:
    """The persona list (``/a2a/personas``), each panel's entry with a ``panel`` field
    (:func:`panel_listing`)."""
    listed: list[dict[str, object]] = []
    for entry in entries:
        persona = lookup(entry["id"])
        panel = panel_listing(persona) if persona is not None else None
        listed.append({**entry, "panel": panel} if panel is not None else {**entry})
    return listed
