"""The REST API fuzzed from its own OpenAPI document with Schemathesis.

Every operation the hub's ``/openapi.json`` lists (``/api/v1`` and the discovery and
operations routes) is fuzzed on two real hubs (uvicorn on 127.0.0.1, the fake LLM, a
temporary copy of the personas: the fuzzers create, replace and delete them): one open
(no keys, loopback: reads open, writes accepted from here), one with API keys, where each
case is sent as one of several callers (a key with every scope, a key limited to one
persona, a read-only key, a wrong key, none). Cases are Schemathesis's positive and
negative data (path ids half the time a persona's real id), and each answer must be:

- no server error (``not_a_server_error``), within :data:`~tests.fuzz.budget.DEADLINE`;
- as documented: a declared status code, content type, headers and body schema
  (the declarations the hub gets wrong are listed in ``openapi_gaps.py``, each with a
  strict xfail test that fails once the document is fixed);
- for negative data, a 4xx (``negative_data_rejection``).

After each operation ``/healthz`` answers within a second; after the run a persona still
answers a message through the real a2a-sdk client. Examples per operation:
``PERSONA_AGENT_FUZZ_EXAMPLES`` (default 20); seed ``PERSONA_AGENT_FUZZ_SEED``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import assume, given, seed
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.fakes.fake_llm import FakeLLM
from tests.fuzz.budget import DEADLINE, SEED, fuzz_settings
from tests.fuzz.hub import SENTINEL, FuzzHub, assert_healthy, assert_serving, running_hub
from tests.fuzz.openapi_gaps import ADMIN_KEY, KNOWN_GAPS
from tests.fuzz.persona_bodies import KNOWN_IDS, persona_bodies, persona_ids
from tests.fuzz.tally import TALLY

OPERATIONS = [
    ("GET", "/.well-known/agent.json"),
    ("GET", "/.well-known/agent-card.json"),
    ("GET", "/a2a/personas"),
    ("GET", "/.well-known/jwks.json"),
    ("GET", "/.well-known/ai-catalog.json"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/api/v1/personas"),
    ("GET", "/api/v1/personas/{persona_id}"),
    ("GET", "/api/v1/personas/{persona_id}/file"),
    ("GET", "/api/v1/personas/{persona_id}/card"),
    ("GET", "/api/v1/personas/{persona_id}/usage"),
    ("GET", "/api/v1/personas/{persona_id}/documents"),
    ("POST", "/api/v1/personas/validate"),
    ("POST", "/api/v1/personas"),
    ("POST", "/api/v1/personas/upload"),
    ("PUT", "/api/v1/personas/{persona_id}"),
    ("PUT", "/api/v1/personas/{persona_id}/file"),
    ("GET", "/api/v1/memory"),
    ("GET", "/api/v1/personas/{persona_id}/memories"),
    ("GET", "/api/v1/personas/{persona_id}/memories/search"),
    ("GET", "/api/v1/personas/{persona_id}/memories/export"),
    ("GET", "/api/v1/personas/{persona_id}/memories/{memory_id}"),
    ("PATCH", "/api/v1/personas/{persona_id}/memories/{memory_id}"),
    ("DELETE", "/api/v1/personas/{persona_id}/memories/{memory_id}"),
    ("GET", "/api/v1/personas/{persona_id}/conversation-documents"),
    ("DELETE", "/api/v1/personas/{persona_id}/conversation-documents/{document_id}"),
    ("DELETE", "/api/v1/memories"),
    ("GET", "/api/v1/user-persona"),
    ("PUT", "/api/v1/user-persona"),
    ("DELETE", "/api/v1/user-persona"),
    ("GET", "/api/v1/conversations/{persona_id}/{context_id}/user"),
    ("PUT", "/api/v1/conversations/{persona_id}/{context_id}/user"),
    ("DELETE", "/api/v1/conversations/{persona_id}/{context_id}/user"),
    ("GET", "/api/v1/conversations"),
    ("POST", "/api/v1/conversations"),
    ("GET", "/api/v1/conversations/{persona_id}/{context_id}"),
    ("DELETE", "/api/v1/conversations/{persona_id}/{context_id}"),
    ("GET", "/api/v1/conversations/{persona_id}/{context_id}/media/{sha256}"),
    ("PATCH", "/api/v1/conversations/{persona_id}/{context_id}/messages/{message_id}"),
    ("DELETE", "/api/v1/conversations/{persona_id}/{context_id}/messages/{message_id}"),
    ("GET", "/api/v1/conversations/{persona_id}/{context_id}/messages/{message_id}/prompt"),
    ("GET", "/api/v1/conversations/{persona_id}/{context_id}/prompt"),
    ("PUT", "/api/v1/conversations/{persona_id}/{context_id}/swipes/{anchor}"),
    ("POST", "/api/v1/conversations/{persona_id}/{context_id}/fork"),
    ("POST", "/api/v1/conversations/{persona_id}/{context_id}/regenerate"),
    ("POST", "/api/v1/conversations/{persona_id}/{context_id}/continue"),
    ("GET", "/api/v1/conversations/{persona_id}/{context_id}/export"),
    ("POST", "/api/v1/conversations/import"),
    ("POST", "/api/v1/personas/{persona_id}/documents"),
    ("DELETE", "/api/v1/personas/{persona_id}/documents/{document_id}"),
    ("DELETE", "/api/v1/personas/{persona_id}"),
]
"""Every operation of the hub's OpenAPI document (a test checks that none is missing); reads
first and deletes last, so that the reads find the bundled personas still there."""


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
# positive_data_acceptance is not among them: the persona model checks more than JSON
# Schema can say (non-blank text, distinct domain slugs), so schema-valid bodies may get
# the documented 422.


@dataclass(frozen=True)
class Caller:
    name: str
    headers: dict[str, str]


SOCRATES_KEY = "fuzz-socrates-key-0123456789"
READER_KEY = "fuzz-reader-key-0123456789"
API_KEYS = [
    {"name": "admin", "key": ADMIN_KEY},
    {"name": "socrates-only", "key": SOCRATES_KEY, "personas": ["socrates"]},
    {"name": "reader", "key": READER_KEY, "scopes": ["personas:read"]},
]
OPEN_CALLERS = [
    # Keyless uploads need a header no HTML form can send (docs/security.md).
    Caller("anonymous", {"X-Requested-With": "fuzz"}),
]
KEYED_CALLERS = [
    Caller("admin", {"X-API-Key": ADMIN_KEY}),
    Caller("socrates-only", {"Authorization": f"Bearer {SOCRATES_KEY}"}),
    Caller("reader", {"X-API-Key": READER_KEY}),
    Caller("wrong key", {"X-API-Key": "fuzz-not-a-key-0123456789"}),
    Caller("no credential", {}),
]


@pytest.fixture(scope="module")
def open_hub(tmp_path_factory: pytest.TempPathFactory, fuzz_llm: FakeLLM) -> Iterator[FuzzHub]:
    with running_hub(tmp_path_factory.mktemp("rest-open"), fuzz_llm.base_url) as hub:
        yield hub


@pytest.fixture(scope="module")
def keyed_hub(tmp_path_factory: pytest.TempPathFactory, fuzz_llm: FakeLLM) -> Iterator[FuzzHub]:
    root = tmp_path_factory.mktemp("rest-keys")
    with running_hub(root, fuzz_llm.base_url, api_keys=json.dumps(API_KEYS)) as hub:
        yield hub


def _schema(hub: FuzzHub) -> Any:
    return schemathesis.openapi.from_url(f"{hub.url}/openapi.json")


@pytest.fixture(scope="module")
def open_schema(open_hub: FuzzHub) -> Any:
    return _schema(open_hub)


@pytest.fixture(scope="module")
def keyed_schema(keyed_hub: FuzzHub) -> Any:
    return _schema(keyed_hub)


def test_every_operation_of_the_document_is_fuzzed(open_hub: FuzzHub) -> None:
    document = httpx.get(f"{open_hub.url}/openapi.json", timeout=DEADLINE).json()
    listed = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}
    assert listed == set(OPERATIONS)


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_the_open_rest_api(open_hub: FuzzHub, open_schema: Any, method: str, path: str) -> None:
    fuzz(open_schema[path][method], open_hub.url, OPEN_CALLERS, suite="REST open")


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_the_rest_api_with_keys(
    keyed_hub: FuzzHub, keyed_schema: Any, method: str, path: str
) -> None:
    fuzz(keyed_schema[path][method], keyed_hub.url, KEYED_CALLERS, suite="REST keys")


def test_the_hubs_serve_on_after_the_fuzzing(open_hub: FuzzHub, keyed_hub: FuzzHub) -> None:
    assert_serving(open_hub.url)
    assert_serving(keyed_hub.url)


def fuzz(operation: Any, url: str, callers: list[Caller], *, suite: str) -> None:
    """Send the operation's Schemathesis cases, each as one of ``callers``, and check each
    answer (module docstring); then ``/healthz`` must answer within a second."""
    method, path = operation.method.upper(), operation.path
    modes = [GenerationMode.POSITIVE]
    if _has_inputs(operation):
        modes.append(GenerationMode.NEGATIVE)
    session = requests.Session()

    @seed(SEED)
    @fuzz_settings()
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        caller = data.draw(st.sampled_from(callers), label="caller")
        mode = data.draw(st.sampled_from(modes), label="mode")
        case = data.draw(_cases(operation, mode, data), label="case")
        assume(not _names_sentinel(case))
        with TALLY.case(suite, f"{method} {path}") as counted:
            response = _call(case, url, session, caller)
            counted.status = response.status_code
            waived = [
                check
                for gap in KNOWN_GAPS
                if gap.applies(method, path, response.status_code, response.content)
                for check in gap.waives
            ]
            if _form_negation(case):
                waived.append(negative_data_rejection)
            checks = [check for check in CHECKS if check not in waived]
            case.validate_response(
                response,
                checks=checks,
                headers=dict(caller.headers),
                transport_kwargs={
                    "base_url": url,
                    "session": session,
                    "headers": dict(caller.headers),
                },
            )

    try:
        run()
    finally:
        session.close()
    assert_healthy(url)


def _cases(operation: Any, mode: GenerationMode, data: st.DataObject) -> Any:
    """Schemathesis's cases of the operation; for positive data, half the time with a
    bundled persona's id in the path and (create, replace) a valid persona as the body."""
    method, path = operation.method.upper(), operation.path
    if mode is GenerationMode.NEGATIVE or not data.draw(st.booleans(), label="aimed"):
        return operation.as_strategy(generation_mode=mode)
    fixed: dict[str, Any] = {}
    if "{persona_id}" in path:
        fixed["persona_id"] = data.draw(st.sampled_from(KNOWN_IDS), label="persona_id")
    if (method, path) in (("POST", "/api/v1/personas"), ("PUT", "/api/v1/personas/{persona_id}")):
        body = data.draw(persona_bodies, label="persona")
        if method == "POST":
            body["id"] = data.draw(persona_ids, label="id")
        return operation.as_strategy(path_parameters=fixed, body=body)
    return operation.as_strategy(path_parameters=fixed)


def _call(case: Any, url: str, session: requests.Session, caller: Caller) -> Any:
    start = time.monotonic()
    try:
        response = case.call(
            # A copy: Schemathesis adds its own headers to the mapping it is given.
            base_url=url,
            session=session,
            headers=dict(caller.headers),
            timeout=DEADLINE,
        )
    except requests.Timeout:
        raise AssertionError(
            f"{case.method} {case.formatted_path}: no answer within {DEADLINE} s"
        ) from None
    elapsed = time.monotonic() - start
    assert elapsed <= DEADLINE, (
        f"{case.method} {case.formatted_path}: answered after {elapsed:.1f} s"
    )
    return response


def _form_negation(case: Any) -> bool:
    """Whether the case's wrong values are in a multipart form's fields (and, besides them,
    at most unknown query parameters, which Schemathesis itself lets an API ignore). A
    form carries text: a value of the wrong JSON type (``null``, an object where a file
    goes) reaches the hub as valid form text, so accepting it is no bug
    (``negative_data_rejection`` says it is; the other checks still apply)."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_negative:
        return False
    if not (case.media_type or "").startswith("multipart/form-data"):
        return False
    data = meta.phase.data
    if not data.mutations:
        return bool(data.parameter_location == ParameterLocation.BODY)
    in_form = [m.parameter_location == ParameterLocation.BODY for m in data.mutations]
    unknown = [m.keywords == ("additionalProperties",) for m in data.mutations]
    return any(in_form) and all(a or b for a, b in zip(in_form, unknown, strict=True))


def _has_inputs(operation: Any) -> bool:
    """Whether the operation takes anything Schemathesis can make invalid."""
    definition = operation.definition.raw
    return bool(definition.get("parameters") or definition.get("requestBody"))


def _names_sentinel(case: Any) -> bool:
    """Whether the case names the sentinel persona (which must outlive the fuzzing)."""
    values = [*(case.path_parameters or {}).values(), *(case.query or {}).values()]
    return any(isinstance(value, str) and SENTINEL in value for value in values)
