"""A chat completion request read into the turn it asks for: the caller's instructions, the
history, the new message, the caller's tools and sampling; what the door does not serve
refused with the field named."""

from __future__ import annotations

from typing import Any

import pytest

from persona_agent.api.openai.completion_request import GOING_ON, WireError, read_request


def read(**body: Any) -> Any:
    return read_request({"model": "socrates", **body}, max_messages=10)


def test_opening_system_messages_are_the_instructions_and_the_last_user_one_the_message() -> None:
    ask = read(
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": "Use plain words."},
            {"role": "system", "name": "example_user", "content": "Hi?"},
            {"role": "user", "content": [{"type": "text", "text": "What is virtue?"}]},
        ],
        temperature=0.5,
        max_completion_tokens=20,
        stop="END",
        stream=True,
        stream_options={"include_usage": True},
    )
    assert ask.text == "What is virtue?"
    assert ask.supplied.history == (
        {"role": "system", "content": "Be brief.\n\nUse plain words."},
        {"role": "system", "name": "example_user", "content": "Hi?"},
    )
    assert (ask.supplied.temperature, ask.supplied.max_tokens) == (0.5, 20)
    assert ask.supplied.stop == ("END",)
    assert ask.stream
    assert ask.include_usage
    assert not ask.supplied.answers_history


def test_an_empty_last_user_message_goes_on_from_the_history() -> None:
    ask = read(messages=[{"role": "user", "content": "Hi"}, {"role": "user", "content": ""}])
    assert ask.text == GOING_ON
    assert ask.supplied.answers_history
    assert ask.supplied.history[-1] == {"role": "user", "content": ""}


def test_tool_results_last_go_on_from_the_history() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ask = read(
        messages=[
            {"role": "user", "content": "Use f."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        ],
        tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
    )
    assert ask.text == GOING_ON
    assert ask.supplied.answers_history
    assert ask.supplied.history[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    assert ask.supplied.names == frozenset({"f"})


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, "n"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "system", "content": "only rules"}]}, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": "x"}], "temperature": 3}, "temperature"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "stop": ["a"] * 5}, "stop"),
        (
            {
                "messages": [{"role": "user", "content": "x"}],
                "tool_choice": "required",
                "tools": [{"type": "function", "function": {"name": "f"}}],
            },
            "tool_choice",
        ),
        ({"messages": [{"role": "user", "content": "x"}] * 11}, "messages"),
    ],
)
def test_what_is_not_served_is_refused_naming_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(WireError) as refused:
        read(**body)
    assert refused.value.status == 400
    assert refused.value.param == param
