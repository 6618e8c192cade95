"""A card never claims what its endpoint does not serve (A2A sections 3.3.4, 8.3)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conformance.conftest import MODULE_LOOP, SPEC_ERRORS, Wire, text_part
from tests.conformance.grpc_wire import GrpcWire
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import Hub

pytestmark = MODULE_LOOP


async def _cards(hub: Hub) -> dict[str, dict[str, Any]]:
    listing = (await hub.http.get("/a2a/personas")).json()
    cards = {}
    for row in listing:
        response = await hub.http.get(row["cardUrl"])
        assert response.status_code == 200
        cards[row["id"]] = response.json()
    assert len(cards) >= 7  # the bundled personas and the test personas
    return cards


async def test_every_interface_of_every_card_answers_its_binding_and_version(
    module_hub: Hub,
) -> None:
    for persona_id, card in (await _cards(module_hub)).items():
        interfaces = card["supportedInterfaces"]
        assert {(i["protocolBinding"], i["protocolVersion"]) for i in interfaces} == {
            ("JSONRPC", "1.0"),
            ("JSONRPC", "0.3"),
            ("HTTP+JSON", "1.0"),
            ("HTTP+JSON", "0.3"),
            ("GRPC", "1.0"),
        }
        for interface in interfaces:
            transport = (interface["protocolBinding"], interface["protocolVersion"])
            # Call the interface at its URL (and tenant) exactly as the card gives it.
            wire: Wire
            if transport[0] == "GRPC":
                wire = GrpcWire(module_hub.http, interface["tenant"], transport, interface["url"])
            else:
                wire = Wire(module_hub.http, persona_id, transport)
                wire.root = interface["url"].rstrip("/")
            error = wire.error(await wire.get_task("no-such-task"))
            assert error.matches(transport[0], SPEC_ERRORS["TaskNotFound"]), (persona_id, transport)


async def test_capabilities_are_true_to_the_endpoint(module_hub: Hub, llm: FakeLLM) -> None:
    cards = await _cards(module_hub)
    llm.script(*(Reply(f"Streaming as {pid}.", token_delay=0.01) for pid in cards))
    for persona_id, card in cards.items():
        capabilities = card["capabilities"]
        wire = Wire(module_hub.http, persona_id, ("JSONRPC", "1.0"))
        assert capabilities["streaming"] is True
        async with asyncio.timeout(60):
            response = await wire.send_streaming_message([text_part("Stream, please.")])
        events = [e["result"] for e in wire.events(response)]
        assert "task" in events[0]
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        task_id = events[0]["task"]["id"]

        assert not capabilities.get("pushNotifications", False)
        error = wire.error(await wire.push_config("Create", task_id))
        assert error.matches("JSONRPC", SPEC_ERRORS["PushNotificationNotSupported"])

        assert not capabilities.get("extendedAgentCard", False)
        error = wire.error(await wire.extended_card())
        assert error.matches("JSONRPC", SPEC_ERRORS["UnsupportedOperation"])


@pytest.mark.parametrize("accept", ["text/plain", "application/json"])
async def test_declared_input_modes_are_accepted(
    module_hub: Hub, llm: FakeLLM, accept: str
) -> None:
    card = (await module_hub.http.get("/a2a/socrates/.well-known/agent-card.json")).json()
    assert accept in card["defaultInputModes"]
    assert accept in card["defaultOutputModes"]
    wire = Wire(module_hub.http, "socrates", ("JSONRPC", "1.0"))
    part = {"raw": "eyJhIjogMX0=", "mediaType": accept}  # {"a": 1}
    task = wire.task(await wire.send_message([text_part("Read this."), part]))
    assert wire.state(task) == "TASK_STATE_COMPLETED"
