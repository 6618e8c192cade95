"""The specification's error for each failure, on the wire of each binding and version.

Hand-written requests (:class:`~tests.conformance.conftest.Wire`): JSON-RPC answers
``200`` with the error code of the spec's table (section 5.4); HTTP+JSON answers the
table's HTTP status with a ``google.rpc.Status`` body whose ``ErrorInfo`` names the reason;
gRPC answers the table's status code with the same ``ErrorInfo`` in the status details.
"""

from __future__ import annotations

import pytest

from tests.conformance.conftest import (
    ALL_TRANSPORTS,
    MODULE_LOOP,
    SPEC_ERRORS,
    Wire,
    file_part,
    text_part,
)
from tests.conformance.grpc_wire import wire_of
from tests.fakes.fake_llm import FakeLLM
from tests.integration.conftest import Hub

pytestmark = MODULE_LOOP


async def _finished_task(wire: Wire) -> str:
    task = wire.task(await wire.send_message([text_part("Hello")]))
    assert wire.state(task) == "TASK_STATE_COMPLETED"
    return str(task["id"])


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_unknown_task_is_task_not_found(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    wire = wire_of(module_hub, "socrates", transport)
    for response in (
        await wire.get_task("no-such-task"),
        await wire.cancel_task("no-such-task"),
        await wire.send_message([text_part("Continue")], task_id="no-such-task"),
    ):
        assert wire.error(response).matches(wire.binding, SPEC_ERRORS["TaskNotFound"])


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_canceling_a_finished_task_is_task_not_cancelable(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    wire = wire_of(module_hub, "socrates", transport)
    task_id = await _finished_task(wire)
    error = wire.error(await wire.cancel_task(task_id))
    assert error.matches(wire.binding, SPEC_ERRORS["TaskNotCancelable"])


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_a_follow_up_to_a_finished_task_is_unsupported_operation(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    # Spec 3.1.1: a task in a terminal state cannot accept further messages.
    wire = wire_of(module_hub, "socrates", transport)
    task_id = await _finished_task(wire)
    requests_before = len(llm.requests)
    error = wire.error(await wire.send_message([text_part("One more thing")], task_id=task_id))
    assert error.matches(wire.binding, SPEC_ERRORS["UnsupportedOperation"])
    assert task_id in error.message
    assert len(llm.requests) == requests_before  # the model never saw it


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_subscribing_to_a_finished_task_is_unsupported_operation(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    wire = wire_of(module_hub, "socrates", transport)
    task_id = await _finished_task(wire)
    error = wire.error(await wire.subscribe(task_id))
    assert error.matches(wire.binding, SPEC_ERRORS["UnsupportedOperation"])


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_extended_card_is_unsupported_while_the_card_says_so(
    module_hub: Hub, transport: tuple[str, str]
) -> None:
    # Spec 3.3.4: capabilities.extendedAgentCard false => UnsupportedOperationError
    # (ExtendedAgentCardNotConfiguredError is for a card that claims one but has none).
    card = (await module_hub.http.get("/a2a/socrates/.well-known/agent-card.json")).json()
    assert not card["capabilities"].get("extendedAgentCard", False)
    wire = wire_of(module_hub, "socrates", transport)
    error = wire.error(await wire.extended_card())
    assert error.matches(wire.binding, SPEC_ERRORS["UnsupportedOperation"])


@pytest.mark.parametrize("operation", ["Create", "Get", "List", "Delete"])
@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_push_notification_config_methods_are_not_supported(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str], operation: str
) -> None:
    wire = wire_of(module_hub, "socrates", transport)
    task_id = await _finished_task(wire)
    error = wire.error(await wire.push_config(operation, task_id))
    assert error.matches(wire.binding, SPEC_ERRORS["PushNotificationNotSupported"])


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_a_file_of_an_unsupported_media_type_is_content_type_not_supported(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    wire = wire_of(module_hub, "socrates", transport)
    # socrates sees images (the hub's default model does): an SVG is refused all the same
    svg = file_part(b'<svg xmlns="http://www.w3.org/2000/svg"/>', "image/svg+xml", "dot.svg")
    error = wire.error(await wire.send_message([text_part("Look at this"), svg]))
    assert error.matches(wire.binding, SPEC_ERRORS["ContentTypeNotSupported"])
    assert "image/svg+xml" in error.message
    assert llm.requests == []


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
@pytest.mark.parametrize("version", ["9.9", "2.0"])
async def test_an_unsupported_a2a_version_is_version_not_supported(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str], version: str
) -> None:
    wire = wire_of(module_hub, "socrates", transport)
    wire.headers = {"A2A-Version": version}
    for response in (
        await wire.get_task("no-such-task"),
        await wire.send_message([text_part("Hello from the future")]),
    ):
        error = wire.error(response)
        assert error.matches(wire.binding, SPEC_ERRORS["VersionNotSupported"]), error
        assert version in error.message
    assert llm.requests == []


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_the_other_supported_version_on_an_endpoint_is_version_not_supported(
    module_hub: Hub, transport: tuple[str, str]
) -> None:
    # One URL serves both versions by method name (JSON-RPC) or path (HTTP+JSON); a 1.0
    # request declaring 0.3 (or the reverse) is refused, not misread. gRPC serves 1.0 alone:
    # its requests declaring 0.3 are refused alike.
    wire = wire_of(module_hub, "socrates", transport)
    wire.headers = {"A2A-Version": "0.3" if transport[1] == "1.0" else "1.0"}
    error = wire.error(await wire.get_task("no-such-task"))
    assert error.matches(wire.binding, SPEC_ERRORS["VersionNotSupported"])
