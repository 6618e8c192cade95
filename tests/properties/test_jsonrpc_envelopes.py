"""Properties of the JSON-RPC endpoint: any body gets a well-formed answer, never a 5xx.

A real hub runs under uvicorn in a thread (hypothesis drives synchronous tests),
with the scripted fake LLM; bodies are arbitrary bytes, arbitrary JSON, and
envelopes that are almost right.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BUNDLED = Path(__file__).resolve().parents[2] / "personas"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))

# JSON-RPC 2.0's codes, and A2A's (-32001 .. -32009): never -32603 (internal) for input.
SPEC_CODES = {-32700, -32600, -32601, -32602, *range(-32009, -32000)}
METHODS_1_0 = ["SendMessage", "GetTask", "ListTasks", "CancelTask", "GetExtendedAgentCard"]
METHODS_0_3 = ["message/send", "tasks/get", "tasks/cancel", "agent/getAuthenticatedExtendedCard"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
ids = st.none() | st.integers(-(2**31), 2**31) | st.text(max_size=12)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2.0, None]),
        "id": ids | json_values,
        "method": st.sampled_from(METHODS_1_0 + METHODS_0_3) | st.text(max_size=20),
        "params": json_values,
    },
)
bodies = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda value: json.dumps(value).encode()),
    envelopes.map(lambda value: json.dumps(value).encode()),
)


def check_answer(response: httpx.Response, body: bytes) -> None:
    assert response.status_code < 500, (body, response.status_code, response.text)
    answer: Any = response.json()
    assert isinstance(answer, dict), answer
    assert answer.get("jsonrpc") == "2.0", answer
    assert ("result" in answer) != ("error" in answer), answer
    if "error" in answer:
        assert answer["error"]["code"] in SPEC_CODES, (body, answer)
        assert isinstance(answer["error"]["message"], str)
        assert answer["error"]["message"]


@SETTINGS
@given(body=bodies, version=st.sampled_from(["1.0", None]))
def test_any_body_gets_a_well_formed_answer(hub_url: str, body: bytes, version: str | None) -> None:
    headers = {"content-type": "application/json"}
    if version:
        headers["A2A-Version"] = version
    response = httpx.post(f"{hub_url}/a2a/socrates/", content=body, headers=headers, timeout=30)
    check_answer(response, body)


@SETTINGS
@given(request_id=ids.filter(lambda value: value is not None), method=st.text(max_size=20))
def test_an_unknown_method_is_method_not_found_with_the_request_id(
    hub_url: str, request_id: int | str, method: str
) -> None:
    if method in METHODS_1_0:
        return
    body: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": f"x-{method}",
        "params": {},
    }
    response = httpx.post(
        f"{hub_url}/a2a/socrates/", json=body, headers={"A2A-Version": "1.0"}, timeout=30
    )
    check_answer(response, json.dumps(body).encode())
    answer = response.json()
    assert answer["error"]["code"] == -32601
    assert answer["id"] == request_id


def test_the_hub_still_answers_after_the_storm(hub_url: str) -> None:
    card = httpx.get(f"{hub_url}/a2a/socrates/.well-known/agent-card.json", timeout=30)
    assert card.status_code == 200
    assert card.json()["name"] == "Socrates"
