"""The gRPC service's error statuses: the SDK's table against the specification's, and the
hub's own refusals (authentication, authorization, limits) as gRPC status codes.

The SDK's map is checked row by row against A2A 1.0.1's table (section 5.4): it agrees
today, so the hub has no correction for it; this test fails when an SDK release changes
a row, and the hub must then decide (a fix in ``a2a/sdk_fixes/``, or following it).
"""

from __future__ import annotations

import grpc
from a2a.server.request_handlers.grpc_handler import _ERROR_CODE_MAP

from a2a import types
from persona_agent.a2a.context_keys import BINDING_KEY, PERSONA_STATE_KEY
from persona_agent.api.grpc.grpc_service import (
    _CALL,
    _ContextBuilder,
    grpc_status_of,
    version_refusal,
)

SPEC_GRPC_STATUSES = {
    types.TaskNotFoundError: grpc.StatusCode.NOT_FOUND,
    types.TaskNotCancelableError: grpc.StatusCode.FAILED_PRECONDITION,
    # A2A 1.0.0 said UNIMPLEMENTED for these three; 1.0.1 corrected them (and the SDK).
    types.PushNotificationNotSupportedError: grpc.StatusCode.FAILED_PRECONDITION,
    types.UnsupportedOperationError: grpc.StatusCode.FAILED_PRECONDITION,
    types.VersionNotSupportedError: grpc.StatusCode.FAILED_PRECONDITION,
    types.ContentTypeNotSupportedError: grpc.StatusCode.INVALID_ARGUMENT,
    types.InvalidAgentResponseError: grpc.StatusCode.INTERNAL,
    types.ExtendedAgentCardNotConfiguredError: grpc.StatusCode.FAILED_PRECONDITION,
    types.ExtensionSupportRequiredError: grpc.StatusCode.FAILED_PRECONDITION,
    # The JSON-RPC errors of the table's binding-specific rows.
    types.InvalidRequestError: grpc.StatusCode.INVALID_ARGUMENT,
    types.InvalidParamsError: grpc.StatusCode.INVALID_ARGUMENT,
    types.InternalError: grpc.StatusCode.INTERNAL,
}
"""A2A 1.0.1, section 5.4 (https://a2a-protocol.org/latest/specification/#54-error-code-mappings)."""


def test_the_sdks_grpc_statuses_are_the_specifications() -> None:
    for error, status in SPEC_GRPC_STATUSES.items():
        assert _ERROR_CODE_MAP.get(error) == status, (
            f"the SDK now answers {error.__name__} with {_ERROR_CODE_MAP.get(error)}, the "
            f"specification says {status}: correct it in persona_agent/a2a/sdk_fixes/"
        )


def test_the_hubs_refusals_have_their_grpc_status() -> None:
    assert grpc_status_of(401) == grpc.StatusCode.UNAUTHENTICATED
    assert grpc_status_of(403) == grpc.StatusCode.PERMISSION_DENIED
    assert grpc_status_of(404) == grpc.StatusCode.NOT_FOUND
    assert grpc_status_of(429) == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_credentials_in_the_metadata_stay_out_of_the_call_context() -> None:
    """The SDK logs call contexts: the metadata kept as headers has no credential."""
    headers = {
        "x-api-key": "secret-key",
        "authorization": "Bearer secret-token",
        "a2a-version": "1.0",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    }
    token = _CALL.set({"headers": headers, "persona_id": "socrates"})
    try:
        context = _ContextBuilder().build(None)
    finally:
        _CALL.reset(token)
    kept = context.state["headers"]
    assert "x-api-key" not in kept
    assert "authorization" not in kept
    assert kept["a2a-version"] == "1.0"
    assert "secret" not in repr(context.state)
    assert context.state[PERSONA_STATE_KEY] == "socrates"
    assert context.state[BINDING_KEY] == "grpc"


def test_only_a2a_1_x_or_no_version_is_served() -> None:
    """This service is A2A 1.0's (0.3's is ``a2a.v1.A2AService``, not served): 1.x and an
    absent value are served; anything else is VersionNotSupported naming the value."""
    for served in (None, "", "1", "1.0", "1.0.1", " 1.0 "):
        assert version_refusal(served) is None, served
    for refused in ("0.3", "9.9", "2.0", "garbage", "1.0-beta", "v1.0", "1.", "01.0x"):
        error = version_refusal(refused)
        assert isinstance(error, types.VersionNotSupportedError), refused
        assert f"'{refused}'" in error.message
    long = version_refusal("9" * 1000)
    assert long is not None
    assert len(long.message) < 400  # a huge value is not echoed whole
