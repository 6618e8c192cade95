"""One message to a panel: its members' turns, each a real A2A task of the member.

A :class:`Meeting` asks the members (and a moderated panel's moderator) through
:class:`~persona_agent.collab.local_calls.LocalCalls`, and streams each answer into the
panel's task as an artifact of its own, named after the member. Each member keeps one
conversation per panel conversation (a context id derived from both), so a panel
conversation goes on like any other: every member remembers its earlier turns.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Artifact, Part, TaskArtifactUpdateEvent, TaskState

from persona_agent.a2a.context_keys import PARTS_METADATA_KEY
from persona_agent.a2a.tasks.executor import data_value
from persona_agent.chat.budget import CallBudget
from persona_agent.collab.local_calls import LocalCalls, LocalEnd, LocalStart, LocalText
from persona_agent.collab.panel_prompts import (
    DONE,
    Said,
    parse_pick,
    pick_prompt,
    role_problem,
    synthesis_prompt,
    turn_prompt,
)
from persona_agent.personas.model import Persona

__all__ = ["PANEL_METADATA_KEY", "SYNTHESIS_ARTIFACT_NAME", "Meeting"]

logger = logging.getLogger(__name__)

PANEL_METADATA_KEY = "persona-agent/panel"
"""Metadata of a panel's artifacts: the member (id, name), its round and its task."""
SYNTHESIS_ARTIFACT_NAME = "synthesis"
_CONTEXTS = uuid.UUID("5d0f7c1e-3b52-4a8e-9f61-2c7d8e4b1a90")


class Meeting:
    """The turns of one panel task. ``stopped()`` tells that the task was canceled: no
    more events are sent, and each member's task still running is canceled."""

    def __init__(
        self,
        panel: Persona,
        *,
        calls: LocalCalls,
        lookup: Callable[[str], Persona | None],
        updater: TaskUpdater,
        origin: ServerCallContext,
        conversation: str,
        chain: tuple[str, ...],
        whole: bool,
        stopped: Callable[[], bool],
        budget: CallBudget | None = None,
    ) -> None:
        """``budget``: the panel task's node of the request's budget; the panel gives no
        turn the budget cannot pay for, and says why (:attr:`halted`)."""
        self.panel = panel
        self.calls = calls
        self.lookup = lookup
        self.updater = updater
        self.origin = origin
        self.conversation = conversation
        self.chain = chain
        self.whole = whole
        self.stopped = stopped
        self.budget = budget
        self.said: list[Said] = []
        self.halted = ""
        """Why the panel stopped giving turns before its end (the budget was spent)."""

    def context_for(self, persona_id: str, purpose: str = "") -> str:
        """The member's (or moderator's) own conversation within this panel conversation."""
        key = f"{self.panel.id}/{self.conversation}/{persona_id}/{purpose}"
        return str(uuid.uuid5(_CONTEXTS, key))

    async def speak(
        self,
        member_id: str,
        prompt: Callable[[Persona], str],
        round_: int,
        *,
        artifact: str = "",
        purpose: str = "",
    ) -> Said:
        """One turn of ``member_id``: its answer streamed as an artifact (named
        ``artifact``, by default after the member), in its conversation for ``purpose``
        (see :meth:`context_for`); how it ended."""
        member = self.lookup(member_id)
        said = Said(member_id, member.name if member is not None else member_id, round_)
        self.said.append(said)
        problem = self._problem(member_id, member)
        if problem is not None or member is None:
            said.state, said.text = "failed", problem or "unknown"
            return said
        context_id = self.context_for(member_id, purpose)
        # The member's conversation: where its answer's prompt is read (docs/prompt.md).
        meta: dict[str, Any] = {
            "member": member_id,
            "memberName": said.name,
            "round": round_,
            "contextId": context_id,
        }
        chunks = _Chunks(self.updater, artifact or said.name, meta, whole=self.whole)
        stream = self.calls.stream(
            member_id,
            prompt(member),
            origin=self.origin,
            chain=self.chain,
            context_id=context_id,
            reference_task_ids=(self.updater.task_id,),
            whole=self.whole,
        )
        try:
            async with aclosing(stream) as events:
                async for event in events:
                    if self.stopped():
                        return said
                    if isinstance(event, LocalStart):
                        said.task_id = meta["taskId"] = event.task_id
                        await self._status(f"{said.name} is answering", kind="panel-turn", **meta)
                    elif isinstance(event, LocalText):
                        said.pieces.append(event.text)
                        await chunks.add(event.text)
                    elif isinstance(event, LocalEnd):
                        said.state = event.state
                        said.text = event.text if event.ok else event.text or "no reason given"
        except Exception as error:  # the member went away mid-turn, say
            logger.warning("panel %s: asking %s failed: %r", self.panel.id, member_id, error)
            said.state, said.text = "failed", f"could not be asked ({type(error).__name__})"
        if not said.state:
            said.state, said.text = "failed", "the answer ended early"
        if said.ok and not said.text:
            said.text = "".join(said.pieces)
        if not self.stopped():
            await chunks.close(said.text if said.ok else "")
        return said

    async def ask_moderator(self, moderator_id: str, prompt: str, turn: int) -> tuple[str, str]:
        """Who speaks at ``turn``: the moderator's answer (not an artifact) and its task
        id; an empty answer when it could not answer. Each pick is a conversation of its
        own (the prompt holds all the moderator needs)."""
        if self._problem(moderator_id, self.lookup(moderator_id)) is not None:
            return "", ""
        answer, task_id = "", ""
        stream = self.calls.stream(
            moderator_id,
            prompt,
            origin=self.origin,
            chain=self.chain,
            context_id=self.context_for(moderator_id, f"pick/{self.updater.task_id}/{turn}"),
            reference_task_ids=(self.updater.task_id,),
            whole=True,
        )
        try:
            async with aclosing(stream) as events:
                async for event in events:
                    if isinstance(event, LocalStart):
                        task_id = event.task_id
                    elif isinstance(event, LocalEnd):
                        answer = event.text if event.ok else ""
        except Exception as error:
            logger.warning("panel %s: its moderator failed: %r", self.panel.id, error)
        return answer, task_id

    # -- the modes --------------------------------------------------------------------

    async def broadcast(self, question: str) -> None:
        """Every member answers ``question`` at once."""
        assert self.panel.panel is not None
        if self._out_of_calls(len(self.panel.panel.members)):
            return
        async with asyncio.TaskGroup() as group:
            for member_id in self.panel.panel.members:
                group.create_task(self.speak(member_id, lambda _m: question, 1))

    async def round_table(self, question: str) -> None:
        """Members speak in order, each seeing the answers since its last turn."""
        settings = self.panel.panel
        assert settings is not None
        for round_ in range(1, settings.rounds + 1):
            for member_id in settings.members:
                if self.stopped() or self._out_of_calls(1):
                    return
                await self.speak(
                    member_id, self._turn(question, member_id, round_, settings.rounds), round_
                )

    async def moderated(self, question: str) -> Said | None:
        """The moderator gives the floor, turn by turn, then writes the synthesis (the
        :data:`SYNTHESIS_ARTIFACT_NAME` artifact), which is returned."""
        settings = self.panel.panel
        assert settings is not None
        assert settings.moderator is not None
        moderator, ids = settings.moderator, settings.members
        members = [m for m in map(self.lookup, ids) if m is not None]
        turns = settings.rounds * len(ids)
        if self.budget is not None and not self.budget.take_model_call():  # the synthesis's
            self._out_of_calls(1)
            return None
        for turn in range(turns):
            if self.stopped() or self._out_of_calls(2):  # a pick and a turn
                break
            text, pick_task = await self.ask_moderator(
                moderator, pick_prompt(self.panel, members, question, self.said, turns - turn), turn
            )
            pick = parse_pick(text, members)
            if pick == DONE and any(said.ok for said in self.said):
                await self._status("The moderator closes the discussion", kind="panel-done")
                break
            fallback = pick is None or pick == DONE
            chosen = self._next_in_order(ids) if pick is None or pick == DONE else pick
            await self._status(
                f"The moderator gives the floor to {chosen}",
                kind="panel-pick",
                member=chosen,
                taskId=pick_task,
                fallback=fallback,
            )
            if self._out_of_calls(1):  # the pick spent more than its call
                break
            await self.speak(chosen, self._turn(question, chosen, turn + 1, turns), turn + 1)
        if self.budget is not None:
            self.budget.give_back_model_call()  # kept for the synthesis: its turn takes it
        if self.stopped():
            return None
        said = self.said[:]
        synthesis = await self.speak(
            moderator,
            lambda _m: synthesis_prompt(self.panel, question, said),
            0,
            artifact=SYNTHESIS_ARTIFACT_NAME,
            purpose=SYNTHESIS_ARTIFACT_NAME,
        )
        self.said.remove(synthesis)
        return synthesis

    def _out_of_calls(self, needed: int) -> bool:
        """Whether the request's budget has fewer than ``needed`` model calls left for
        the next turn; if so, :attr:`halted` says why the panel gives no more."""
        budget = self.budget
        left = budget.model_calls_left() if budget is not None else None
        if budget is None or left is None or left >= needed:
            return False
        limit = budget.limit("model")
        turns = sum(1 for said in self.said if said.round > 0)
        spent = "is spent" if left == 0 else f"has {left} left, too few for another turn"
        self.halted = (
            f"The budget of {limit} model calls for this request {spent}: "
            f"the panel stopped after {turns} turn{'' if turns == 1 else 's'}"
        )
        return True

    def _next_in_order(self, ids: list[str]) -> str:
        """The fallback when the moderator names nobody: the member who has spoken least,
        the first in order among equals (round order)."""
        spoken = [said.member for said in self.said]
        return min(ids, key=lambda member: (spoken.count(member), ids.index(member)))

    def _turn(
        self, question: str, member_id: str, round_: int, rounds: int
    ) -> Callable[[Persona], str]:
        """The prompt of a turn, made when it starts: what was said up to then."""
        earlier = [i for i, said in enumerate(self.said) if said.member == member_id]
        since = self.said[earlier[-1] + 1 :] if earlier else self.said[:]
        assert self.panel.panel is not None
        shown = rounds if self.panel.panel.mode == "round-table" else 1

        def prompt(member: Persona) -> str:
            return turn_prompt(
                self.panel, member, question, since, first=not earlier, round_=round_, rounds=shown
            )

        return prompt

    def _problem(self, persona_id: str, persona: Persona | None) -> str | None:
        """Why ``persona_id`` cannot take part in this panel, if it cannot (whether the
        caller may call it is decided where every call is: the personas' request handler,
        whose refusal ends the turn ``rejected``)."""
        return role_problem(self.panel, persona_id, persona)

    async def _status(self, text: str, **data: Any) -> None:
        if self.stopped():
            return
        updater = self.updater
        message = updater.new_agent_message([Part(text=text), Part(data=data_value(data))])
        await updater.update_status(TaskState.TASK_STATE_WORKING, message)


class _Chunks:
    """One member's answer artifact, chunk by chunk (or whole at the end, ``whole``); each
    chunk tells how many parts the artifact has with it (:data:`PARTS_METADATA_KEY`)."""

    def __init__(
        self, updater: TaskUpdater, name: str, meta: dict[str, Any], *, whole: bool
    ) -> None:
        self._updater = updater
        self._name = name
        self._meta = meta
        self._whole = whole
        self._id = str(uuid.uuid4())
        self._parts = 0

    async def add(self, text: str) -> None:
        if not self._whole:
            await self._send(text, last=False)

    async def close(self, whole_text: str) -> None:
        """The last chunk: empty after streamed ones, else the whole answer (if any)."""
        if self._parts:
            await self._send("", last=True)
        elif whole_text:
            await self._send(whole_text, last=True)

    async def _send(self, text: str, *, last: bool) -> None:
        self._parts += 1
        artifact = Artifact(artifact_id=self._id, name=self._name, parts=[Part(text=text)])
        artifact.metadata.update({PANEL_METADATA_KEY: self._meta})
        event = TaskArtifactUpdateEvent(
            task_id=self._updater.task_id,
            context_id=self._updater.context_id,
            artifact=artifact,
            append=self._parts > 1,
            last_chunk=last,
        )
        event.metadata.update({PARTS_METADATA_KEY: self._parts})
        await self._updater.event_queue.enqueue_event(event)
