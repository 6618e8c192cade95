"""The answers the REST fuzzer found undeclared in the hub's OpenAPI document, reproduced.

Each case of ``openapi_gaps.KNOWN_GAPS`` is a strict xfail: it sends the request that gets
the undeclared answer, checks the hub still gives it, and fails (``UndeclaredAnswer``)
while the document does not declare it. Once the document is fixed the test passes, and
being strict fails the run: remove the entry, and the fuzzer checks that answer again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.fake_llm import FakeLLM
from tests.fuzz.budget import DEADLINE
from tests.fuzz.hub import FuzzHub, running_hub
from tests.fuzz.openapi_gaps import ADMIN_KEY, KNOWN_GAPS, Gap


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
    ],
)
def test_the_document_declares_the_answer(hub: FuzzHub, gap: Gap) -> None:
    response = httpx.request(
        gap.method,
        f"{hub.url}{gap.request_path}",
        content=gap.content,
        headers=dict(gap.headers),
        timeout=DEADLINE,
    )
    media = response.headers.get("content-type", "").split(";")[0].strip()
    assert response.status_code == gap.status, (
        f"the hub no longer answers {gap.status} ({response.status_code} {response.text[:200]}):"
        " remove this entry from openapi_gaps.KNOWN_GAPS"
    )
    document: dict[str, Any] = httpx.get(f"{hub.url}/openapi.json", timeout=DEADLINE).json()
    responses = document["paths"][gap.path][gap.method.lower()]["responses"]
    declared = responses.get(str(gap.status))
    if declared is None:
        raise UndeclaredAnswer(f"{gap.status} is not declared (only {sorted(responses)})")
    if gap.media_type is not None:
        assert media == gap.media_type, f"the hub now answers {media}: update the entry"
        if media not in declared.get("content", {}):
            raise UndeclaredAnswer(f"{media} is not declared (only {list(declared['content'])})")
