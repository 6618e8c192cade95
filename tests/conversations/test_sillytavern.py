"""SillyTavern chat files (JSONL) both ways: a real-looking chat keeps every message and
swipe through a round trip; broken files name the line and the field."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from persona_agent.conversations.files.chat_file import (
    MAX_FILE_BYTES,
    MAX_MESSAGES,
    Alternatives,
    ChatFileError,
    Entry,
    ImportedChat,
)
from persona_agent.conversations.files.sillytavern import (
    format_header_date,
    from_sillytavern,
    parse_date,
    to_sillytavern,
)

DATA = Path(__file__).parent / "data"
MARA = (DATA / "captain_mara.jsonl").read_bytes()


def ms(year: int, month: int, day: int, hour: int, minute: int, second: int = 0) -> int:
    return round(datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp() * 1000)


def jsonl(*lines: dict[str, Any]) -> bytes:
    return "\n".join(json.dumps(line) for line in lines).encode()


HEADER = {"user_name": "Ann", "character_name": "Mara", "create_date": "2026-1-2@03h04m05s"}


def test_the_chat_is_read_with_its_branches_and_dates() -> None:
    chat = from_sillytavern(MARA)
    roles = [entry.message["role"] for entry in chat.messages]
    assert roles == ["assistant", "user", "assistant", "user", "assistant"]
    assert (chat.user_name, chat.character_name) == ("Ann", "Captain Mara")
    assert chat.created_ms == ms(2026, 11, 20, 21, 4, 11) + 512
    # the greeting's alternatives (the card's greetings), the first one shown
    greeting = chat.swipes[0]
    assert greeting.selected == 0
    assert len(greeting.texts) == 3
    assert greeting.texts[0] == chat.messages[0].message["content"]
    assert "{{user}}" in greeting.texts[2]
    # the second answer shows its second swipe; each swipe keeps its date
    answer = chat.swipes[2]
    assert answer.selected == 1
    assert answer.texts[1] == chat.messages[2].message["content"].strip()
    assert answer.texts[0].startswith("Passage isn't cheap")
    assert answer.at_ms == [
        ms(2026, 11, 20, 21, 6, 40) + 10,
        ms(2026, 11, 20, 21, 7),
        ms(2026, 11, 20, 21, 8),
    ]
    # a single swipe is no alternative
    assert sorted(chat.swipes) == [0, 2]
    # every date form SillyTavern writes
    assert [entry.at_ms for entry in chat.messages] == [
        ms(2026, 11, 20, 21, 4),
        ms(2026, 11, 20, 21, 6),
        ms(2026, 11, 20, 21, 7),
        ms(2026, 11, 20, 21, 9, 30) + 51,
        ms(2026, 11, 20, 21, 11),
    ]
    # the narrator's line is left out, and the notes say so
    assert all("north" not in entry.message["content"] for entry in chat.messages)
    assert chat.notes == [
        "1 system or hidden messages are left out (SillyTavern does not send them to the "
        "model either)"
    ]


def test_a_round_trip_keeps_every_message_and_swipe() -> None:
    chat = from_sillytavern(MARA)
    written = to_sillytavern(chat, user_name="Ann", character_name="Captain Mara")
    again = from_sillytavern(written)
    assert again.messages == chat.messages
    assert again.swipes == chat.swipes
    assert again.created_ms == chat.created_ms
    # and writing it again gives the same file
    assert to_sillytavern(again, user_name="Ann", character_name="Captain Mara") == written
    lines = [json.loads(line) for line in written.decode().split("\n")]
    assert lines[0]["user_name"] == "Ann"
    assert lines[0]["create_date"] == "2026-11-20@21h04m11s512ms"
    assert lines[0]["chat_metadata"] == {}
    original = [json.loads(line) for line in MARA.decode().split("\n") if line]
    kept = [line for line in original[1:] if not line["is_system"]]
    assert [line["mes"] for line in lines[1:]] == [line["mes"] for line in kept]
    assert [line["name"] for line in lines[1:]] == [line["name"] for line in kept]
    assert lines[3]["swipes"] == original[3]["swipes"]
    assert lines[3]["swipe_id"] == 1
    assert lines[3]["swipe_info"][0]["send_date"] == "2026-11-20T21:06:40.010Z"


def test_tool_calls_stay_in_the_hub() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "roll", "arguments": "{}"}}
    chat = ImportedChat(
        [
            Entry({"role": "user", "content": "Roll for me"}, 1000),
            Entry({"role": "assistant", "content": None, "tool_calls": [call]}, 2000),
            Entry({"role": "tool", "tool_call_id": "c1", "content": "4"}, 3000),
            Entry({"role": "assistant", "content": "You rolled a 4."}, 4000),
        ],
        {1: Alternatives(1, ["A 6!", "You rolled a 4."], [500, 4000])},
    )
    lines = [
        json.loads(line)
        for line in to_sillytavern(chat, user_name="U", character_name="C").decode().split("\n")
    ]
    assert [line["mes"] for line in lines[1:]] == ["Roll for me", "You rolled a 4."]
    assert lines[2]["swipes"] == ["A 6!", "You rolled a 4."]
    assert lines[2]["swipe_id"] == 1
    assert lines[2]["send_date"] == "1970-01-01T00:00:04.000Z"
    assert lines[0]["create_date"] == format_header_date(1000)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1700000000000, 1700000000000),
        ("1700000000000", 1700000000000),
        ("2026-11-27T00:30:00.250Z", ms(2026, 11, 27, 0, 30) + 250),
        ("2026-11-27T01:30:00+01:00", ms(2026, 11, 27, 0, 30)),
        ("November 27, 2026 12:30am", ms(2026, 11, 27, 0, 30)),
        ("Nov 27, 2026 12:30 PM", ms(2026, 11, 27, 12, 30)),
        ("2024-6-5 @14h 56m 50s 682ms", ms(2024, 6, 5, 14, 56, 50) + 682),
        ("2024-07-12@01h31m37s123ms", ms(2024, 7, 12, 1, 31, 37) + 123),
        ("2024-7-12@01h31m37s", ms(2024, 7, 12, 1, 31, 37)),
        ("yesterday", None),
        ("Smarch 3, 2024 1:00pm", None),
        ("2024-02-30@01h31m37s", None),
        (True, None),
        ({"date": 1}, None),
        (-5, None),
        (None, None),
    ],
)
def test_dates_in_every_form(value: object, expected: int | None) -> None:
    assert parse_date(value) == expected


def test_a_chat_without_a_header_and_chub_messages() -> None:
    chat = from_sillytavern(
        jsonl(
            {"name": "U", "is_user": True, "mes": {"message": "hi"}},
            {"mes": "hey", "swipes": [{"message": "yo"}, {"message": "hey"}]},
        )
    )
    assert [entry.message["content"] for entry in chat.messages] == ["hi", "hey"]
    assert chat.swipes[1] == Alternatives(1, ["yo", "hey"], [None, None])
    assert chat.user_name is None


def test_swipes_that_are_no_answer_are_left_out_with_a_note() -> None:
    chat = from_sillytavern(
        jsonl(
            HEADER,
            {"name": "Ann", "is_user": True, "mes": "a", "swipes": ["a", "b"], "swipe_id": 0},
            {"name": "Mara", "mes": "one"},
            {"name": "Mara", "mes": "two", "swipes": ["two", "deux"], "swipe_id": 0},
        )
    )
    assert chat.swipes == {}
    assert [note.split(":")[0] for note in chat.notes] == ["line 2", "line 4"]
    assert len(chat.messages) == 3


def test_mes_wins_over_its_swipe() -> None:
    chat = from_sillytavern(
        jsonl(HEADER, {"mes": "edited", "swipes": ["x", "original"], "swipe_id": 1})
    )
    assert chat.swipes[0].texts == ["x", "edited"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "The chat file is empty"),
        (b"\xff\xfe", "not UTF-8"),
        (b'{"user_name": "A"}\n{"mes": "x"\n', "line 2: not JSON"),
        (b'{"user_name": "A"}\n[1, 2]', "line 2: must be a JSON object"),
        (b'{"title": "A"}', "line 1: neither a chat header"),
        (jsonl(HEADER), "no user or character messages"),
        (jsonl(HEADER, {"mes": 5}), 'line 2: "mes"'),
        (jsonl(HEADER, {"mes": "x", "is_user": "yes"}), 'line 2: "is_user" must be true or false'),
        (jsonl(HEADER, {"mes": "x", "is_system": 1}), 'line 2: "is_system"'),
        (jsonl(HEADER, {"mes": "x", "swipes": "x"}), 'line 2: "swipes" must be a list'),
        (
            jsonl(HEADER, {"mes": "x", "swipes": ["x", 3]}),
            'line 2: "swipes" must be a list of texts',
        ),
        (
            jsonl(HEADER, {"mes": "x", "swipes": ["x", "y"], "swipe_id": 2}),
            'line 2: "swipe_id" 2 is not',
        ),
        (
            jsonl(HEADER, {"mes": "x", "swipes": ["x", "y"], "swipe_id": "0"}),
            'line 2: "swipe_id" must',
        ),
        (jsonl(HEADER, {"mes": "z", "swipes": ["x", "y"]}), 'line 2: "swipe_id" missing'),
        (jsonl({"user_name": 3}, {"mes": "x"}), 'line 1: "user_name" must be text'),
        (
            jsonl(HEADER, {"mes": "x", "swipes": [str(i) for i in range(101)], "swipe_id": 0}),
            "more than 100",
        ),
    ],
)
def test_a_broken_file_names_the_line_and_the_field(data: bytes, message: str) -> None:
    with pytest.raises(ChatFileError) as caught:
        from_sillytavern(data)
    assert message in caught.value.message


def test_the_bounds() -> None:
    with pytest.raises(ChatFileError, match="larger than"):
        from_sillytavern(b" " * (MAX_FILE_BYTES + 1))
    too_many = jsonl(HEADER, *({"mes": "x", "is_user": True} for _ in range(MAX_MESSAGES + 1)))
    with pytest.raises(ChatFileError, match=f"more than {MAX_MESSAGES} messages"):
        from_sillytavern(too_many)
    at_most = jsonl(HEADER, *({"mes": "x", "is_user": True} for _ in range(MAX_MESSAGES)))
    assert len(from_sillytavern(at_most).messages) == MAX_MESSAGES


def test_a_file_saved_on_windows_with_a_bom_and_crlf() -> None:
    windows = b"\xef\xbb\xbf" + MARA.replace(b"\n", b"\r\n")
    chat = from_sillytavern(windows)
    assert chat.messages == from_sillytavern(MARA).messages
    assert chat.swipes == from_sillytavern(MARA).swipes


def test_a_group_chat_is_the_personas_every_character_message() -> None:
    chat = from_sillytavern(
        jsonl(
            {"user_name": "Ann", "character_name": "unused", "chat_metadata": {}},
            {"name": "Ann", "is_user": True, "mes": "Hello, both of you."},
            {"name": "Mara", "is_user": False, "mes": "Ahoy."},
            {"name": "Finn", "is_user": False, "mes": "Hi!"},
        )
    )
    assert [entry.message["role"] for entry in chat.messages] == ["user", "assistant", "assistant"]
    assert [entry.message["content"] for entry in chat.messages][1:] == ["Ahoy.", "Hi!"]
