"""What one attempt at an outside agent learned: the remote task and its answer as the
a2a-sdk client streams it (:class:`Exchange`), or how the attempt failed (:class:`Failure`),
which decides whether it is retried and whether the agent's breaker counts it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import grpc
import grpc.aio
import httpx
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import Message, StreamResponse, TaskState
from a2a.utils.errors import A2AError, InternalError

from persona_agent.a2a.context_keys import ENDED_STATE_NAMES
from persona_agent.security.egress.outbound import UrlRefused

__all__ = ["Exchange", "Failure", "FailureKind", "failure_of", "http_status", "retryable"]

FailureKind = Literal["transient", "failure", "refused", "timeout"]

_RETRYABLE_STATUS = {429, 502, 503, 504}


class Failure(Exception):
    """An attempt that failed.

    ``kind``: ``transient`` (no connection, 429, 502, 503, 504: retried, counted by the
    breaker), ``failure`` (the agent failed otherwise: counted, not retried),
    ``refused`` (4xx, a protocol error, a rejected task: says nothing of the agent's
    health, not retried) or ``timeout`` (counted, not retried: the agent may still be
    working on the message). ``retry_after``: seconds the agent asked to wait.
    """

    def __init__(self, kind: FailureKind, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after = retry_after


@dataclass(slots=True)
class Exchange:
    """What one attempt learned: the remote task, the answer's text, and how it ended."""

    task_id: str = ""
    context_id: str = ""
    state: str = ""
    """``completed``, ``failed``, ``canceled``, ``rejected``, ``input-required`` or
    ``auth-required``; empty while the answer goes on."""
    chunks: list[str] = field(default_factory=list)
    artifact_text: str = ""
    status_text: str = ""
    resumed: str = ""
    """The task the message continues (it asked for input): a snapshot of it that still
    says ``input-required`` before any update is its past, not its answer."""
    updated: bool = False

    def reset(self) -> None:
        """Forget an attempt that failed before the answer began."""
        self.task_id = self.context_id = self.state = ""
        self.chunks = []
        self.artifact_text = self.status_text = ""
        self.updated = False

    def take(self, response: StreamResponse) -> str:
        """Read one event; the text it adds to the answer."""
        if response.HasField("message"):
            message = response.message
            self.context_id = message.context_id or self.context_id
            self.state, self.status_text = "completed", _text(message)
            return ""
        if response.HasField("task"):
            task = response.task
            self.task_id, self.context_id = task.id, task.context_id or self.context_id
            stale = (
                task.id == self.resumed
                and not self.updated
                and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            )
            if task.status.state in ENDED_STATE_NAMES and not stale:
                self.state = ENDED_STATE_NAMES[task.status.state]
                self.status_text = _text(task.status.message)
                self.artifact_text = "".join(
                    part.text for artifact in task.artifacts for part in artifact.parts
                )
            return ""
        if response.HasField("status_update"):
            update = response.status_update
            self.updated = True
            self.task_id = update.task_id or self.task_id
            self.context_id = update.context_id or self.context_id
            if update.status.state in ENDED_STATE_NAMES:
                self.state = ENDED_STATE_NAMES[update.status.state]
                self.status_text = _text(update.status.message)
            return ""
        if response.HasField("artifact_update"):
            self.updated = True
            chunk = "".join(part.text for part in response.artifact_update.artifact.parts)
            if chunk:
                self.chunks.append(chunk)
            return chunk
        return ""

    @property
    def answer(self) -> str:
        """The answer: its artifacts' text, else its final message's."""
        return "".join(self.chunks) or self.artifact_text or self.status_text


def failure_of(error: A2AError) -> Failure:
    """What an error of the SDK client says about the attempt."""
    rpc = _cause(error, grpc.aio.AioRpcError)
    if isinstance(rpc, grpc.aio.AioRpcError):
        return _grpc_failure(rpc.code(), rpc.details() or "")
    refused = _cause(error, UrlRefused)
    if refused is not None:  # its name answers otherwise now: no retry makes it public
        return Failure("refused", f"it may not be called: {refused}")
    status = http_status(error)
    cause = _cause(error, httpx.TransportError)
    if status is not None:
        retry_after = None
        response = _cause(error, httpx.HTTPStatusError)
        if isinstance(response, httpx.HTTPStatusError):
            retry_after = _retry_after(response.response.headers.get("retry-after"))
        if retryable(status):
            return Failure("transient", f"it answered HTTP {status}", retry_after)
        if status >= 500:
            return Failure("failure", f"it answered HTTP {status}")
        if status in (401, 403):
            return Failure("refused", f"it refused the hub's credentials (HTTP {status})")
        return Failure("refused", f"it refused the message (HTTP {status})")
    if isinstance(cause, httpx.ConnectError | httpx.ConnectTimeout):
        return Failure("transient", f"it could not be reached ({cause!r})")
    if isinstance(cause, httpx.TimeoutException):
        return Failure("timeout", f"it stopped answering ({cause!r})")
    if isinstance(cause, httpx.TransportError):
        return Failure("failure", f"the connection broke ({cause!r})")
    if isinstance(error, InternalError) or type(error) is A2AClientError:
        return Failure("failure", f"it failed: {error.message}")
    return Failure("refused", f"it refused the message: {error.message}")


def _cause(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def http_status(error: BaseException) -> int | None:
    """The HTTP status of the error's answer (over gRPC: the status's HTTP equivalent)."""
    found = _cause(error, httpx.HTTPStatusError)
    if isinstance(found, httpx.HTTPStatusError):
        return found.response.status_code
    rpc = _cause(error, grpc.aio.AioRpcError)
    return _GRPC_HTTP.get(rpc.code()) if isinstance(rpc, grpc.aio.AioRpcError) else None


_GRPC_HTTP = {
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
}
"""The gRPC statuses that are an HTTP status's (for the credentials and the retries)."""


def _grpc_failure(code: grpc.StatusCode, details: str) -> Failure:
    """What a gRPC status says about the attempt: as the HTTP statuses (UNAVAILABLE,
    RESOURCE_EXHAUSTED: transient; UNAUTHENTICATED, PERMISSION_DENIED: refused), a deadline
    a timeout, a server's error a failure, the rest a refusal."""
    name = f"gRPC {code.name}"
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
        return Failure("transient", f"it answered {name}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Failure("timeout", f"it stopped answering ({name})")
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return Failure("refused", f"it refused the hub's credentials ({name})")
    if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS):
        return Failure("failure", f"it failed ({name})")
    return Failure("refused", f"it refused the message ({name}: {details[:300]})")


def retryable(status: int) -> bool:
    return status in _RETRYABLE_STATUS


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds (an HTTP date is not honoured: the backoff applies)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _text(message: Message) -> str:
    return "\n".join(part.text for part in message.parts if part.text)
