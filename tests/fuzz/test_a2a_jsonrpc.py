"""A2A JSON-RPC fuzzed with Hypothesis: every method of 1.0 and 0.3, and broken envelopes.

Requests go through real HTTP to a real hub (uvicorn on 127.0.0.1, the fake LLM
answering, push notifications on, a webhook of the tests' own the only host it may
call), to a persona, the panel, the hub's directory agent or an unknown id, with
``A2A-Version`` 1.0, 0.3, absent or garbage. Parameters are each method's own, every field
mostly valid and sometimes anything (wrong types, huge, deeply nested, odd unicode), with
ids of tasks and push configs the hub really has. Every answer must come whole within
:data:`~tests.fuzz.budget.DEADLINE` (streams included), never be a 5xx, and be JSON-RPC
with the specification's codes: -32700 for a body that is not JSON, -32600 for a bad
envelope or parameters that are not structured, -32601 for an unknown method, -32009 (or
-32602) for a 1.0 method sent as another version, -32602 for parameters by position,
A2A's -32001..-32009, never -32603; a body that is not JSON text (not UTF-8, ``NaN``, a lone
surrogate) is -32700.
Afterwards the hub serves ``/healthz`` and a persona still answers.

Examples per test: ``PERSONA_AGENT_FUZZ_EXAMPLES`` (default 20); seed
``PERSONA_AGENT_FUZZ_SEED``; the counts are printed at the end of the run.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

from tests.fuzz.a2a_checks import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    VERSION_NOT_SUPPORTED,
    check_jsonrpc_answer,
)
from tests.fuzz.a2a_params import METHODS_0_3, METHODS_1_0, params_0_3, params_1_0
from tests.fuzz.a2a_values import deep, jsonrpc_ids, push_urls, task_ids, wild
from tests.fuzz.budget import SEED, fuzz_settings
from tests.fuzz.conftest import Pool
from tests.fuzz.hub import FuzzHub, assert_serving
from tests.fuzz.tally import TALLY
from tests.fuzz.wire import send

PERSONAS = st.sampled_from(["socrates", "socrates", "socrates", "science-panel", "", "no-such-one"])
"""Where requests go: a persona, the panel, the hub's directory agent (``/a2a/``), an
unknown id (404)."""
GARBAGE_VERSIONS = st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=8)
TAKES_NOTHING = {"agent/getAuthenticatedExtendedCard"}
"""A method with no parameters: whatever is sent as ``params`` is ignored."""
MAX_MESSAGE_BYTES = 1024 * 1024
"""The hub's default ``PERSONA_AGENT_MAX_MESSAGE_BYTES``: a larger body is -32600 (413)."""


def _pooled(pool: Pool) -> tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]:
    """Task ids (the hub's, half the time) and webhook URLs (the allowed receiver's, a
    third of the time), for the parameter strategies."""
    tasks = st.sampled_from(pool.task_ids) | task_ids
    urls = st.one_of(st.just(pool.webhook_url), push_urls, push_urls)
    return tasks, urls


def _post(hub: FuzzHub, persona: str, body: bytes, headers: dict[str, str]) -> Any:
    with httpx.Client() as client:
        return send(client, "POST", f"{hub.url}/a2a/{persona}/", content=body, headers=headers)


@pytest.mark.parametrize("method", METHODS_1_0 + METHODS_0_3)
def test_each_method_with_random_parameters(a2a_hub: FuzzHub, pool: Pool, method: str) -> None:
    tasks, urls = _pooled(pool)
    is_1_0 = method in METHODS_1_0
    params = (params_1_0 if is_1_0 else params_0_3)(tasks, urls)[method]
    if method.endswith(("PushNotificationConfig", "/get", "/delete")):
        params = params | st.just({"taskId": pool.task_ids[0], "id": pool.config_ids[0]})
    versions = st.sampled_from(["1.0"] if is_1_0 else ["0.3", None]) | st.sampled_from(
        ["1.0", "0.3", None]
    )

    @seed(SEED)
    @fuzz_settings()
    @given(
        persona=PERSONAS,
        request_id=jsonrpc_ids,
        version=versions | GARBAGE_VERSIONS,
        values=st.one_of(params, params, params, wild, deep),
        ascii_only=st.booleans(),
    )
    def run(
        persona: str, request_id: Any, version: str | None, values: Any, ascii_only: bool
    ) -> None:
        envelope = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": values}
        body = json.dumps(envelope, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
        headers = {"content-type": "application/json"}
        if version is not None:
            headers["A2A-Version"] = version
        with TALLY.case("JSON-RPC", method) as counted:
            answer = _post(a2a_hub, persona, body, headers)
            counted.status = answer.status
            if persona == "no-such-one":
                assert answer.status == 404, answer.shown()
                return
            expected_id, codes = _expected(method, request_id, version, values, body)
            check_jsonrpc_answer(answer, expected_id, codes)

    run()


def _expected(
    method: str, request_id: Any, version: str | None, values: Any, body: bytes
) -> tuple[Any, set[int] | None]:
    """The id a request's answer must carry, and the errors it may be (``None``: any
    spec code, or a result), by what is wrong with it."""
    if _json_text(body) is False:
        return None, {PARSE_ERROR}
    if len(body) > MAX_MESSAGE_BYTES:
        return None, {INVALID_REQUEST}
    if values is not None and not isinstance(values, (dict, list)):
        return ..., {INVALID_REQUEST}  # JSON-RPC 2.0: params is structured, or absent
    # A 1.0 method under another version is never run: VersionNotSupported, or Invalid
    # params when its parameters do not parse either (the SDK parses them first).
    if method in METHODS_1_0 and version != "1.0" and values is not None:
        return request_id, {VERSION_NOT_SUPPORTED, INVALID_PARAMS}
    if isinstance(values, list) and values and method not in TAKES_NOTHING:
        return request_id, {INVALID_PARAMS}  # by position: A2A's are by name ([]: none)
    return request_id, None


def _json_text(body: bytes) -> bool | None:
    """Whether ``body`` is JSON text as RFC 8259 has it: UTF-8; no ``NaN``, ``Infinity``
    or number past a double's range; no lone surrogate. ``None``: too deep to tell."""
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_reject, parse_float=_finite)
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # a lone surrogate raises
    except ValueError:  # UnicodeError and JSONDecodeError included
        return False
    except RecursionError:
        return None
    return True


def _finite(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"{text} is out of range")
    return number


def test_the_hub_serves_on_after_the_jsonrpc_fuzzing(a2a_hub: FuzzHub) -> None:
    assert_serving(a2a_hub.url)


# Envelopes: what is wrong, and the code it must get.
_not_json = st.one_of(
    st.binary(max_size=60).filter(lambda raw: not _parses(raw)),
    st.builds(lambda value, cut: json.dumps(value)[:cut], wild, st.integers(1, 30))
    .map(str.encode)
    .filter(lambda raw: not _parses(raw)),
    st.just(b"[" * 5000),
    st.sampled_from(
        [
            b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": NaN}}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": 1e999}}',
            b'{"jsonrpc": "2.0", "id": "\\udc00", "method": "GetTask", "params": {}}',
        ]
    ),
)


def _parses(raw: bytes) -> bool:
    return _json_text(raw) is not False


def _reject(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


_not_an_object = st.one_of(
    st.lists(wild, max_size=3), st.none(), st.integers(), st.text(max_size=10)
)
_bad_envelopes = st.one_of(
    st.fixed_dictionaries(
        {"jsonrpc": st.sampled_from(["1.0", "2", 2.0, None, ""]), "method": st.just("GetTask")},
        optional={"id": jsonrpc_ids},
    ),
    st.fixed_dictionaries(
        {
            "jsonrpc": st.just("2.0"),
            "method": st.none()
            | st.integers()
            | st.booleans()
            | st.lists(st.sampled_from(["SendMessage", "message/stream"]) | wild, max_size=2)
            | st.dictionaries(st.text(max_size=6), st.just("SendMessage") | wild, max_size=2),
        },
        optional={"id": jsonrpc_ids},
    ),
    st.fixed_dictionaries(
        {
            "jsonrpc": st.just("2.0"),
            "method": st.just("GetTask"),
            "id": st.booleans()
            | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != int(f))
            | st.lists(st.integers(), max_size=2)
            | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        }
    ),
    st.fixed_dictionaries({"id": jsonrpc_ids, "params": wild}),  # no jsonrpc, no method
)
_KNOWN = set(METHODS_1_0) | set(METHODS_0_3)
_unknown_methods = st.text(min_size=1, max_size=30).filter(lambda name: name not in _KNOWN)
"""Names of no method (an empty name is taken as a missing one: -32600, the SDK's reading)."""


@seed(SEED)
@fuzz_settings(scale=3)
@given(
    kind=st.sampled_from(["not JSON", "not an object", "bad envelope", "unknown method"]),
    data=st.data(),
    version=st.sampled_from(["1.0", "0.3", None]) | GARBAGE_VERSIONS,
)
def test_broken_envelopes_get_the_specs_codes(
    a2a_hub: FuzzHub, kind: str, data: st.DataObject, version: str | None
) -> None:
    request_id: Any = ...
    if kind == "not JSON":
        body, code, request_id = data.draw(_not_json, label="body"), PARSE_ERROR, None
    elif kind == "not an object":
        body, code = json.dumps(data.draw(_not_an_object, label="body")).encode(), INVALID_REQUEST
        request_id = None
    elif kind == "bad envelope":
        body, code = json.dumps(data.draw(_bad_envelopes, label="body")).encode(), INVALID_REQUEST
    else:
        request_id = data.draw(jsonrpc_ids, label="id")
        method = data.draw(_unknown_methods, label="method")
        envelope = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}}
        body, code = json.dumps(envelope).encode(), METHOD_NOT_FOUND
    if _json_text(body) is False:  # a lone surrogate drawn in: not JSON text at all
        code, request_id = PARSE_ERROR, None
    persona = data.draw(st.sampled_from(["socrates", "science-panel", ""]), label="persona")
    headers = {"content-type": "application/json"}
    if version is not None:
        headers["A2A-Version"] = version
    with TALLY.case("JSON-RPC", f"envelope: {kind}") as counted:
        answer = _post(a2a_hub, persona, body, headers)
        counted.status = answer.status
        check_jsonrpc_answer(answer, request_id, {code})


@pytest.mark.parametrize("method", [["SendMessage"], {"name": "SendMessage"}])
def test_a_method_that_is_a_list_is_an_invalid_request(a2a_hub: FuzzHub, method: Any) -> None:
    envelope = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}
    headers = {"content-type": "application/json", "A2A-Version": "1.0"}
    answer = _post(a2a_hub, "socrates", json.dumps(envelope).encode(), headers)
    # The id could be read: it is echoed (JSON-RPC 2.0: null only when it could not be).
    check_jsonrpc_answer(answer, 1, {INVALID_REQUEST})
