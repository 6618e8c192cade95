"""A peer: Google ADK's ``to_a2a`` serving one ``LlmAgent`` on the fake LLM (issue 52).

Run by ``bench/peers.py`` with the Python of a venv of its own (``google-adk[a2a]`` and
``litellm``, never a dependency of the project: ``~/.cache/persona-agent-bench/adk``).
The agent is what ADK's documentation gives for a model behind an OpenAI-compatible
server: an ``LlmAgent`` with ``LiteLlm("openai/<model>", api_base=...)``, the hub's system
prompt for Socrates as its instruction (a provider function: ADK would read ``{...}`` in
a string as state to fill in), made an A2A app by ``to_a2a`` (its in-memory runner,
sessions and task store), served by ``uvicorn.run`` at INFO as the hub is.

    python bench/adk_agent.py --port 9400 --llm http://127.0.0.1:9100/v1 \
        --system-prompt-file socrates.txt [--model gpt-4o-mini]

JSON-RPC at ``http://127.0.0.1:PORT/``, card at ``/.well-known/agent-card.json``.
"""

from __future__ import annotations

import argparse
import logging


def main() -> None:
    import uvicorn
    from google.adk.a2a.utils.agent_to_a2a import to_a2a
    from google.adk.agents import LlmAgent
    from google.adk.models.lite_llm import LiteLlm

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9400)
    parser.add_argument("--llm", required=True, help="the fake LLM's base URL")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--system-prompt-file", required=True)
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args()
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    with open(args.system_prompt_file, encoding="utf-8") as file:
        prompt = file.read()
    agent = LlmAgent(
        name="socrates",
        description="Socrates, on the fake LLM (benchmark peer).",
        model=LiteLlm(model=f"openai/{args.model}", api_base=args.llm, api_key="bench"),
        instruction=lambda _context: prompt,
    )
    app = to_a2a(agent, host=args.host, port=args.port)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower())


if __name__ == "__main__":
    main()
