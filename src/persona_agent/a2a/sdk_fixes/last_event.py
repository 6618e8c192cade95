"""A stream that ends on a task another replica finished ends with its status, not the task.

a2a-sdk 1.3's ``ActiveTask._process_event``: when saving an event finds the task advanced
by another writer (a cancel through another replica) and the task is now terminal, it
reloads the task and hands its subscribers the whole ``Task`` as their stream's last event.
Any write of the replica running the task between the other's cancel and its own cancel
status does so: a streamed chunk, a panel member's turn. A v0.3 client's stream then holds
a second task after its first, which a2a-sdk 0.3 refuses ("Task is already set, create new
manager for new tasks"), where A2A 0.3 ends a stream with one final status-update.
:func:`status_for_later_tasks` gives a task after a stream's first event as the status
update of its terminal state, which every protocol version ends a stream with.

Canary: ``tests/a2a/test_sdk_fixes.py::test_sdk_hands_subscribers_the_reloaded_task``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from a2a.server.events import Event
from a2a.types.a2a_pb2 import Task, TaskStatusUpdateEvent

from persona_agent.a2a.context_keys import TERMINAL_STATES

__all__ = ["status_for_later_tasks"]


async def status_for_later_tasks(events: AsyncGenerator[Event]) -> AsyncGenerator[Event]:
    """``events`` of a stream, a terminal task after the first event given as its status."""
    first = True
    async with aclosing(events):
        async for event in events:
            if not first and isinstance(event, Task) and event.status.state in TERMINAL_STATES:
                yield TaskStatusUpdateEvent(
                    task_id=event.id, context_id=event.context_id, status=event.status
                )
            else:
                yield event
            first = False
