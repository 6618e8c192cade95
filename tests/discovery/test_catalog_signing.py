"""The JSON Canonicalization Scheme (RFC 8785) the catalog's signatures are made over: keys
in UTF-16 order (the RFC's own example), numbers in ECMAScript's shortest form."""

from __future__ import annotations

import pytest

from persona_agent.security.catalog_signing import canonical_json, digest


def test_keys_sort_by_utf16_code_units_as_rfc_8785_shows() -> None:
    keys = ["\u20ac", "\r", "\ufb33", "1", "\U0001f600", "\u0080", "\u00f6"]
    text = canonical_json({key: 0 for key in keys}).decode("utf-8")
    order = ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert [text.index(f'"{k}"' if k != "\r" else '"\\r"') for k in order] == sorted(
        text.index(f'"{k}"' if k != "\r" else '"\\r"') for k in order
    )


def test_numbers_and_text_are_written_once_and_shortest() -> None:
    value = {"b": [1.0, 1e21, 1e-7, 0.5, -0.0], "a": "é\n", "c": None, "d": True}
    assert (
        canonical_json(value) == '{"a":"é\\n","b":[1,1e+21,1e-7,0.5,0],"c":null,"d":true}'.encode()
    )
    assert digest(value) == digest({"d": True, "c": None, "a": "é\n", "b": [1, 1e21, 1e-7, 0.5, 0]})
    with pytest.raises(ValueError, match=r"(?i)nan"):
        canonical_json(float("nan"))
