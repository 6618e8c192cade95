"""Lorebooks: which entries a conversation brings up, in what order, within what budget."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError

from persona_agent.personas.lore import Lorebook, LoreEntry, estimate_tokens, select_lore


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


def test_constant_disabled_and_empty_entries() -> None:
    lore = book(
        {"keys": [], "content": "Always.", "constant": True},
        {"keys": ["x"], "content": "Off.", "enabled": False},
        {"keys": ["x"], "content": "Off too.", "enabled": False, "constant": True},
        {"keys": ["x"], "content": "   "},
        {"keys": [""], "content": "Blank key."},
    )
    assert chosen(lore, "x") == ["Always."]
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


@pytest.mark.parametrize("key", ["/(unclosed/", "([", "/a{2,1}/"])
def test_a_key_that_does_not_compile_never_matches_and_never_raises(key: str) -> None:
    lore = book({"keys": [key], "content": "Never.", "use_regex": True})
    assert chosen(lore, f"text with {key} in it") == []


def test_recursive_scanning() -> None:
    entries = (
        {"keys": ["castle"], "content": "The castle belongs to the Duke."},
        {"keys": ["duke"], "content": "The Duke is old."},
    )
    assert chosen(book(*entries), "the castle") == ["The castle belongs to the Duke."]
    both = chosen(book(*entries, recursive_scanning=True), "the castle")
    assert both == ["The castle belongs to the Duke.", "The Duke is old."]


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


def test_decorators_are_dropped_and_macros_applied() -> None:
    lore = book({"keys": ["k"], "content": "@@depth 4\n@@role system\n\nHello {{char}}."})
    selection = select_lore(lore, ["k"], macros=lambda text: text.replace("{{char}}", "Orla"))
    assert selection.before == ("Hello Orla.",)
    assert LoreEntry(content="@@only_decorator").text() == ""


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
    ],
)
def test_a_book_dumps_exactly_as_given(data: dict[str, Any]) -> None:
    assert Lorebook.model_validate(data).model_dump(mode="json", exclude_defaults=True) == data
    held = Holder(lore=Lorebook.model_validate(data))
    assert held.model_dump(mode="json", exclude_defaults=True) == {"lore": data}


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
    ],
)
def test_a_bad_book_names_the_field(data: dict[str, Any], where: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as caught:
        Lorebook.model_validate(data)
    assert any(error["loc"][: len(where)] == where for error in caught.value.errors())


_word = st.sampled_from(["alpha", "beta", "gamma", "delta", "/gam+a/i", "([", ""])
_entries = st.lists(
    st.fixed_dictionaries(
        {"keys": st.lists(_word, max_size=3), "content": st.text(max_size=60)},
        optional={
            "enabled": st.booleans(),
            "constant": st.booleans(),
            "selective": st.booleans(),
            "secondary_keys": st.lists(_word, max_size=2),
            "insertion_order": st.integers(-5, 5),
            "priority": st.integers(0, 5),
            "case_sensitive": st.booleans(),
            "use_regex": st.booleans(),
            "position": st.sampled_from(["before_char", "after_char", "other"]),
        },
    ),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(
    entries=_entries,
    budget=st.one_of(st.none(), st.integers(0, 40)),
    recursive=st.booleans(),
    messages=st.lists(st.text(alphabet="alphbetgmd ALPHA([", max_size=30), max_size=4),
)
def test_any_selection_keeps_to_the_budget_and_to_enabled_entries(
    entries: list[dict[str, Any]], budget: int | None, recursive: bool, messages: list[str]
) -> None:
    lore = book(*entries, token_budget=budget, recursive_scanning=recursive)
    selection = select_lore(lore, messages)
    texts = [*selection.before, *selection.after]
    assert selection.tokens == sum(estimate_tokens(text) for text in texts)
    if budget is not None:
        assert selection.tokens <= budget
    enabled = {entry.text() for entry in lore.entries if entry.enabled is not False}
    assert set(texts) <= enabled
    assert "" not in texts
