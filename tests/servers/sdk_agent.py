"""An A2A agent of a2a-sdk alone (no hub), JSON-RPC 1.0 only, on a real server on
127.0.0.1: what the terminal chat talks to as "any A2A agent"."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette

from tests.servers.threaded import ThreadedServer

__all__ = ["sdk_agent"]


@contextmanager
def sdk_agent(
    executor: AgentExecutor,
    *,
    name: str,
    description: str,
    skill: str,
    streaming: bool,
    output_modes: tuple[str, ...] = ("text/plain",),
) -> Iterator[str]:
    """Serve ``executor`` with the SDK's own routes and a card of one skill (``skill``:
    its id, name and tag); yields the agent's URL."""
    app = Starlette()  # its routes once the port, which the card names, is known
    server = ThreadedServer(app, f"{name} agent")
    url = f"http://127.0.0.1:{server.start()}"
    card = AgentCard(
        name=name,
        description=description,
        version="1",
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=list(output_modes),
        skills=[AgentSkill(id=skill, name=skill, description=description, tags=[skill])],
        supported_interfaces=[
            AgentInterface(url=f"{url}/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
    )
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
    )
    app.router.routes.extend(
        [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
    )
    try:
        yield url
    finally:
        server.stop()
