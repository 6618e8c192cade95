"""Two replicas (two hubs on one PostgreSQL database) see the same branches: an answer
regenerated through one, its alternatives read and chosen through the other."""

from __future__ import annotations

from contextlib import AsyncExitStack

from tests.conversations.conftest import HubApp
from tests.conversations.test_rest import BASE, say, start, texts
from tests.fakes.fake_llm import FakeLLM, Reply


async def test_replicas_see_the_same_branches(
    start_hub: HubApp, pg_migrated_url: str, llm: FakeLLM
) -> None:
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(start_hub(database_url=pg_migrated_url))
        b = await stack.enter_async_context(start_hub(database_url=pg_migrated_url))
        await start(a, greeting=2, context_id="r1")
        llm.script(Reply("a1"), Reply("a1 bis"))
        assert await say(b, "r1", "q1") == "a1"  # the other replica goes on from the greeting
        regenerated = await a.post(f"{BASE}/gwen/r1/regenerate", json={})
        assert regenerated.status_code == 200, regenerated.text
        seen = (await b.get(f"{BASE}/gwen/r1")).json()
        assert texts(seen) == [("assistant", "Well met."), ("user", "q1"), ("assistant", "a1 bis")]
        assert seen["messages"][0]["swipes"]["selected"] == 2
        swipes = seen["messages"][-1]["swipes"]
        assert (swipes["selected"], swipes["texts"]) == (1, ["a1", "a1 bis"])
        chosen = await b.put(f"{BASE}/gwen/r1/swipes/{swipes['anchor']}", json={"selected": 0})
        assert chosen.status_code == 200, chosen.text
        assert texts((await a.get(f"{BASE}/gwen/r1")).json())[-1] == ("assistant", "a1")
        llm.script(Reply("a2"))
        assert await say(a, "r1", "q2") == "a2"
        assert [m["content"] for m in llm.requests[-1]["messages"][1:]] == [
            "Well met.",
            "q1",
            "a1",
            "q2",
        ]
