"""The SDK's server parts lose their tracing wrappers when its tracing is off, and keep
them when it is on (``a2a/sdk_fixes/untraced.py``). Each case runs in a process of its
own: the SDK reads its switch once, when it is imported, and the unwrapping is for the
whole process."""

from __future__ import annotations

import os
import subprocess
import sys

_PROGRAM = """
import asyncio
from a2a.server.events.event_queue_v2 import EventQueueSource
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import task_manager
from a2a.types.a2a_pb2 import Artifact, Part, Task, TaskArtifactUpdateEvent
from persona_agent.a2a.sdk_fixes.untraced import drop_idle_tracing

replaced = drop_idle_tracing()
task = Task(id="t", context_id="c")
chunk = TaskArtifactUpdateEvent(
    task_id="t", context_id="c", artifact=Artifact(artifact_id="a", parts=[Part(text="hi")])
)
task_manager.append_artifact_to_task(task, chunk)


async def queued() -> str:
    queue = EventQueueSource()
    await queue.enqueue_event(chunk)
    got = await queue.dequeue_event()
    await queue.close(immediate=True)
    return got.artifact.parts[0].text


print(
    replaced,
    EventQueueSource.enqueue_event.__code__.co_name,
    DefaultRequestHandler.on_message_send.__code__.co_filename.rsplit("/", 1)[-1],
    task_manager.append_artifact_to_task.__code__.co_name,
    task.artifacts[0].parts[0].text,
    asyncio.run(queued()),
)
"""


def _run(switch: str) -> list[str]:
    environment = {**os.environ, "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": switch}
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_tracing_off_puts_the_sdks_own_functions_back_and_they_still_work() -> None:
    replaced, enqueue, send, append, appended, dequeued = _run("false")
    assert int(replaced) > 10
    assert (enqueue, append) == ("enqueue_event", "append_artifact_to_task")
    assert send != "telemetry.py"  # the SDK's handler (or its version check), untraced
    assert (appended, dequeued) == ("hi", "hi")


def test_tracing_on_keeps_the_wrappers() -> None:
    replaced, enqueue, send, append, appended, dequeued = _run("true")
    assert replaced == "0"
    assert (enqueue, append) == ("async_wrapper", "sync_wrapper")
    assert send == "telemetry.py"
    assert (appended, dequeued) == ("hi", "hi")
