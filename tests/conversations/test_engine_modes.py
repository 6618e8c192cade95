"""The engine's turn modes in a running hub (the scripted model records what it was shown):
a new conversation opened with a chosen greeting through a turn, and a greeting the persona
does not have refused with nothing stored."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import httpx
import pytest

from persona_agent.chat.events import Done
from persona_agent.chat.tools import Turn
from persona_agent.errors import ConversationStateError
from tests.conversations.test_rest import BASE, shown, texts
from tests.fakes.fake_llm import FakeLLM, Reply


async def turn(http: httpx.AsyncClient, context_id: str, text: str, **options: Any) -> str:
    app = http.hub_app  # type: ignore[attr-defined]
    persona = app.parts.registry.persona("gwen")
    engine = app.parts.engine
    done = None
    stream = engine.stream(
        persona, context_id, text, turn=Turn(persona_id="gwen", conversation=context_id, **options)
    )
    async with aclosing(stream) as events:
        async for event in events:
            if isinstance(event, Done):
                done = event
    assert done is not None
    return done.text


async def test_a_turn_opens_a_conversation_with_the_greeting_chosen(
    hub: httpx.AsyncClient, llm: FakeLLM
) -> None:
    llm.script(Reply("Well met indeed."))
    assert await turn(hub, "g1", "hi", greeting=2) == "Well met indeed."
    assert shown(llm) == [("assistant", "Well met."), ("user", "hi")]
    conversation = (await hub.get(f"{BASE}/gwen/g1")).json()
    assert texts(conversation)[0] == ("assistant", "Well met.")
    assert conversation["messages"][0]["swipes"]["selected"] == 2
    swiped = await hub.put(f"{BASE}/gwen/g1/swipes/0", json={"selected": 0})
    assert texts(swiped.json())[0] == ("assistant", "Hello, User!")


async def test_a_greeting_the_persona_lacks_is_refused(
    hub: httpx.AsyncClient, llm: FakeLLM
) -> None:
    with pytest.raises(ConversationStateError, match="no greeting 5"):
        await turn(hub, "g2", "hi", greeting=5)
    assert llm.requests == []
    assert (await hub.get(f"{BASE}/gwen/g2")).status_code == 404


async def test_continue_without_an_answer_is_refused(hub: httpx.AsyncClient, llm: FakeLLM) -> None:
    with pytest.raises(ConversationStateError, match="Nothing to continue"):
        await turn(hub, "g3", "", mode="continue")
    assert (await hub.post(f"{BASE}/gwen/g3/continue", json={})).status_code == 404
    assert llm.requests == []
