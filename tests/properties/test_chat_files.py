"""Properties of chat files (docs/conversations.md, "Moving chats"): whatever a file holds,
reading it is a chat or a ChatFileError naming the problem (never another exception: the
REST import would answer 500), and a chat that was read is written out again in every
format, and read back the same."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persona_agent.conversations.files.chat_file import ChatFileError, ImportedChat, creation_of
from persona_agent.conversations.files.json_chat import FORMAT, from_json, to_json
from persona_agent.conversations.files.markdown_chat import to_markdown
from persona_agent.conversations.files.sillytavern import from_sillytavern, to_sillytavern

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

HOSTILE = "<hostile>"
"""Where a raw fragment of JSON text goes (:data:`FRAGMENTS`: what ``json.dumps`` cannot
write)."""
FRAGMENTS = [
    "7" * 5000,
    "[" * 200 + "]" * 200,
    '{"a":' * 70 + "1" + "}" * 70,
    "[" * 50_000 + "]" * 50_000,
    "1e999",
    '"\\ud800"',
    '"\\udfff tail"',
    '"' + "9" * 5000 + '"',
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        ["user", "assistant", "tool", "2024-6-5 @14h 56m 50s 682ms", "99999999999999999"]
    ),
    st.just(HOSTILE),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
json_messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system", 7])},
        optional={
            "content": st.one_of(st.text(max_size=20), values),
            "at": st.one_of(st.text(max_size=30), values),
            "tool_call_id": st.one_of(st.text(max_size=5), values),
            "tool_calls": values,
            "swipes": st.one_of(
                values,
                st.fixed_dictionaries(
                    {"selected": st.integers(-2, 5), "texts": st.lists(st.text(max_size=8))}
                ),
            ),
        },
    ),
    max_size=6,
)
tavern_lines = st.lists(
    st.fixed_dictionaries(
        {"mes": st.one_of(st.text(max_size=20), values)},
        optional={
            "is_user": st.one_of(st.booleans(), values),
            "is_system": st.one_of(st.booleans(), values),
            "send_date": st.one_of(st.text(max_size=30), values),
            "swipes": st.one_of(st.lists(st.text(max_size=8), max_size=4), values),
            "swipe_id": st.one_of(st.integers(-2, 5), values),
            "swipe_info": values,
            "extra": values,
        },
    ),
    max_size=6,
)


def _dumps(value: Any, fragment: str) -> bytes:
    text = json.dumps(value, allow_nan=True).replace(json.dumps(HOSTILE), fragment)
    return text.encode("utf-8", "surrogatepass")


def _read(read: Callable[[bytes], ImportedChat], data: bytes) -> ImportedChat | None:
    """The chat of ``data``, or None for a ChatFileError (which must name the problem)."""
    try:
        return read(data)
    except ChatFileError as error:
        problem = error.message
    assert problem
    return None


def _written_again(chat: ImportedChat) -> None:
    creation_of(chat)
    to_markdown(chat, title="t")
    tavern = to_sillytavern(chat, user_name="U", character_name="C")
    assert tavern.decode()  # valid UTF-8
    again = from_json(to_json(chat, persona_id="p", context_id="c"))
    assert [entry.message for entry in again.messages] == [e.message for e in chat.messages]


@SETTINGS
@given(messages=json_messages, extra=values, fragment=st.sampled_from(FRAGMENTS))
def test_any_json_chat_file_is_a_chat_or_a_named_error(
    messages: list[dict[str, Any]], extra: Any, fragment: str
) -> None:
    document = {"format": FORMAT, "messages": messages, "user_name": extra}
    chat = _read(from_json, _dumps(document, fragment))
    if chat is not None:
        _written_again(chat)


@SETTINGS
@given(lines=tavern_lines, header=values, fragment=st.sampled_from(FRAGMENTS))
def test_any_sillytavern_file_is_a_chat_or_a_named_error(
    lines: list[dict[str, Any]], header: Any, fragment: str
) -> None:
    data = b"\n".join(_dumps(line, fragment) for line in [{"user_name": header}, *lines])
    chat = _read(from_sillytavern, data)
    if chat is not None:
        _written_again(chat)


@SETTINGS
@given(data=st.binary(max_size=200))
def test_any_bytes_are_a_chat_or_a_named_error(data: bytes) -> None:
    for read in (from_json, from_sillytavern):
        _read(read, data)
