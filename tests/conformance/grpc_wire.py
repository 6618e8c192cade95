"""The conformance suite's third binding: :class:`GrpcWire` speaks A2A 1.0 over gRPC with the
SDK's generated stubs (``a2a.types.a2a_pb2_grpc``, no SDK client), and answers as
:class:`~tests.conformance.conftest.Wire` does, so one scenario test reads every binding.

Each answer is given back as an ``httpx.Response`` of the shape ``Wire`` reads: a result as
its proto JSON (status 200), a stream as ``text/event-stream`` events, an error with the
gRPC status name in a ``grpc-status`` header and the ``google.rpc.ErrorInfo`` reason of the
status details in the body.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import grpc.aio
import httpx
from a2a.types import a2a_pb2, a2a_pb2_grpc
from a2a.utils.grpc_status import status_from_call
from google.protobuf import json_format
from google.protobuf.message import Message as Proto
from google.rpc import error_details_pb2

from tests.conformance.conftest import Wire, WireError
from tests.integration.conftest import Hub

__all__ = ["GrpcWire", "grpc_address", "wire_of"]

_ERROR_STATUS = 599
"""The HTTP status of a gRPC error's stand-in response (no HTTP binding answers it)."""


def grpc_address(hub: Hub) -> str:
    """The address of the hub's gRPC server (its cards say it)."""
    address = getattr(hub.app, "parts").registry.grpc_address  # noqa: B009 (HubApp's)
    assert isinstance(address, str), "this hub serves no gRPC (grpc_port unset)"
    return address


def wire_of(hub: Hub, persona_id: str, transport: tuple[str, str]) -> Wire:
    """The :class:`Wire` of ``transport`` to ``persona_id``: gRPC's, or the HTTP one."""
    if transport[0] == "GRPC":
        return GrpcWire(hub.http, persona_id, transport, grpc_address(hub))
    return Wire(hub.http, persona_id, transport)


class GrpcWire(Wire):
    """:class:`Wire` over gRPC: the persona is the requests' ``tenant``."""

    def __init__(
        self, http: httpx.AsyncClient, persona_id: str, transport: tuple[str, str], address: str
    ) -> None:
        super().__init__(http, persona_id, transport)
        self.address = address

    # -- operations ----------------------------------------------------------------

    async def send_message(
        self,
        parts: list[dict[str, Any]],
        *,
        task_id: str | None = None,
        context_id: str | None = None,
        return_immediately: bool = False,
    ) -> httpx.Response:
        request = a2a_pb2.SendMessageRequest(
            message=self._proto_message(parts, task_id, context_id), tenant=self.persona_id
        )
        request.configuration.return_immediately = return_immediately
        return await self._unary(lambda stub: stub.SendMessage, request)

    async def send_streaming_message(
        self, parts: list[dict[str, Any]], *, context_id: str | None = None
    ) -> httpx.Response:
        request = a2a_pb2.SendMessageRequest(
            message=self._proto_message(parts, None, context_id), tenant=self.persona_id
        )
        return await self._stream(lambda stub: stub.SendStreamingMessage, request)

    async def get_task(self, task_id: str, history_length: int | None = None) -> httpx.Response:
        request = a2a_pb2.GetTaskRequest(id=task_id, tenant=self.persona_id)
        if history_length is not None:
            request.history_length = history_length
        return await self._unary(lambda stub: stub.GetTask, request)

    async def cancel_task(self, task_id: str) -> httpx.Response:
        request = a2a_pb2.CancelTaskRequest(id=task_id, tenant=self.persona_id)
        return await self._unary(lambda stub: stub.CancelTask, request)

    async def subscribe(self, task_id: str) -> httpx.Response:
        request = a2a_pb2.SubscribeToTaskRequest(id=task_id, tenant=self.persona_id)
        return await self._stream(lambda stub: stub.SubscribeToTask, request)

    async def extended_card(self) -> httpx.Response:
        request = a2a_pb2.GetExtendedAgentCardRequest(tenant=self.persona_id)
        return await self._unary(lambda stub: stub.GetExtendedAgentCard, request)

    async def push_config(self, operation: str, task_id: str) -> httpx.Response:
        tenant = self.persona_id
        if operation == "Create":
            create = a2a_pb2.TaskPushNotificationConfig(
                task_id=task_id, url="https://client.example.com/hook", tenant=tenant
            )
            return await self._unary(lambda s: s.CreateTaskPushNotificationConfig, create)
        if operation == "Get":
            get = a2a_pb2.GetTaskPushNotificationConfigRequest(
                task_id=task_id, id="config-1", tenant=tenant
            )
            return await self._unary(lambda s: s.GetTaskPushNotificationConfig, get)
        if operation == "List":
            listed = a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id, tenant=tenant)
            return await self._unary(lambda s: s.ListTaskPushNotificationConfigs, listed)
        delete = a2a_pb2.DeleteTaskPushNotificationConfigRequest(
            task_id=task_id, id="config-1", tenant=tenant
        )
        return await self._unary(lambda s: s.DeleteTaskPushNotificationConfig, delete)

    # -- reading answers -------------------------------------------------------------

    def error(self, response: httpx.Response) -> WireError:
        assert response.status_code == _ERROR_STATUS, response.text
        body = response.json()
        return WireError(0, None, body["reason"], body["message"], response.headers["grpc-status"])

    # -- the wire -----------------------------------------------------------------------

    def _proto_message(
        self, parts: list[dict[str, Any]], task_id: str | None, context_id: str | None
    ) -> a2a_pb2.Message:
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}
        if task_id:
            message["taskId"] = task_id
        if context_id:
            message["contextId"] = context_id
        return json_format.ParseDict(message, a2a_pb2.Message())

    def _metadata(self) -> list[tuple[str, str]]:
        return [(name.lower(), value) for name, value in self.headers.items()]

    async def _unary(
        self,
        method: Callable[[a2a_pb2_grpc.A2AServiceStub], Callable[..., Awaitable[Proto]]],
        request: Proto,
    ) -> httpx.Response:
        async with grpc.aio.insecure_channel(self.address) as channel:
            call = method(a2a_pb2_grpc.A2AServiceStub(channel))
            try:
                answer = await call(request, metadata=self._metadata(), timeout=30)
            except grpc.aio.AioRpcError as error:
                return _error_response(error)
        return httpx.Response(200, json=json_format.MessageToDict(answer))

    async def _stream(
        self,
        method: Callable[[a2a_pb2_grpc.A2AServiceStub], Callable[..., AsyncIterator[Proto]]],
        request: Proto,
    ) -> httpx.Response:
        events: list[dict[str, Any]] = []
        async with grpc.aio.insecure_channel(self.address) as channel:
            call = method(a2a_pb2_grpc.A2AServiceStub(channel))
            try:
                async for event in call(request, metadata=self._metadata(), timeout=30):
                    events.append(json_format.MessageToDict(event))
            except grpc.aio.AioRpcError as error:
                if not events:
                    return _error_response(error)
                events.append({"error": {"status": error.code().name, "message": error.details()}})
        text = "".join(f"data: {json.dumps(event)}\n\n" for event in events)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=text)


def _error_response(error: grpc.aio.AioRpcError) -> httpx.Response:
    """A gRPC error as a stand-in response: the status name, message and ErrorInfo reason."""
    reason = None
    status = status_from_call(error)
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            reason = info.reason
    code: grpc.StatusCode = error.code()
    return httpx.Response(
        _ERROR_STATUS,
        headers={"grpc-status": code.name},
        json={"message": error.details() or "", "reason": reason},
    )
