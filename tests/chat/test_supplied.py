"""A turn whose caller supplies the conversation: its tools offered beside the persona's,
its sampling within the persona's, its tools' calls handed back to it."""

from __future__ import annotations

from persona_agent.chat.supplied import SuppliedTurn, handed_back, offered, sampling
from persona_agent.llm.base import StreamEnd, ToolCall
from persona_agent.personas.model import Persona


def spec(name: str, description: str = "") -> dict[str, object]:
    return {"type": "function", "function": {"name": name, "description": description}}


def persona(**model: object) -> Persona:
    return Persona.model_validate(
        {"id": "p", "name": "P", "description": "d", "model": model or None}
    )


def test_the_callers_tools_come_after_the_personas_and_win_a_shared_name() -> None:
    supplied = SuppliedTurn(tools=(spec("lookup", "the caller's"), spec("weather")))
    tools = offered(supplied, [spec("lookup", "the hub's"), spec("local__add")])
    assert tools == [spec("local__add"), spec("lookup", "the caller's"), spec("weather")]
    assert offered(None, [spec("local__add")]) == [spec("local__add")]


def test_the_callers_sampling_is_bounded_by_the_personas_cap() -> None:
    capped = persona(max_tokens=100, temperature=0.9)
    asked = SuppliedTurn(max_tokens=500, temperature=0.1, stop=("END",))
    assert sampling(capped, asked) == {"temperature": 0.1, "max_tokens": 100, "stop": ["END"]}
    assert sampling(capped, SuppliedTurn(max_tokens=20))["max_tokens"] == 20
    assert sampling(capped, None) == {"temperature": 0.9, "max_tokens": 100}


def test_a_call_of_the_callers_tool_ends_the_turn_with_it() -> None:
    supplied = SuppliedTurn(tools=(spec("weather"),))
    mine, hubs = ToolCall("c1", "weather", "{}"), ToolCall("c2", "local__add", "{}")
    end, handed = handed_back(supplied, StreamEnd(tool_calls=[hubs, mine]))
    assert handed == [mine]
    assert end.tool_calls == []
    end, handed = handed_back(supplied, StreamEnd(tool_calls=[hubs]))
    assert (end.tool_calls, handed) == ([hubs], [])
