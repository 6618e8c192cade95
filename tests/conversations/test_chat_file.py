"""The hub's JSON chat file and the Markdown transcript; a property: any chat of user and
persona messages with alternatives survives a round trip through either file format."""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persona_agent.conversations.files.chat_file import (
    Alternatives,
    ChatFileError,
    Entry,
    ImportedChat,
)
from persona_agent.conversations.files.json_chat import FORMAT, from_json, to_json
from persona_agent.conversations.files.markdown_chat import to_markdown
from persona_agent.conversations.files.sillytavern import from_sillytavern, to_sillytavern

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CALL = {"id": "c1", "type": "function", "function": {"name": "roll", "arguments": "{}"}}
TOOL_CHAT = ImportedChat(
    [
        Entry({"role": "assistant", "content": "Ahoy."}, 1_000),
        Entry({"role": "user", "content": "Roll for me"}, 2_000),
        Entry({"role": "assistant", "content": None, "tool_calls": [CALL]}, 3_000),
        Entry({"role": "tool", "tool_call_id": "c1", "content": "4"}, 3_500),
        Entry({"role": "assistant", "content": "You rolled a 4."}, None),
    ],
    {0: Alternatives(0, ["Ahoy.", "Hello there."], [1_000, None])},
    user_name="Ann",
    character_name="Mara",
    created_ms=500,
)


def test_the_json_file_keeps_everything() -> None:
    data = to_json(TOOL_CHAT, persona_id="mara", context_id="c-1")
    document = json.loads(data)
    assert document["format"] == FORMAT
    assert document["context_id"] == "c-1"
    assert document["messages"][2]["tool_calls"] == [CALL]
    assert document["messages"][0]["swipes"] == {
        "selected": 0,
        "texts": ["Ahoy.", "Hello there."],
        "at": ["1970-01-01T00:00:01.000Z", None],
    }
    again = from_json(data)
    assert again.messages == TOOL_CHAT.messages
    assert again.swipes == TOOL_CHAT.swipes
    assert (again.user_name, again.character_name, again.created_ms) == ("Ann", "Mara", 500)


def document(*messages: Any) -> bytes:
    return json.dumps({"format": FORMAT, "messages": list(messages)}).encode()


USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{", "not JSON"),
        (b'{"format": "other"}', "not a persona-agent chat"),
        (json.dumps({"format": FORMAT}).encode(), 'no "messages" list'),
        (document(), "no messages"),
        (document(USER, 5), "messages[1]: must be an object"),
        (document({"role": "system", "content": "x"}), "messages[0].role"),
        (document({"role": "user", "content": ["x"]}), "messages[0].content: must be text"),
        (document({"role": "assistant"}), "messages[0].content: missing"),
        (document({"role": "user", "content": "x", "tool_calls": [CALL]}), ".tool_calls"),
        (document({"role": "assistant", "tool_calls": [{"id": 1}]}), "messages[0].tool_calls"),
        (document(USER, {"role": "tool", "content": "4"}), "messages[1].tool_call_id: a tool"),
        (
            document(USER, {"role": "tool", "tool_call_id": "c9", "content": "4"}),
            "messages[1].tool_call_id: no call before it",
        ),
        (document({**USER, "swipes": {"selected": 0, "texts": ["a"]}}), "a user message"),
        (document({"role": "assistant", "content": "a", "swipes": []}), "swipes: must be"),
        (
            document(
                {"role": "assistant", "content": "a", "swipes": {"selected": 0, "texts": [1]}}
            ),
            "swipes.texts",
        ),
        (
            document(
                {"role": "assistant", "content": "a", "swipes": {"selected": 2, "texts": ["a"]}}
            ),
            "swipes.selected: 2 is not",
        ),
        (
            document(
                USER,
                {"role": "assistant", "content": "a"},
                {
                    "role": "assistant",
                    "content": "b",
                    "swipes": {"selected": 0, "texts": ["b", "c"]},
                },
            ),
            "messages[2].swipes: alternatives belong to an answer's first message",
        ),
        (document(USER, "x" * 10), "messages[1]"),
    ],
)
def test_a_broken_json_file_names_the_message_and_field(data: bytes, message: str) -> None:
    with pytest.raises(ChatFileError) as caught:
        from_json(data)
    assert message in caught.value.message


def test_the_markdown_transcript() -> None:
    text = to_markdown(TOOL_CHAT, title="Mara and Ann")
    assert text.split("\n") == [
        "# Mara and Ann",
        "",
        "**Mara** (1970-01-01 00:00 UTC) (alternative 1 of 2)",
        "",
        "Ahoy.",
        "",
        "**Ann** (1970-01-01 00:00 UTC)",
        "",
        "Roll for me",
        "",
        "**Mara**",
        "",
        "You rolled a 4.",
        "",
    ]


# --- the round-trip property -----------------------------------------------------------

texts = st.text(alphabet=string.printable + "éü—🙂", max_size=30)
dates = st.one_of(st.none(), st.integers(min_value=0, max_value=4_102_444_800_000))


@st.composite
def chats(draw: st.DrawFn) -> ImportedChat:
    """User and persona messages in any order (consecutive ones too), alternatives on the
    first persona message of some answers."""
    roles = draw(st.lists(st.sampled_from(["user", "assistant"]), min_size=1, max_size=12))
    messages = [Entry({"role": role, "content": draw(texts)}, draw(dates)) for role in roles]
    swipes: dict[int, Alternatives] = {}
    for index, role in enumerate(roles):
        opens = role == "assistant" and (index == 0 or roles[index - 1] == "user")
        if opens and draw(st.booleans()):
            others = draw(st.lists(texts, min_size=1, max_size=4))
            selected = draw(st.integers(min_value=0, max_value=len(others)))
            shown = [*others[:selected], messages[index].message["content"], *others[selected:]]
            at_ms = [draw(dates) for _ in shown]
            at_ms[selected] = messages[index].at_ms
            swipes[index] = Alternatives(selected, shown, at_ms)
    return ImportedChat(messages, swipes, user_name="Ann", character_name="Mara")


@SETTINGS
@given(chats())
def test_any_chat_survives_a_sillytavern_round_trip(chat: ImportedChat) -> None:
    again = from_sillytavern(to_sillytavern(chat, user_name="Ann", character_name="Mara"))
    assert again.messages == chat.messages
    assert again.swipes == chat.swipes
    assert again.notes == []


@SETTINGS
@given(chats())
def test_any_chat_survives_a_json_round_trip(chat: ImportedChat) -> None:
    again = from_json(to_json(chat, persona_id="mara", context_id="c"))
    assert again.messages == chat.messages
    assert again.swipes == chat.swipes
