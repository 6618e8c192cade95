"""The life of a task, as every executor of the hub runs it: what the registry needs of
each (the tasks it runs now, and stopping one that another replica canceled)."""

from __future__ import annotations

from abc import abstractmethod

from a2a.server.agent_execution import AgentExecutor
from a2a.server.context import ServerCallContext

__all__ = ["TaskExecutor"]


class TaskExecutor(AgentExecutor):
    """The SDK's executor, with the tasks it answers now (``running``: task id → the call
    context that started it) and :meth:`canceled_elsewhere`."""

    running: dict[str, ServerCallContext]

    @abstractmethod
    async def canceled_elsewhere(self, task_id: str) -> bool:
        """Stop answering a task another replica canceled; whether it was running here."""
