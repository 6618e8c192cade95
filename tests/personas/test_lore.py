"""Lorebooks: which entries a conversation brings up, in what order, within what budget."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError

from persona_agent.personas.formats.lorebook import (
    Lorebook,
    LoreEntry,
    LoreIndex,
    LoreSelection,
    estimate_tokens,
    select_lore,
)


def book(*entries: dict[str, Any], **fields: Any) -> Lorebook:
    return Lorebook.model_validate({"entries": list(entries), **fields})


def chosen(lore: Lorebook, *messages: str) -> list[str]:
    selection = select_lore(lore, list(messages))
    return [*selection.before, *selection.after]


def test_a_key_in_the_recent_messages_brings_its_entry() -> None:
    lore = book({"keys": ["dragon"], "content": "Dragons sleep in winter."})
    assert chosen(lore, "Tell me of the dragon.") == ["Dragons sleep in winter."]
    assert chosen(lore, "Tell me of the weather.") == []


def test_only_the_last_scan_depth_messages_are_scanned() -> None:
    entry = {"keys": ["dragon"], "content": "Dragons sleep in winter."}
    assert chosen(book(entry), "dragon?", "no.", "and now?") == []  # default depth 2
    assert chosen(book(entry), "dragon?", "and now?") == ["Dragons sleep in winter."]
    assert chosen(book(entry, scan_depth=3), "dragon?", "no.", "and now?") != []
    assert chosen(book(entry, scan_depth=0), "dragon") == []
    constant = {"content": "Always.", "constant": True}
    assert chosen(book(entry, constant, scan_depth=0), "dragon") == ["Always."]
    assert chosen(book(entry, scan_depth=5), "dragon") == ["Dragons sleep in winter."]


def test_case_sensitivity() -> None:
    insensitive = book({"keys": ["Kestrel"], "content": "ship"})
    sensitive = book({"keys": ["Kestrel"], "content": "ship", "case_sensitive": True})
    assert chosen(insensitive, "the KESTREL") == ["ship"]
    assert chosen(sensitive, "the KESTREL") == []
    assert chosen(sensitive, "the Kestrel") == ["ship"]


def test_selective_entries_need_a_secondary_key_too() -> None:
    entry = {"keys": ["sword"], "secondary_keys": ["king", "queen"], "content": "Excalibur."}
    selective = book({**entry, "selective": True})
    assert chosen(selective, "a sword") == []
    assert chosen(selective, "the queen's sword") == ["Excalibur."]
    assert chosen(book(entry), "a sword") == ["Excalibur."]  # not selective: ignored
    assert chosen(book({**entry, "selective": True, "secondary_keys": []}), "a sword") != []
    primary_only = {"keys": ["sword"], "content": "Excalibur.", "selective": True}
    assert chosen(book(primary_only), "a sword") == ["Excalibur."]
    assert chosen(book({**entry, "selective": True}), "the king") == []  # primary needed


def test_constant_disabled_and_empty_entries() -> None:
    lore = book(
        {"keys": [], "content": "Always.", "constant": True},
        {"keys": ["x"], "content": "Off.", "enabled": False},
        {"keys": ["x"], "content": "Off too.", "enabled": False, "constant": True},
        {"keys": ["x"], "content": "   "},
        {"keys": [""], "content": "Blank key."},
        {"keys": ["  "], "content": "Blank key too."},
        {"keys": ["x"], "content": "@@depth 4\n\n", "constant": True},
        {"content": "No keys."},
        {"keys": ["x"], "content": "On.", "enabled": True, "insertion_order": 5},
    )
    assert chosen(lore, "x") == ["Always.", "On."]
    assert chosen(lore, "  ") == ["Always."]
    assert chosen(lore) == ["Always."]


def test_regex_keys() -> None:
    slashed = book({"keys": ["/storm(s)?/i"], "content": "North-west."})
    assert chosen(slashed, "STORMS coming") == ["North-west."]
    assert chosen(slashed, "calm") == []
    v3 = book({"keys": ["^lamp"], "content": "Oil.", "use_regex": True})
    assert chosen(v3, "lamp is lit") == ["Oil."]
    assert chosen(v3, "the lamp") == []
    plain = book({"keys": ["^lamp"], "content": "Oil."})  # not a regex: the text itself
    assert chosen(plain, "lamp") == []
    assert chosen(plain, "a ^lamp") == ["Oil."]
    multiline = book({"keys": ["/^b/m"], "content": "M."})
    assert chosen(multiline, "a\nb") == ["M."]
    sensitive = book({"keys": ["/Storm/"], "content": "S.", "case_sensitive": True})
    assert chosen(sensitive, "storm") == []


def test_regex_flags() -> None:
    def matches(key: str, text: str, **fields: Any) -> bool:
        return chosen(book({"keys": [key], "content": "yes", **fields}), text) == ["yes"]

    assert matches("/Storm/i", "storm", case_sensitive=True)  # an explicit i always wins
    assert not matches("/Storm/", "storm", case_sensitive=True)
    assert matches("/Storm/", "STORM")  # insensitive unless case_sensitive
    assert matches("/storm/gu", "STORM")  # g, u and y mean nothing for a search
    assert matches("/a.b/s", "a\nb")
    assert not matches("/a.b/", "a\nb")
    assert not matches("/^b/", "a\nb")
    assert not matches("/storm/x", "storm")  # not a flag: plain text
    assert matches("/storm/x", "the /STORM/x")


def test_use_regex_keys_may_be_slashed_too() -> None:
    # RisuAI, the V3 spec's own app, writes a use_regex entry's keys as /pattern/flags.
    lore = book({"keys": ["/^lamp$/m"], "content": "Oil.", "use_regex": True})
    assert chosen(lore, "one\nLAMP\ntwo") == ["Oil."]
    sensitive = book(
        {"keys": ["Lamp", "/Wick/"], "content": "Oil.", "use_regex": True, "case_sensitive": True}
    )
    assert chosen(sensitive, "lamp and wick") == []
    assert chosen(sensitive, "a Wick") == ["Oil."]


def test_long_keys_match_as_any_other() -> None:
    long_key = "x" * 5000
    assert chosen(book({"keys": [long_key], "content": "yes"}), long_key) == ["yes"]
    as_regex = book({"keys": [long_key], "content": "yes", "use_regex": True})
    assert chosen(as_regex, long_key) == ["yes"]


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("/(unclosed/", "missing )"),
        ("([", "missing ]"),
        ("/a{2,1}/", "invalid repetition size: {2,1}"),
        (r"/(a)\1/", r"invalid escape sequence: \1"),  # a backreference
        ("(?=a)b", "invalid perl operator: (?="),  # lookahead
        ("(?<=a)b", "invalid perl operator: (?<="),  # lookbehind
        ("/a++/", "bad repetition operator: ++"),  # possessive
        ("/a{1001}/", "invalid repetition size"),
        (r"/\pL{1000}/", "pattern too large"),  # over the program's memory
    ],
)
def test_a_key_re2_cannot_take_is_refused_naming_the_entry_and_the_reason(
    key: str, reason: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        book(
            {"keys": ["fine"], "content": "First."},
            {"keys": ["ok", key], "content": "Never.", "use_regex": True, "comment": "Dragons"},
        )
    (error,) = caught.value.errors()
    assert error["loc"] == ("entries", 1)
    assert f"keys[1] '{key}' of the entry 'Dragons' is a regular expression RE2" in error["msg"]
    assert reason in error["msg"]
    assert "docs/personas.md#lorebooks" in error["msg"]


def test_secondary_keys_are_checked_and_an_entry_is_named_by_its_name_too() -> None:
    with pytest.raises(ValidationError) as caught:
        book({"keys": ["a"], "secondary_keys": ["/(?!x)/"], "content": "c", "name": "Lamp"})
    assert "secondary_keys[0] '/(?!x)/' of the entry 'Lamp'" in caught.value.errors()[0]["msg"]
    with pytest.raises(ValidationError) as untitled:
        book({"keys": ["/(?!x)/"], "content": "c", "comment": "  "})
    assert "keys[0] '/(?!x)/' is a regular" in untitled.value.errors()[0]["msg"]


def test_a_key_that_is_not_a_regex_is_plain_text_whatever_re2_would_say_of_it() -> None:
    lore = book({"keys": ["(?=a)", r"a\1"], "content": "Plain."})
    assert chosen(lore, "x (?=A) y") == ["Plain."]
    assert chosen(lore, r"A\1") == ["Plain."]


def test_nested_quantifiers_match_without_backtracking() -> None:
    # Python's re takes 2^n steps on such a key and text: 40 characters would be days.
    # How long it takes is bench/linear_time.py's figure.
    lore = book({"keys": ["/(a+)+$/", "/(x|x)*y/"], "content": "Never."})
    hostile = "a" * 100_000 + "!" + "x" * 100_000
    assert chosen(lore, hostile) == []
    assert chosen(lore, "a" * 1000) == ["Never."]


def test_regex_keys_read_the_text_as_unicode() -> None:
    lore = book({"keys": [r"/^[\pL ]+ é$/", "/ÉTÉ/i"], "content": "Yes."})
    assert chosen(lore, "Ça va é") == ["Yes."]
    assert chosen(lore, "un été") == ["Yes."]
    assert chosen(lore, "12 é") == []


def test_an_index_compiles_once_and_scans_many_times() -> None:
    lore = book(
        {"keys": ["Dragon", "/wyrm(s)?/"], "content": "D.", "case_sensitive": True},
        {"keys": ["ship"], "secondary_keys": ["/sea/"], "selective": True, "content": "S."},
        {"keys": ["off"], "content": "O.", "enabled": False},
    )
    index = LoreIndex(lore)
    assert index.keys == 4  # the disabled entry is not scanned for
    assert list(index.select(["a Dragon"]).before) == ["D."]
    assert list(index.select(["a dragon"]).before) == []
    assert list(index.select(["wyrms at sea, a ship"]).before) == ["D.", "S."]
    assert index.select(["a ship"]) == LoreSelection()


def test_recursion_scans_each_round_once_and_keeps_partial_matches() -> None:
    # The primary key in the messages, the secondary one only in a matched content.
    lore = book(
        {"keys": ["castle"], "content": "The castle has a moat."},
        {"keys": ["duke"], "secondary_keys": ["moat"], "selective": True, "content": "Duke."},
        recursive_scanning=True,
    )
    assert chosen(lore, "the duke's castle") == ["The castle has a moat.", "Duke."]
    # A chain of 500 entries, each found in the one before: each content scanned once, not
    # everything again in each of 500 rounds (which took more than ten seconds; how long
    # it takes is bench/linear_time.py's figure).
    chain = book(
        *({"keys": [f"<{n}>"], "content": f"<{n + 1}> " + "x" * 50} for n in range(500)),
        recursive_scanning=True,
    )
    assert len(chosen(chain, "<0>")) == 500


def test_recursive_scanning() -> None:
    entries = (
        {"keys": ["castle"], "content": "The castle belongs to the Duke."},
        {"keys": ["duke"], "content": "The Duke is old."},
    )
    assert chosen(book(*entries), "the castle") == ["The castle belongs to the Duke."]
    both = chosen(book(*entries, recursive_scanning=True), "the castle")
    assert both == ["The castle belongs to the Duke.", "The Duke is old."]
    assert chosen(book(*entries, recursive_scanning=False), "the castle") == [both[0]]


def test_recursion_follows_chains_and_ends_on_cycles() -> None:
    lore = book(
        {"keys": ["alpha"], "content": "alpha leads to beta"},
        {"keys": ["beta"], "content": "beta leads to gamma and back to alpha"},
        {"keys": ["gamma"], "content": "gamma ends here"},
        {"keys": ["gamma"], "content": "gamma, but off", "enabled": False},
        {"keys": ["delta"], "content": "never said"},
        recursive_scanning=True,
    )
    assert chosen(lore, "alpha") == [
        "alpha leads to beta",
        "beta leads to gamma and back to alpha",
        "gamma ends here",
    ]
    assert chosen(lore, "gamma") == ["gamma ends here"]
    # Not from messages outside the window, even through recursion.
    assert chosen(lore, "alpha", "x", "y") == []


def test_recursion_scans_contents_with_their_macros_applied() -> None:
    lore = book(
        {"keys": ["home"], "content": "{{char}} lives here."},
        {"keys": ["orla"], "content": "Orla is a pilot."},
        recursive_scanning=True,
    )
    selection = select_lore(lore, ["home"], macros=lambda text: text.replace("{{char}}", "Orla"))
    assert selection.before == ("Orla lives here.", "Orla is a pilot.")


def test_entries_go_in_insertion_order_at_their_position() -> None:
    lore = book(
        {"keys": ["k"], "content": "third", "insertion_order": 30},
        {"keys": ["k"], "content": "first", "insertion_order": 10},
        {"keys": ["k"], "content": "after", "insertion_order": 0, "position": "after_char"},
        {"keys": ["k"], "content": "second", "insertion_order": 20, "position": "before_char"},
    )
    selection = select_lore(lore, ["k"])
    assert selection.before == ("first", "second", "third")
    assert selection.after == ("after",)
    assert selection


def test_equal_insertion_orders_keep_the_list_order_and_unknown_positions_go_before() -> None:
    lore = book(
        {"keys": ["k"], "content": "b", "insertion_order": 1.5, "position": "somewhere"},
        {"keys": ["k"], "content": "a", "insertion_order": -1},
        {"keys": ["k"], "content": "c", "insertion_order": 1.5},
        {"keys": ["k"], "content": "d", "insertion_order": 2, "position": "after_char"},
        {"keys": ["k"], "content": "e", "position": "after_char"},  # order 0
    )
    selection = select_lore(lore, ["k"])
    assert selection == LoreSelection(before=("a", "b", "c"), after=("e", "d"), tokens=5)


def test_the_budget_keeps_the_most_important_and_is_never_exceeded() -> None:
    lore = book(
        {"keys": ["k"], "content": "a" * 40, "insertion_order": 1, "priority": 1},  # 10 tokens
        {"keys": ["k"], "content": "b" * 40, "insertion_order": 2, "priority": 9},
        {"keys": ["k"], "content": "c" * 40, "insertion_order": 3},  # importance 3
        token_budget=25,
    )
    selection = select_lore(lore, ["k"])
    assert selection.before == ("b" * 40, "c" * 40)  # priority 9 and 3 fit; in their order
    assert selection.tokens == 20
    nothing = book({"keys": ["k"], "content": "x" * 8}, token_budget=1)
    assert chosen(nothing, "k") == []
    assert chosen(book({"keys": ["k"], "content": "x" * 8}, token_budget=2), "k") == ["x" * 8]


def test_priority_beats_insertion_order_and_ties_keep_the_list_order() -> None:
    lore = book(
        {"keys": ["k"], "content": "late" * 10, "insertion_order": 50, "priority": 1},
        {"keys": ["k"], "content": "soon" * 10, "insertion_order": 1, "priority": 2},
        token_budget=10,
    )
    assert chosen(lore, "k") == ["soon" * 10]
    tie = book(
        {"keys": ["k"], "content": "one" * 4, "priority": 3},
        {"keys": ["k"], "content": "two" * 4, "priority": 3},
        token_budget=3,
    )
    assert chosen(tie, "k") == ["one" * 4]


def test_the_budget_stops_at_the_first_entry_that_does_not_fit() -> None:
    # "Remove the lowest priority entries until it fits": a small unimportant entry
    # does not jump over a big important one.
    big = {"keys": ["k"], "content": "big" * 20, "priority": 9}  # 15 tokens
    tiny = {"keys": ["k"], "content": "tiny", "priority": 1}  # 1 token
    assert select_lore(book(big, tiny, token_budget=5), ["k"]) == LoreSelection()
    assert not select_lore(book(big, tiny, token_budget=5), ["k"])
    assert chosen(book(tiny, token_budget=5), "k") == ["tiny"]
    assert select_lore(book(big, tiny), ["k"]).tokens == 15 + 1


def test_decorators_are_dropped_and_macros_applied() -> None:
    lore = book({"keys": ["k"], "content": "@@depth 4\n@@role system\n\nHello {{char}}."})
    selection = select_lore(lore, ["k"], macros=lambda text: text.replace("{{char}}", "Orla"))
    assert selection.before == ("Hello Orla.",)
    assert LoreEntry(content="@@only_decorator").text() == ""
    assert LoreEntry(content="  @@a\r\n@@b\n \nText\n@@not a decorator").text() == (
        "Text\n@@not a decorator"
    )


def test_macros_count_in_the_budget_and_blank_or_repeated_contents_go() -> None:
    lore = book(
        {"keys": ["k"], "content": "{{long}}", "priority": 3},
        {"keys": ["k"], "content": "{{gone}}", "priority": 2},
        {"keys": ["k"], "content": "same", "priority": 1},
        {"keys": ["k"], "content": "same", "position": "after_char"},
        token_budget=12,
    )
    expand = {"{{long}}": "x" * 40, "{{gone}}": " "}
    selection = select_lore(lore, ["k"], macros=lambda text: expand.get(text, text))
    assert selection == LoreSelection(before=("x" * 40, "same"), after=(), tokens=11)


def test_recent_must_be_messages_not_one_string() -> None:
    with pytest.raises(TypeError):
        select_lore(book({"keys": ["k"], "content": "c"}), "k")


def test_estimate_tokens() -> None:
    assert [estimate_tokens("x" * n) for n in (0, 1, 4, 5)] == [0, 1, 1, 2]


class Holder(BaseModel):
    model_config = ConfigDict(frozen=True)
    lore: Lorebook | None = None


@pytest.mark.parametrize(
    "data",
    [
        {"entries": []},
        {
            "name": "Book",
            "scan_depth": 3,
            "token_budget": 100,
            "recursive_scanning": False,
            "extensions": {},
            "entries": [
                {
                    "keys": [],
                    "content": "",
                    "extensions": {"depth": 4},
                    "enabled": True,
                    "insertion_order": 0,
                    "case_sensitive": False,
                    "priority": 1.5,
                    "id": "e1",
                    "position": "after_char",
                    "probability": 100,
                    "selectiveLogic": 0,
                }
            ],
            "x_tool": {"a": [1, 2]},
        },
        {"entries": [{"content": "c", "priority": None, "comment": None}], "name": None},
        {
            "name": None,
            "description": "",
            "scan_depth": 0,
            "token_budget": None,
            "recursive_scanning": True,
            "extensions": None,
            "x_null": None,
            "entries": [
                {
                    "keys": ["a", "/b/i"],
                    "secondary_keys": [],
                    "content": "@@depth 4\nText",
                    "enabled": False,
                    "insertion_order": 2.5,
                    "constant": None,
                    "selective": True,
                    "use_regex": True,
                    "id": 3,
                    "name": "",
                    "position": "somewhere",
                    "extensions": {"nested": None, "list": [None, 1.0]},
                },
                {"content": "", "enabled": True, "keys": [], "x_other": None},
            ],
        },
    ],
)
def test_a_book_dumps_exactly_as_given(data: dict[str, Any]) -> None:
    assert Lorebook.model_validate(data).model_dump(mode="json", exclude_defaults=True) == data
    held = Holder(lore=Lorebook.model_validate(data))
    assert held.model_dump(mode="json", exclude_defaults=True) == {"lore": data}
    assert Holder.model_validate({"lore": data}) == held
    again = Lorebook.model_validate_json(
        Lorebook.model_validate(data).model_dump_json(exclude_defaults=True)
    )
    assert again.model_dump(mode="json", exclude_defaults=True) == data


def test_absent_fields_stay_absent_and_dumps_keep_their_options() -> None:
    lore = Lorebook.model_validate({"name": None, "entries": [{"content": "c"}]})
    assert lore.scan_depth is None
    assert lore.entries[0].enabled is None
    assert lore.model_dump(exclude_defaults=True) == {"name": None, "entries": [{"content": "c"}]}
    assert lore.model_dump(exclude_defaults=True, exclude={"name"}) == {
        "entries": [{"content": "c"}]
    }
    assert lore.model_dump(exclude_defaults=True, include={"entries"}) == {
        "entries": [{"content": "c"}]
    }
    assert lore.model_dump(exclude_defaults=True, exclude_none=True) == {
        "entries": [{"content": "c"}]
    }
    assert lore.model_dump()["token_budget"] is None  # a plain dump has every field


def test_books_are_frozen() -> None:
    lore = book({"keys": ["k"], "content": "c"})
    with pytest.raises(ValidationError):
        lore.scan_depth = 3
    with pytest.raises(ValidationError):
        lore.entries[0].content = "d"


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({}, ("entries",)),
        ({"entries": [{"keys": ["a"]}]}, ("entries", 0, "content")),
        ({"entries": [{"keys": "a", "content": "c"}]}, ("entries", 0, "keys")),
        ({"entries": [{"content": "c", "enabled": "yes"}]}, ("entries", 0, "enabled")),
        (
            {"entries": [{"content": "c", "insertion_order": True}]},
            ("entries", 0, "insertion_order"),
        ),
        ({"scan_depth": -1, "entries": []}, ("scan_depth",)),
        ({"token_budget": -1, "entries": []}, ("token_budget",)),
        ({"token_budget": 1.5, "entries": []}, ("token_budget",)),
        ({"recursive_scanning": "true", "entries": []}, ("recursive_scanning",)),
        ({"entries": {}}, ("entries",)),
        ({"entries": [{"content": None}]}, ("entries", 0, "content")),
        ({"entries": [{"content": 1}]}, ("entries", 0, "content")),
        ({"entries": [{"content": "c", "keys": ["a", 1]}]}, ("entries", 0, "keys", 1)),
        ({"entries": [{"content": "c", "secondary_keys": "b"}]}, ("entries", 0)),
        ({"entries": [{"content": "c", "case_sensitive": 1}]}, ("entries", 0)),
        ({"entries": [{"content": "c", "priority": "1"}]}, ("entries", 0, "priority")),
        ({"entries": [{"content": "c", "priority": float("nan")}]}, ("entries", 0)),
        ({"entries": [{"content": "c", "insertion_order": float("inf")}]}, ("entries", 0)),
        ({"entries": [{"content": "c", "position": 3}]}, ("entries", 0, "position")),
        ({"entries": [{"content": "c", "id": 1.5}]}, ("entries", 0, "id")),
        ({"entries": [{"content": "c", "extensions": []}]}, ("entries", 0, "extensions")),
    ],
)
def test_a_bad_book_names_the_field(data: dict[str, Any], where: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as caught:
        Lorebook.model_validate(data)
    assert any(error["loc"][: len(where)] == where for error in caught.value.errors())


_word = st.sampled_from(["alpha", "beta", "gamma", "delta", "/gam+a/i", "(al|be)", "", " "])
_number = st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False))
_content = st.one_of(
    st.text(max_size=60),
    st.lists(st.sampled_from(["alpha", "beta ", "gamma\n", "@@depth 4\n", " "]), max_size=6).map(
        "".join
    ),
)
_entries = st.lists(
    st.fixed_dictionaries(
        {"keys": st.lists(_word, max_size=3), "content": _content},
        optional={
            "enabled": st.one_of(st.none(), st.booleans()),
            "constant": st.booleans(),
            "selective": st.booleans(),
            "secondary_keys": st.lists(_word, max_size=2),
            "insertion_order": _number,
            "priority": st.one_of(st.none(), _number),
            "case_sensitive": st.booleans(),
            "use_regex": st.booleans(),
            "position": st.sampled_from(["before_char", "after_char", "other"]),
        },
    ),
    max_size=8,
)


_any_selection = given(
    entries=_entries,
    budget=st.one_of(st.none(), st.integers(0, 40)),
    depth=st.one_of(st.none(), st.integers(0, 5)),
    recursive=st.booleans(),
    messages=st.lists(st.text(alphabet="alphbetgmd ALPHA([\n", max_size=30), max_size=4),
)
"""A lorebook, its limits and a conversation: what the selection properties draw."""


@settings(max_examples=300, deadline=None)
@_any_selection
def test_any_selection_keeps_to_the_budget_and_to_enabled_entries(
    entries: list[dict[str, Any]],
    budget: int | None,
    depth: int | None,
    recursive: bool,
    messages: list[str],
) -> None:
    lore = book(*entries, token_budget=budget, scan_depth=depth, recursive_scanning=recursive)
    selection = select_lore(lore, messages)
    texts = [*selection.before, *selection.after]
    assert selection.tokens == sum(estimate_tokens(text) for text in texts)
    if budget is not None:
        assert selection.tokens <= budget
    enabled = {entry.text() for entry in lore.entries if entry.enabled is not False}
    assert set(texts) <= enabled
    assert all(text.strip() for text in texts)
    assert len(set(texts)) == len(texts)
    assert select_lore(lore, messages) == selection  # deterministic
    if budget is None:  # every enabled constant entry with a content is there
        assert {
            entry.text() for entry in lore.entries if entry.constant and entry.enabled is not False
        } - {""} <= set(texts)
    dumped = lore.model_dump(mode="json", exclude_defaults=True)
    assert dumped == {
        "entries": entries,
        "token_budget": budget,
        "scan_depth": depth,
        "recursive_scanning": recursive,
    }


def _old_select(book: Lorebook, recent: list[str]) -> LoreSelection:
    """The selection as it was made before each text was scanned once (every round
    rescanned everything, Python's re): what the index must still give for keys that do
    not span two texts."""
    depth = 2 if book.scan_depth is None else book.scan_depth
    scanned = "\n".join(recent[-depth:]) if depth else ""

    def found(entry: LoreEntry, keys: list[str], text: str) -> bool:
        sensitive = bool(entry.case_sensitive)
        for key in keys:
            if not key.strip():
                continue
            slashed = re.fullmatch(r"/(.+)/([gimsuy]*)", key, re.DOTALL)
            if slashed is None and not entry.use_regex:
                if (key if sensitive else key.casefold()) in (
                    text if sensitive else text.casefold()
                ):
                    return True
                continue
            source, flags = (slashed.group(1), slashed.group(2)) if slashed else (key, "")
            flag = 0 if sensitive and "i" not in flags else re.IGNORECASE
            if re.search(source, text, flag):
                return True
        return False

    def matches(entry: LoreEntry, text: str) -> bool:
        if entry.constant:
            return True
        if not text or not found(entry, entry.keys or [], text):
            return False
        return not (entry.selective and entry.secondary_keys) or found(
            entry, entry.secondary_keys, text
        )

    candidates = [
        (i, e, t) for i, e in enumerate(book.entries) if e.enabled is not False and (t := e.text())
    ]
    matched: dict[int, tuple[LoreEntry, str]] = {}
    while True:
        new = {i: (e, t) for i, e, t in candidates if i not in matched and matches(e, scanned)}
        matched.update(new)
        if not new or not book.recursive_scanning:
            break
        scanned += "".join("\n" + text for _, text in new.values())
    kept: list[tuple[int, LoreEntry, str]] = []
    seen: set[str] = set()
    used = 0

    def importance(entry: LoreEntry) -> float:
        value = entry.priority if entry.priority is not None else entry.insertion_order
        return float(value or 0)

    order = sorted(matched.items(), key=lambda item: (-importance(item[1][0]), item[0]))
    for index, (entry, text) in order:
        if not text.strip() or text in seen:
            continue
        cost = estimate_tokens(text)
        if book.token_budget is not None and used + cost > book.token_budget:
            break
        kept.append((index, entry, text))
        seen.add(text)
        used += cost
    kept.sort(key=lambda item: (item[1].insertion_order or 0, item[0]))
    after = tuple(t for _, e, t in kept if e.position == "after_char")
    before = tuple(t for _, e, t in kept if e.position != "after_char")
    return LoreSelection(before, after, used)


@settings(max_examples=300, deadline=None)
@_any_selection
def test_scanning_each_text_once_selects_what_rescanning_everything_did(
    entries: list[dict[str, Any]],
    budget: int | None,
    depth: int | None,
    recursive: bool,
    messages: list[str],
) -> None:
    lore = book(*entries, token_budget=budget, scan_depth=depth, recursive_scanning=recursive)
    assert select_lore(lore, messages) == _old_select(lore, messages)
