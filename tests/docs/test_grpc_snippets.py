"""docs/a2a.md's gRPC client, run as a reader pastes it (sandbox.py), against a hub with gRPC
on a free port: the card read over HTTP says where gRPC is and which tenant, and the answer
streams over gRPC. The one substitution: the docs' hub, ``http://127.0.0.1:8000``, is the
test hub's URL (the gRPC port comes from the card, as the docs say)."""

from __future__ import annotations

import asyncio

from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import claim
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import HubFactory

CLIENT = claim("docs/a2a.md", "grpc_channel_factory=grpc.aio.insecure_channel")


async def test_the_grpc_client_streams_the_answer(
    sandbox: Sandbox, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(mcp_config=None, grpc_port=0) as hub:
        program = rewrite(CLIENT.text, {DOC_URL: hub.settings.base_url})
        (sandbox.root / "grpc_client.py").write_text(program, encoding="utf-8")
        llm.script(Reply("Virtue is knowledge.", own_writes=True))
        ran = (await asyncio.to_thread(sandbox.run, "python grpc_client.py")).ok()
    assert ran.stdout.strip() == "Virtue is knowledge."
    (request,) = llm.requests
    assert request["messages"][-1]["content"] == "What is virtue?"
