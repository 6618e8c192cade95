"""What a panel says to its members and its moderator, and how it reads the moderator's pick.

Pure functions over personas and what was said: :mod:`persona_agent.collab.meeting` sends
these texts as the messages of the members' and the moderator's tasks.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from persona_agent.personas.model import Persona

__all__ = [
    "DONE",
    "Said",
    "panel_problems",
    "parse_pick",
    "pick_prompt",
    "synthesis_prompt",
    "transcript",
    "turn_prompt",
    "warn_panel_problems",
]

logger = logging.getLogger(__name__)

DONE = "DONE"
"""What a moderator answers to end the discussion before its last turn."""


@dataclass
class Said:
    """One member's turn: who, in which round, and how it ended."""

    member: str
    name: str
    round: int
    task_id: str = ""
    state: str = ""
    """``completed``, ``failed``, ``canceled``, ``rejected``...; empty while it runs."""
    text: str = ""
    """The answer (completed), or why there is none."""
    pieces: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.state == "completed"

    def summary(self) -> dict[str, object]:
        """As the panel's final data part lists it."""
        entry: dict[str, object] = {"id": self.member, "name": self.name, "round": self.round}
        entry |= {"taskId": self.task_id, "state": self.state}
        if not self.ok:
            entry["reason"] = self.text
        return entry


def panel_problems(panel: Persona, lookup: Callable[[str], Persona | None]) -> list[str]:
    """Why members or the moderator of ``panel`` cannot take part now: unknown, a panel
    themselves, or the panel itself (empty when all is well)."""
    settings = panel.panel
    if settings is None:
        return []
    named = [(member, "member") for member in settings.members]
    if settings.moderator is not None:
        named.append((settings.moderator, "moderator"))
    problems = []
    for persona_id, role in named:
        problem = role_problem(panel, persona_id, lookup(persona_id))
        if problem is not None:
            problems.append(f"{role} {problem}")
    return problems


def role_problem(panel: Persona, persona_id: str, persona: Persona | None) -> str | None:
    """Why ``persona_id`` cannot sit on ``panel`` (``persona``: it, if served)."""
    if persona_id == panel.id:
        return f"'{persona_id}' is the panel itself"
    if persona is None:
        return f"'{persona_id}' is not a persona of this hub"
    if persona.panel is not None:
        return f"'{persona_id}' is a panel (panels do not sit on panels)"
    return None


def warn_panel_problems(personas: Iterable[Persona]) -> None:
    """Start-up: warn of each panel whose members or moderator cannot take part (a typo,
    a persona not added yet). The panel is served; those turns fail, named, at run time."""
    served = {persona.id: persona for persona in personas}
    for persona in served.values():
        for problem in panel_problems(persona, served.get):
            logger.warning(
                "Panel %s: its %s; that turn will fail (docs/collaboration.md)",
                persona.id,
                problem,
            )


def _said_block(said: Sequence[Said]) -> str:
    return "\n\n".join(f"{turn.name} ({turn.member}):\n{turn.text.strip()}" for turn in said)


def transcript(said: Sequence[Said]) -> str:
    """The answers given, each under its member's name (failed turns left out)."""
    return "\n\n".join(f"{turn.name}:\n{turn.text.strip()}" for turn in said if turn.ok)


def turn_prompt(
    panel: Persona,
    member: Persona,
    question: str,
    since: Sequence[Said],
    *,
    first: bool,
    round_: int,
    rounds: int,
) -> str:
    """The message of a member's turn. ``since``: the answers given since its last turn in
    this message (its earlier turns are in its own history); ``first``: its first turn of
    this message, which carries the question."""
    heard = [turn for turn in since if turn.ok and turn.member != member.id]
    where = f'the panel "{panel.name}"'
    if rounds > 1:
        where += f", round {round_} of {rounds}"
    if first and not heard:
        return question
    if first:
        return (
            f"{question}\n\n[On {where}. Said before your turn:]\n\n{_said_block(heard)}\n\n"
            "[Give your own answer; you may take up what the others said.]"
        )
    if not heard:
        return f"[On {where}. Nobody spoke since your last turn: go on.]"
    return (
        f"[On {where}. Said since your last turn:]\n\n{_said_block(heard)}\n\n"
        "[Go on: answer them, or add what is still missing.]"
    )


def pick_prompt(
    panel: Persona, members: Sequence[Persona], question: str, said: Sequence[Said], left: int
) -> str:
    """The moderator's question before each turn: who speaks next."""
    roster = "\n".join(f"- {m.id}: {m.name}, {' '.join(m.description.split())}" for m in members)
    spoken = [turn for turn in said if turn.ok]
    so_far = _said_block(spoken) if spoken else "(nobody has spoken yet)"
    end = f", or {DONE} if the discussion has answered the question" if spoken else ""
    ids = ", ".join(m.id for m in members)
    return (
        f'You moderate the panel "{panel.name}" ({" ".join(panel.description.split())}).\n\n'
        f"The question put to the panel:\n{question}\n\nThe members:\n{roster}\n\n"
        f"Said so far:\n\n{so_far}\n\n"
        f"Who should speak next ({left} turn(s) left)? Answer with the id of one member "
        f"only ({ids}){end}."
    )


def synthesis_prompt(panel: Persona, question: str, said: Sequence[Said]) -> str:
    """The moderator's last task: the synthesis, the panel's final answer."""
    spoken = [turn for turn in said if turn.ok]
    heard = _said_block(spoken) if spoken else "(no member could answer)"
    return (
        f'You moderated the panel "{panel.name}" on this question:\n{question}\n\n'
        f"What the members said:\n\n{heard}\n\n"
        "Write the panel's synthesis for the person who asked: where the members agree, "
        "where they differ, and what follows."
    )


def parse_pick(answer: str, members: Sequence[Persona]) -> str | None:
    """The member a moderator's answer names first (by id or by name, any case), or
    :data:`DONE`; ``None`` when it names none."""
    found: list[tuple[int, str]] = []
    for member in members:
        for label in (member.id, member.name):
            match = re.search(rf"(?<![\w-]){re.escape(label)}(?![\w-])", answer, re.IGNORECASE)
            if match is not None:
                found.append((match.start(), member.id))
    done = re.search(rf"\b{DONE}\b", answer)
    if done is not None:
        found.append((done.start(), DONE))
    return min(found)[1] if found else None
