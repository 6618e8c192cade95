"""The bridge from a generation in a worker thread to the event loop: what the thread hands
over (text, the prompt's size, the end, a failure), and the job that carries it."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from persona_agent.llm.base import Usage
from persona_agent.personas.turn_prompt import PromptSections

__all__ = ["Failed", "Finished", "Item", "Job", "Reading", "ends"]


@dataclass(frozen=True, slots=True)
class Finished:
    """The answer is over: its usage and why it ended."""

    usage: Usage
    finish_reason: str


@dataclass(frozen=True, slots=True)
class Failed:
    """The generation failed (raised on the event loop's side)."""

    error: Exception


@dataclass(frozen=True, slots=True)
class Reading:
    """The prompt is being read: so many tokens."""

    tokens: int


Item = str | Reading | Finished | Failed


def ends(item: Item) -> bool:
    """Whether ``item`` is the last a job hands over."""
    return isinstance(item, Finished | Failed)


@dataclass(eq=False)  # hashed by identity: kept in a set while it runs
class Job:
    """One generation: its request, and the bridge from the worker thread to the event loop."""

    messages: list[dict[str, object]]
    sections: PromptSections
    max_tokens: int
    temperature: float
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[Item] = field(default_factory=asyncio.Queue)
    cancel: threading.Event = field(default_factory=threading.Event)

    def put(self, item: Item) -> None:
        """Hand ``item`` to the event loop (called from the worker thread)."""
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self.cancel.set()
