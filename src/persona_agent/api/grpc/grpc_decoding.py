"""Requests whose bytes are not their method's message: refused ``INVALID_ARGUMENT``, by name.

grpcio decodes a request before any code of the hub runs, and bytes that are not the
method's protobuf message (a corrupt or truncated body, a message nested past protobuf's
depth limit, another method's request) make its aio server answer ``UNKNOWN`` with the
parser's exception as the status details, and log a stack trace at ERROR for each: a
server error for what a client sent, and a log anyone can fill. This interceptor decodes
in the handler's place; bytes that do not decode reach the method as a refusal, which
answers ``INVALID_ARGUMENT`` naming the message that was expected (A2A's mapping of an
invalid request).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from google.protobuf.message import DecodeError

__all__ = ["DecodingInterceptor"]

Decoder = Callable[[bytes], Any]


@dataclass(frozen=True)
class _Undecodable:
    """A request that did not decode: what the client is told."""

    message: str


def _tolerant(decode: Decoder, method: str) -> Decoder:
    def decoded(raw: bytes) -> Any:
        try:
            return decode(raw)
        except (DecodeError, RuntimeError, ValueError) as error:
            reason = str(error) or type(error).__name__
            return _Undecodable(
                f"The request to {method} is not its protobuf message ({reason[:300]}): send "
                "the request the service's proto declares (the a2a-sdk client does)"
            )

    return decoded


def _unary(behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def served(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if isinstance(request, _Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
        return await behavior(request, context)

    return served


def _streamed(behavior: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    async def served(
        request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        if isinstance(request, _Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
        async for response in behavior(request, context):
            yield response

    return served


class DecodingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc is untyped
    """Decodes each unary-request call's request itself (see the module's docstring)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler: Any = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        method = str(handler_call_details.method)
        decode = _tolerant(handler.request_deserializer, method)
        if handler.unary_unary is not None:
            return handler._replace(
                request_deserializer=decode, unary_unary=_unary(handler.unary_unary)
            )
        if handler.unary_stream is not None:
            return handler._replace(
                request_deserializer=decode, unary_stream=_streamed(handler.unary_stream)
            )
        return handler
