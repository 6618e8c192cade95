"""The card's two forms (persona_agent.a2a.card_forms): by default both protocol versions'
fields, which a 0.3 client and the SDK's 1.0 client both read but a strict 1.0 schema
refuses; with ``A2A-Version: 1.0``, 1.0's fields alone, which a strict schema accepts."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pydantic
import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import types as v03
from a2a.types.a2a_pb2 import AgentCard, Message, Part, Role, SendMessageRequest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from persona_agent.a2a.card_forms import strict_card
from tests.conformance.conftest import MODULE_LOOP
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import Hub

pytestmark = MODULE_LOOP

COMPAT_FIELDS = {"url", "preferredTransport", "protocolVersion", "additionalInterfaces"}
"""The 0.3 fields the issue names (the SDK merges in more, inside nested objects)."""

FREE_FORM = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}

CARD: Descriptor = AgentCard.DESCRIPTOR  # type: ignore[assignment]  # upb's own class
PERSONA_CARD = "/a2a/socrates/.well-known/agent-card.json"
HUB_CARD = "/.well-known/agent-card.json"
V1 = {"A2A-Version": "1.0"}


def undeclared(value: Any, descriptor: Descriptor, path: str = "$") -> list[str]:
    """The members a strict 1.0 schema refuses: those that are no field of their message
    (the JSON Schema generated from the 1.0 proto sets ``additionalProperties: false``)."""
    assert isinstance(value, dict), path
    found = []
    fields = {f.json_name: f for f in descriptor.fields} | {f.name: f for f in descriptor.fields}
    for key, member in value.items():
        field = fields.get(key)
        if field is None:
            found.append(f"{path}.{key}")
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            found += _undeclared_in(member, field, f"{path}.{key}")
    return found


def _undeclared_in(member: Any, field: FieldDescriptor, path: str) -> list[str]:
    message = field.message_type
    assert message is not None, path
    if message.full_name in FREE_FORM:
        return []
    if message.GetOptions().map_entry:
        value_field = message.fields_by_name["value"]
        if value_field.type != FieldDescriptor.TYPE_MESSAGE:
            return []
        return [
            key
            for name, item in member.items()
            for key in _undeclared_in(item, value_field, f"{path}.{name}")
        ]
    if field.is_repeated:
        return [
            key
            for index, item in enumerate(member)
            for key in undeclared(item, message, f"{path}[{index}]")
        ]
    return undeclared(member, message, path)


async def get(hub: Hub, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    """A GET with only ``headers``: the hub's shared client may carry ``A2A-Version: 1.0``
    (the SDK's client factory sets it on the httpx client it is given)."""
    async with httpx.AsyncClient(base_url=hub.http.base_url, timeout=30) as http:
        return await http.get(path, headers=headers)


@pytest.mark.parametrize("path", [PERSONA_CARD, HUB_CARD])
async def test_a_1_0_client_asking_gets_the_card_a_strict_schema_accepts(
    module_hub: Hub, path: str
) -> None:
    merged = await get(module_hub, path)
    strict = await get(module_hub, path, headers=V1)
    assert merged.status_code == strict.status_code == 200
    # The default: what a 0.3 client needs, which a strict 1.0 reader refuses.
    assert merged.json().keys() >= COMPAT_FIELDS
    assert {f"$.{name}" for name in COMPAT_FIELDS} <= set(undeclared(merged.json(), CARD))
    # Asked for 1.0: 1.0's fields alone, the same card otherwise.
    assert undeclared(strict.json(), CARD) == []
    assert strict.json() == strict_card(merged.json())
    assert parse_agent_card(strict.json()) == parse_agent_card(merged.json())
    for response in (merged, strict):
        assert response.headers["vary"] == "A2A-Version"
    assert merged.headers["etag"] != strict.headers["etag"]


async def test_each_form_is_revalidated_by_its_own_etag(module_hub: Hub) -> None:
    merged = await get(module_hub, PERSONA_CARD)
    strict = await get(module_hub, PERSONA_CARD, headers=V1)
    same = {"If-None-Match": strict.headers["etag"], **V1}
    assert (await get(module_hub, PERSONA_CARD, headers=same)).status_code == 304
    other = {"If-None-Match": merged.headers["etag"], **V1}
    changed = await get(module_hub, PERSONA_CARD, headers=other)
    assert changed.status_code == 200
    assert "url" not in changed.json()


async def test_the_sdk_1_0_client_talks_from_either_form(module_hub: Hub, llm: FakeLLM) -> None:
    llm.script(Reply("From the merged card."), Reply("From the strict card."))
    for headers, said in ((None, "From the merged card."), (V1, "From the strict card.")):
        response = await get(module_hub, PERSONA_CARD, headers=headers)
        card = parse_agent_card(response.json())
        # The first interface a 1.0 client takes: JSON-RPC 1.0, at the card's URL.
        interface = card.supported_interfaces[0]
        assert (interface.protocol_binding, interface.protocol_version) == ("JSONRPC", "1.0")
        client = await module_hub.client("socrates")
        message = Message(
            message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="Hi")]
        )
        events = [event async for event in client.send_message(SendMessageRequest(message=message))]
        await client.close()
        assert said in str(events[-1])


async def test_a_0_3_client_reads_the_default_card_and_not_the_strict_one(
    module_hub: Hub, llm: FakeLLM
) -> None:
    merged = (await get(module_hub, PERSONA_CARD)).json()
    card = v03.AgentCard.model_validate(merged)  # the 0.3 SDK's own model
    assert card.preferred_transport == "JSONRPC"
    assert card.url.endswith("/a2a/socrates/")
    llm.script(Reply("Hello, old friend."))
    async with httpx.AsyncClient(timeout=30) as http:  # no A2A-Version: a 0.3 client's
        answer = await http.post(
            card.url,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/send",
                "params": {
                    "message": {
                        "kind": "message",
                        "messageId": str(uuid.uuid4()),
                        "role": "user",
                        "parts": [{"kind": "text", "text": "Hi"}],
                    }
                },
            },
        )
    assert answer.json()["result"]["status"]["state"] == "completed"
    strict = (await get(module_hub, PERSONA_CARD, headers=V1)).json()
    with pytest.raises(pydantic.ValidationError, match="url"):
        v03.AgentCard.model_validate(strict)
