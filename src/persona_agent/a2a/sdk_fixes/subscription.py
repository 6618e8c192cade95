"""A task subscription without the events its first snapshot already holds.

a2a-sdk 1.3's ``DefaultRequestHandler.on_subscribe_to_task`` taps the task's live
events, then reads the task and sends it first: an event applied in between is
in that snapshot and comes again from the tap, so a client that appends artifact
chunks shows a piece of the answer twice (A2A 1.0, section 3.1.6: the stream
carries the events after the task). :func:`without_replayed` drops those first
events until one the snapshot does not hold.

Canary: ``tests/a2a/test_sdk_fixes.py::test_sdk_subscription_reads_the_task_after_tapping``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from a2a.server.events import Event
from a2a.types.a2a_pb2 import Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent

__all__ = ["without_replayed"]

_SEAM_PASSED = Task()
"""Stands for the snapshot once an event it does not hold has come."""


async def without_replayed(events: AsyncGenerator[Event], parts_key: str) -> AsyncGenerator[Event]:
    """``events`` of a subscription, less the first ones its task snapshot holds.

    ``parts_key`` names the metadata field in which an artifact chunk tells how many
    parts its artifact has with it (the hub's answer chunks carry it).
    """
    snapshot: Task | None = None
    async with aclosing(events):
        async for event in events:
            if isinstance(event, Task) and snapshot is None:
                # A copy: the SDK's task object keeps changing as events are applied.
                snapshot = Task()
                snapshot.CopyFrom(event)
                event = snapshot
            elif snapshot is not None and _held_by(snapshot, event, parts_key):
                continue
            else:
                snapshot = _SEAM_PASSED
            yield event


def _held_by(snapshot: Task, event: Event, parts_key: str) -> bool:
    """Whether ``snapshot`` already reflects ``event``."""
    if snapshot is _SEAM_PASSED:
        return False
    if isinstance(event, TaskArtifactUpdateEvent):
        artifact = next(
            (a for a in snapshot.artifacts if a.artifact_id == event.artifact.artifact_id), None
        )
        if artifact is None:
            return False
        parts = event.metadata.fields.get(parts_key)
        if parts is not None:  # the hub's answer chunks count their parts
            return parts.number_value <= len(artifact.parts)
        return not event.append and artifact == event.artifact
    if isinstance(event, TaskStatusUpdateEvent):
        stored, new = snapshot.status, event.status
        return new.timestamp.ToNanoseconds() < stored.timestamp.ToNanoseconds() or new == stored
    return False
