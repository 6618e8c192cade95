"""Hypothesis strategies for persona bodies the REST API should accept, with random values:
Schemathesis alone, knowing only ``object``, almost never makes one, and the code behind a
created or replaced persona (store, registry, cards) would go untried."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["KNOWN_IDS", "persona_bodies", "persona_ids"]

KNOWN_IDS = ["socrates", "ada-lovelace", "science-panel", "marie-curie"]
"""Ids of bundled personas (the fuzzed hubs serve a copy of them)."""

_text = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=40
).filter(lambda text: text.strip() != "")
_texts = st.lists(_text, max_size=3)
_domains = st.one_of(st.tuples(st.from_regex(r"\A[A-Za-z0-9]{1,12}\Z"), _text).map(" ".join), _text)
"""Domain names: most with a letter or digit for the skill id's slug (one without is a 422)."""

persona_ids = st.sampled_from(KNOWN_IDS) | st.from_regex(r"\Afz-[a-z0-9][a-z0-9-]{0,20}\Z")
"""Existing ids (a create is then a 409) and new ones."""

persona_bodies: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {
        "name": _text,
        "description": _text,
        "personal_background": _text,
        "language_style": st.fixed_dictionaries(
            {"tone": _text}, optional={"characteristics": _texts, "sample_phrases": _texts}
        ),
        "knowledge_domains": st.dictionaries(
            _domains, st.lists(_text, min_size=1, max_size=3), min_size=1, max_size=3
        ),
    },
    optional={
        "interaction_samples": st.lists(
            st.fixed_dictionaries({"user": _text, "assistant": _text}), max_size=2
        ),
        "greeting": st.lists(st.sampled_from(["{{char}}", "{{user}}", " hi "]) | _text).map(
            "".join
        ),
        "tags": _texts,
        "access": st.sampled_from(["public", "authenticated"]),
        "model": st.fixed_dictionaries(
            {},
            optional={
                "temperature": st.floats(0, 2),
                "max_tokens": st.integers(1, 4096),
            },
        ),
        "tools": st.fixed_dictionaries({"allow": st.just([])}),
        "consult": st.lists(st.sampled_from(KNOWN_IDS), max_size=2, unique=True),
        "panel": st.fixed_dictionaries(
            {"members": st.lists(st.sampled_from(KNOWN_IDS), min_size=1, max_size=3)},
            optional={
                "mode": st.sampled_from(["broadcast", "round-table", "moderated"]),
                "rounds": st.integers(1, 2),
            },
        ),
    },
)
