"""The answers the REST fuzzer found undeclared in the hub's OpenAPI document, reproduced.

Each case of ``openapi_gaps.KNOWN_GAPS`` is a strict xfail: it sends the request that gets
the undeclared answer, checks the hub still gives it, and runs on it the Schemathesis
checks the fuzzer waives for it, which fail (``UndeclaredAnswer``) while the answer is not
as documented. Once the document (or the answer) is fixed the test passes, and being
strict fails the run: move the entry to ``FIXED_GAPS``, and the fuzzer checks that answer
again. Each case of ``FIXED_GAPS`` runs as a plain test: the same request, whose answer now
passes the checks it once failed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from schemathesis.core.failures import FailureGroup

from tests.fakes.fake_llm import FakeLLM
from tests.fuzz.budget import DEADLINE
from tests.fuzz.hub import FuzzHub, running_hub
from tests.fuzz.openapi_gaps import ADMIN_KEY, FIXED_GAPS, KNOWN_GAPS, Gap


class UndeclaredAnswer(AssertionError):
    """The hub gave an answer its OpenAPI document does not declare."""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, fuzz_llm: FakeLLM) -> Iterator[FuzzHub]:
    keys = json.dumps([{"name": "admin", "key": ADMIN_KEY}])
    root = tmp_path_factory.mktemp("declarations")
    with running_hub(root, fuzz_llm.base_url, api_keys=keys) as running:
        yield running


@pytest.mark.parametrize(
    "gap",
    [
        pytest.param(
            gap,
            id=f"{gap.method} {gap.path} {gap.status}",
            marks=pytest.mark.xfail(strict=True, raises=UndeclaredAnswer, reason=gap.bug),
        )
        for gap in KNOWN_GAPS
    ]
    + [pytest.param(gap, id=f"{gap.method} {gap.path} {gap.status} (fixed)") for gap in FIXED_GAPS],
)
def test_the_document_declares_the_answer(hub: FuzzHub, gap: Gap) -> None:
    response = httpx.request(
        gap.method,
        f"{hub.url}{gap.request_path}",
        content=gap.content,
        headers=dict(gap.headers),
        timeout=DEADLINE,
    )
    assert response.status_code == gap.status, (
        f"the hub no longer answers {gap.status} ({response.status_code} {response.text[:200]}):"
        " remove this entry from openapi_gaps.KNOWN_GAPS"
    )
    assert gap.applies(gap.method, gap.path, response.status_code, response.content), response.text
    schema = schemathesis.openapi.from_url(f"{hub.url}/openapi.json")
    template = {name: "socrates" for name in re.findall(r"{(\w+)}", gap.path)}
    case = schema[gap.path][gap.method].Case(path_parameters=template)
    try:
        case.validate_response(response, checks=list(gap.waives))
    except FailureGroup as failures:
        raise UndeclaredAnswer(str(failures)) from None
