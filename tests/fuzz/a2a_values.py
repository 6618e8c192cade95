"""Hypothesis strategies for the values inside A2A requests: ids, texts, wild JSON (nested,
huge, odd unicode, wrong types), push URLs that never leave this machine."""

from __future__ import annotations

import base64
from typing import Any, TypeVar

from hypothesis import strategies as st

__all__ = [
    "context_ids",
    "deep",
    "huge_text",
    "jsonrpc_ids",
    "mostly",
    "odd_text",
    "push_urls",
    "raw_bytes",
    "scalars",
    "task_ids",
    "texts",
    "wild",
]

T = TypeVar("T")

ODD_STRINGS = [
    "",
    " ",
    "\x00",
    "\ud800",  # a lone surrogate: JSON can carry it escaped, UTF-8 cannot
    "\u202e\u200b\ufeff",
    "💥" * 50,
    "../../etc/passwd",
    "%2e%2e%2f",
    "<script>alert(1)</script>",
    "${jndi:ldap://x}",
    "{{char}}" * 20,
    "null",
    "NaN",
    "-1",
    "9" * 400,
    "a/b?c#d",
    "\r\nX-Injected: 1",
]
odd_text = st.sampled_from(ODD_STRINGS)
texts = st.text(max_size=40) | odd_text
"""Text of any kind, the odd included."""

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | texts
"""Floats include NaN and infinities, which ``json.dumps`` writes as ``NaN``/``Infinity``:
not JSON."""
wild: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
"""Any JSON value, small."""

huge_text = st.sampled_from([2_000, 60_000, 400_000]).map(lambda n: "ẞ" * n)
"""Long text: up to 1.2 MB as UTF-8, past the default 1 MiB message limit."""


def _nest(depth: int, as_list: bool) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value] if as_list else {"n": value}
    return value


deep = st.builds(_nest, st.sampled_from([20, 64, 200, 900]), st.booleans())
"""JSON nested 20 to 900 deep (lists or objects)."""

any_value = wild | scalars | huge_text | deep
"""A value where another was expected: a wrong type, a huge or deeply nested one."""


def mostly(valid: st.SearchStrategy[T]) -> st.SearchStrategy[T | Any]:
    """``valid`` three times in four, else any value (wrong types included): a request
    with several fields still has all of them valid often enough to go deep."""
    return st.one_of(valid, valid, valid, any_value)


uuids = st.uuids().map(str)
jsonrpc_ids = st.none() | st.integers(-(2**70), 2**70) | st.text(max_size=20) | odd_text
"""Ids JSON-RPC allows (string, number, null); wrong ones come from :data:`wild`."""
task_ids = uuids | texts
context_ids = uuids | texts
raw_bytes = st.binary(max_size=200).map(lambda b: base64.b64encode(b).decode()) | texts
"""A file part's ``raw``/``bytes``: base64, or text that is not."""

_LOOPBACK_WEBHOOK = "http://127.0.0.1:9/hook"
push_urls = st.sampled_from(
    [
        _LOOPBACK_WEBHOOK,  # refused: a loopback address (the hub allows no host)
        "http://10.0.0.1/hook",
        "http://[::1]/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://0x7f000001/",
        "http://[::ffff:127.0.0.1]/",
        "http://user:pass@127.0.0.1/",
        "file:///etc/passwd",
        "gopher://127.0.0.1:25/",
        "http://127.0.0.1:9/ a",
        "http://127.0.0.1\\@10.0.0.1/",
        "",
        "not a url",
    ]
) | st.text(max_size=30).map(lambda text: "no-scheme:" + text)
"""Webhook URLs, none of which may leave this machine (no host name to resolve):
refused private addresses, other schemes, broken URLs."""
