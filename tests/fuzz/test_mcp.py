"""``/mcp`` fuzzed with Hypothesis: JSON-RPC bodies of both protocol eras, and broken ones.

Requests go through real HTTP to the A2A fuzzers' hub (uvicorn on 127.0.0.1, the fake
LLM echoing, so a tool call that reaches a persona answers at once): in a session opened
by the ``initialize`` handshake (2025-11-25), as 2026-07-28's per-request envelopes
(``_meta`` and the ``Mcp-Method``/``Mcp-Name`` headers), or with random
``Mcp-Session-Id`` and ``MCP-Protocol-Version`` headers. Bodies are MCP methods with random
parameters (``tools/call`` of personas, panels and no tool, with random arguments;
``resources/read`` of random URIs; ``notifications/cancelled`` of random ids), unknown
methods, batches, values that are not objects, bodies that are not JSON, huge strings
within the body limit, under wrong content types. Every answer must come whole within
:data:`~tests.fuzz.budget.DEADLINE` (streams to their end), never be a 5xx, and every
JSON-RPC message in it be well formed: ``jsonrpc`` ``2.0``, ``result`` xor ``error``, the
error a code of JSON-RPC or MCP with a message. Afterwards the hub serves ``/healthz``
and a persona still answers.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

from tests.fuzz.a2a_values import deep, huge_text, jsonrpc_ids, texts, wild
from tests.fuzz.budget import DEADLINE, SEED, fuzz_settings
from tests.fuzz.hub import SENTINEL, FuzzHub, assert_serving
from tests.fuzz.tally import TALLY
from tests.fuzz.wire import Answer, json_events, send

HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
ACCEPT = "application/json, text/event-stream"
CODES = frozenset(
    {
        -32700,  # parse error
        -32600,  # invalid request
        -32601,  # method not found
        -32602,  # invalid params
        -32000,  # connection closed (the SDK's), session errors
        -32001,  # request timeout
        -32002,  # resource not found
        -32020,  # header mismatch (2026-07-28)
        -32021,  # missing client capability
        -32022,  # unsupported protocol version
    }
)
"""The codes an answer may carry: JSON-RPC's and MCP's; never -32603 (internal error) for
what a client sent."""

METHODS = [
    "initialize", "ping", "tools/list", "tools/call", "tools/call", "tools/call",
    "resources/list", "resources/read", "resources/templates/list", "prompts/list",
    "prompts/get", "completion/complete", "logging/setLevel", "subscriptions/listen",
    "notifications/cancelled", "notifications/initialized", "server/discover",
]  # fmt: skip
_tools = st.sampled_from(["socrates", "science-panel", "ask_persona", "list_personas"])
_names = st.one_of(_tools, _tools, _tools, texts)
_tool_names = _names.filter(lambda name: name != SENTINEL)
_messages = st.text(max_size=60) | huge_text.map(lambda text: text[:20_000])
_arguments = st.one_of(
    st.fixed_dictionaries(
        {"message": _messages},
        optional={"conversation_id": texts, "persona": _tool_names.filter(bool), "query": texts},
    ),
    st.dictionaries(st.text(max_size=12), wild, max_size=4),
    wild,
)
_uris = (
    st.sampled_from(
        ["persona://socrates", "file:///etc/passwd", "http://127.0.0.1:9/", "", "x" * 5000]
    )
    | texts
)
_PARAMS: dict[str, st.SearchStrategy[Any]] = {
    "tools/call": st.fixed_dictionaries({"name": _tool_names}, optional={"arguments": _arguments}),
    "resources/read": st.fixed_dictionaries({"uri": _uris}),
    "prompts/get": st.fixed_dictionaries({"name": _names}, optional={"arguments": wild}),
    "notifications/cancelled": st.fixed_dictionaries(
        {"requestId": jsonrpc_ids | wild}, optional={"reason": texts}
    ),
    "initialize": st.fixed_dictionaries(
        {
            "protocolVersion": st.sampled_from([HANDSHAKE, "2024-11-05", MODERN]) | texts,
            "capabilities": wild,
            "clientInfo": st.fixed_dictionaries({"name": texts, "version": texts}) | wild,
        }
    ),
    "logging/setLevel": st.fixed_dictionaries({"level": st.sampled_from(["debug"]) | texts}),
}
_known = st.sampled_from(METHODS)
_ids = st.integers(0, 10_000) | st.uuids().map(str)
_methods = st.one_of(_known, _known, _known, _known, st.text(max_size=30))


@st.composite
def _requests(draw: st.DrawFn, modern: bool) -> dict[str, Any]:
    """One JSON-RPC request (or notification) of an MCP method, its parameters mostly
    its own (wild or deep sometimes); of ``modern`` clients, with the 2026-07-28 envelope."""
    method = draw(_methods, label="method")
    own = _PARAMS.get(method, st.just({}))
    params = draw(st.one_of(own, own, own, own, own, wild, deep), label="params")
    if modern and isinstance(params, dict) and not draw(_rarely(20), label="no meta"):
        meta = {VERSION_KEY: MODERN, CAPABILITIES_KEY: {}}
        params = {**params, "_meta": meta}
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if not draw(_rarely(10), label="no params"):
        body["params"] = params
    if not method.startswith("notifications/"):
        body["id"] = draw(st.one_of(_ids, _ids, jsonrpc_ids), label="id")
    return body


_BAD_CONTENT_TYPES = ["text/plain", "", "application/x-www-form-urlencoded", "application/json;x"]
_BAD_ACCEPTS = ["application/json", "", "text/event-stream", "*/*"]


def _rarely(percent: int) -> st.SearchStrategy[bool]:
    """True ``percent`` times in a hundred or so. Hypothesis draws the branches of
    ``one_of``, the items of ``sampled_from`` and small numbers (0 above all) far from
    evenly (the odd branch took a third of the cases or more, and little reached a
    persona); a middle range of numbers it does not favour."""
    return st.integers(0, 99).map(lambda n: 99 - percent <= n < 99)


def _seldom(usual: str, others: list[str], percent: int = 10) -> st.SearchStrategy[str]:
    """``usual``, but ``percent`` times in a hundred or so one of ``others``."""
    return _rarely(percent).flatmap(lambda odd: st.sampled_from(others) if odd else st.just(usual))


_random_sessions = st.none() | st.text(st.characters(min_codepoint=33, max_codepoint=126))
_random_versions = st.none() | st.sampled_from([HANDSHAKE, MODERN, "2024-11-05", "1999-01-01"])


def _body(draw: st.DrawFn, modern: bool) -> bytes:
    kind = draw(
        _seldom("request", ["batch", "not an object", "not JSON", "huge"], 20),
        label="kind",
    )
    if kind == "batch":
        value: Any = draw(st.lists(_requests(modern), max_size=3), label="batch")
    elif kind == "not an object":
        value = draw(st.none() | st.integers() | st.text(max_size=10) | wild, label="value")
    elif kind == "not JSON":
        return draw(st.binary(max_size=60) | st.just(b'{"jsonrpc": "2.0", "id": 1,'), label="raw")
    elif kind == "huge":
        value = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "a" * 900_000}}
    else:
        value = draw(_requests(modern), label="request")
    return json.dumps(value).encode("utf-8", "surrogatepass")


def _header_value(value: Any) -> bool:
    """Whether ``value`` can be sent as a header's value as it is (printable ASCII)."""
    return isinstance(value, str) and value.isascii() and value.isprintable()


def _post(hub: FuzzHub, body: bytes, headers: dict[str, str]) -> Answer:
    with httpx.Client() as client:
        return send(client, "POST", f"{hub.url}/mcp", content=body, headers=headers)


def _open_session(hub: FuzzHub) -> str:
    """The ``initialize`` handshake of 2025-11-25: the new session's id."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE,
            "capabilities": {},
            "clientInfo": {"name": "fuzzer", "version": "1"},
        },
    }
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    opened = _post(hub, json.dumps(initialize).encode(), headers)
    assert opened.status == 200, opened.shown()
    session = opened.headers.get("mcp-session-id")
    ready = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    if session is not None:  # stateless: no session to hold
        headers |= {"mcp-session-id": session, "mcp-protocol-version": HANDSHAKE}
    done = _post(hub, ready, headers)
    assert done.status == 202, done.shown()
    return session or ""


def check_mcp_answer(answer: Answer) -> None:
    """No 5xx; each JSON-RPC message of the answer (a JSON one, a batch, or the events of
    a stream) well formed."""
    assert answer.status < 500, answer.shown()
    if answer.media_type == "text/event-stream":
        assert answer.status == 200, answer.shown()
        messages = json_events(answer.body)
    elif answer.media_type == "application/json" and answer.body:
        body = answer.json()
        messages = body if isinstance(body, list) else [body]
    else:
        return  # 202 for a notification; a plain-text refusal of a 4xx
    for message in messages:
        assert isinstance(message, dict), answer.shown()
        if "detail" in message and answer.status >= 400 and "jsonrpc" not in message:
            continue  # the hub's own HTTP refusal (401, 413...), not JSON-RPC
        assert message.get("jsonrpc") == "2.0", answer.shown()
        if "method" in message:
            continue  # the server's notification or request to the client
        assert ("result" in message) != ("error" in message), answer.shown()
        if "error" in message:
            error = message["error"]
            assert isinstance(error, dict), answer.shown()
            assert error.get("code") in CODES, f"not a known code: {answer.shown()}"
            assert isinstance(error.get("message"), str), answer.shown()
            assert error["message"], answer.shown()


@pytest.mark.parametrize("era", ["handshake", "modern", "random headers"])
@seed(SEED)
@fuzz_settings(scale=2)
@given(data=st.data())
def test_random_jsonrpc_bodies_to_mcp(a2a_hub: FuzzHub, era: str, data: st.DataObject) -> None:
    modern = era == "modern"
    body = data.draw(st.composite(lambda draw: _body(draw, modern))(), label="body")
    headers = {"accept": data.draw(_seldom(ACCEPT, _BAD_ACCEPTS), label="accept")}
    content_type = data.draw(_seldom("application/json", _BAD_CONTENT_TYPES), label="type")
    if content_type:
        headers["content-type"] = content_type
    if era == "handshake":
        session = _open_session(a2a_hub)
        if session:
            headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = HANDSHAKE
    elif modern:
        headers["mcp-protocol-version"] = MODERN
        try:
            sent = json.loads(body)
        except ValueError:
            sent = None
        if isinstance(sent, dict) and _header_value(sent.get("method")):
            headers["mcp-method"] = sent["method"]
            params = sent.get("params")
            if isinstance(params, dict) and _header_value(params.get("name")):
                headers["mcp-name"] = params["name"]
    else:
        session_id = data.draw(_random_sessions, label="session")
        version = data.draw(_random_versions, label="version")
        if session_id is not None:
            headers["mcp-session-id"] = session_id
        if version is not None:
            headers["mcp-protocol-version"] = version
    with TALLY.case("MCP", era) as counted:
        answer = _post(a2a_hub, body, headers)
        counted.status = answer.status
        check_mcp_answer(answer)


def test_the_hub_serves_on_after_the_mcp_fuzzing(a2a_hub: FuzzHub) -> None:
    session = _open_session(a2a_hub)
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "socrates", "arguments": {"message": "Still there?"}},
    }
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    if session:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": HANDSHAKE}
    answer = _post(a2a_hub, json.dumps(call).encode(), headers)
    check_mcp_answer(answer)
    said = answer.json() if answer.media_type == "application/json" else json_events(answer.body)
    assert "Still there?" in json.dumps(said), answer.shown()
    assert_serving(a2a_hub.url)
    assert httpx.get(f"{a2a_hub.url}/healthz", timeout=DEADLINE).status_code == 200
