"""The reference: a bare a2a-sdk agent that answers at once, with no persona and no LLM.

An ``AgentExecutor`` that publishes, for each message, the task, ``working``,
one artifact with the whole answer, and ``completed`` with the answer as the
status message; tasks in the SDK's ``InMemoryTaskStore``. It is served the way
``persona-agent serve`` serves the hub: the SDK's ``DefaultRequestHandler``
behind its JSON-RPC and HTTP+JSON routes (v1.0 with v0.3 compatibility), one
Starlette app, ``uvicorn.run`` with the same defaults (``loop``/``http`` on
``auto``: uvloop and httptools when installed), the same default log level (INFO:
an access line a request), and whatever ``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED`` the
environment gives the SDK.

    python bench/bare_agent.py --port 9300 [--log-level INFO] \
        [--llm URL [--model gpt-4o-mini] [--system-prompt-file FILE] [--lean]]

With ``--llm URL`` it is a like-for-like reference: for each message the same
streamed chat-completions call the hub makes (the model, a system prompt read from
``FILE``, the user's text, ``stream_options.include_usage``), through one shared
``AsyncOpenAI`` of the ``openai`` package on its aiohttp transport, to the same fake
LLM, read the client's stock way (a chunk object per event); tasks still in memory.
That is what a user of the design's packages would write by hand, in two ways:

- *streaming* (the default): each streamed token an artifact update, then an empty
  last chunk: what the hub gives a streaming client, token by token;
- *lean* (``--lean``): the tokens collected, the answer one artifact at the end: what
  the hub gives a blocking send, and the least an agent can do with the same call.

JSON-RPC at ``http://127.0.0.1:PORT/``, card at ``/.well-known/agent-card.json``.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import TYPE_CHECKING

from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol
from starlette.applications import Starlette

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

ANSWER = (
    "Hello from the fake LLM. This is a deterministic reply used to measure "
    "the overhead of the agent hub, not"
)
"""The fake LLM's 20-token reply, so one client check fits both servers."""


class InstantExecutor(AgentExecutor):
    """Answers every message at once with :data:`ANSWER`."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = await self._start(context, event_queue)
        await updater.add_artifact([Part(text=ANSWER)], name="answer", last_chunk=True)
        await updater.complete(updater.new_agent_message([Part(text=ANSWER)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.task_id:
            updater = TaskUpdater(event_queue, context.task_id, context.context_id or "")
            await updater.cancel()

    @staticmethod
    async def _start(context: RequestContext, event_queue: EventQueue) -> TaskUpdater:
        """The task published (when new) and ``working``; its updater."""
        message = context.message
        if message is None or not context.task_id or not context.context_id:
            raise ValueError("execute() needs a message, a task id and a context id")
        if context.current_task is None:
            await event_queue.enqueue_event(new_task_from_user_message(message))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        return updater


class OpenAIExecutor(InstantExecutor):
    """Streams each answer from an OpenAI-compatible server through the ``openai`` client:
    an artifact update per token, or (``lean``) the whole answer as one artifact."""

    def __init__(self, base_url: str, model: str, system_prompt: str, lean: bool = False) -> None:
        import openai

        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key="bench", http_client=openai.DefaultAioHttpClient()
        )
        self._model = model
        self._lean = lean
        self._system: list[ChatCompletionMessageParam] = (
            [{"role": "system", "content": system_prompt}] if system_prompt else []
        )

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = await self._start(context, event_queue)
        message = context.message
        text = " ".join(part.text for part in message.parts if part.text) if message else ""
        stream = await self._client.chat.completions.create(
            model=self._model,
            messages=[*self._system, {"role": "user", "content": text}],
            stream=True,
            stream_options={"include_usage": True},
        )
        answer: list[str] = []
        artifact_id = "answer"
        async with stream:
            async for chunk in stream:
                piece = chunk.choices[0].delta.content if chunk.choices else None
                if piece:
                    if not self._lean:
                        await updater.add_artifact(
                            [Part(text=piece)], artifact_id=artifact_id, append=bool(answer)
                        )
                    answer.append(piece)
        text = "".join(answer)
        if self._lean:
            await updater.add_artifact(
                [Part(text=text)], artifact_id=artifact_id, name="answer", last_chunk=True
            )
        else:
            await updater.add_artifact([], artifact_id=artifact_id, append=True, last_chunk=True)
        await updater.complete(updater.new_agent_message([Part(text=text)]))


def build_app(base_url: str, executor: AgentExecutor) -> Starlette:
    card = AgentCard(
        name="bare agent",
        description="A bare a2a-sdk agent that answers at once (benchmark reference).",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=base_url + "/",
                protocol_binding=TransportProtocol.JSONRPC,
                protocol_version=PROTOCOL_VERSION_1_0,
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="answer", name="answer", description="Answers.", tags=["bench"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=executor,
        task_store=InMemoryTaskStore(),
        agent_card=card,
        validate_input_modes=True,
    )
    return Starlette(
        routes=[
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True),
            *create_rest_routes(handler, enable_v0_3_compat=True),
        ]
    )


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9300)
    parser.add_argument("--log-level", default="INFO", help="as the hub's default")
    parser.add_argument("--llm", default=None, help="an OpenAI-compatible base URL")
    parser.add_argument("--model", default="gpt-4o-mini", help="as the hub's default")
    parser.add_argument("--system-prompt-file", default=None, help="the system message")
    parser.add_argument(
        "--lean", action="store_true", help="with --llm: the answer one artifact, not one a token"
    )
    args = parser.parse_args()
    # As `persona-agent serve` does: root logging at the level, uvicorn at the same level.
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("httpx", "httpx2"):  # as the hub: no line per LLM call, only the access log
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    executor = InstantExecutor()
    if args.llm:
        with open(args.system_prompt_file or os.devnull, encoding="utf-8") as prompt:
            executor = OpenAIExecutor(args.llm, args.model, prompt.read(), lean=args.lean)
    app = build_app(f"http://{args.host}:{args.port}", executor)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower())


if __name__ == "__main__":
    main()
