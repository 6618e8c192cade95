"""A2A HTTP+JSON fuzzed with Hypothesis: every route of a persona, 1.0 and 0.3.

Requests go through real HTTP to the real hub of ``test_a2a_jsonrpc.py`` (the fake LLM
answering): ``message:send``, ``message:stream``, ``tasks``, ``tasks/{id}``, ``:cancel``,
``:subscribe``, ``pushNotificationConfigs`` (create, list, get, delete), the extended card,
the 1.0 routes under a tenant, the SDK's 0.3 routes under ``v1/``, the card and the avatar.
Path ids are the hub's tasks and configs or anything (encoded slashes, dot segments, very
long); bodies are each route's own with fields mostly valid and sometimes anything; the
``A2A-Version`` header is 1.0, 0.3, absent or garbage; the body is labelled JSON, or not.

Every answer must come whole within :data:`~tests.fuzz.budget.DEADLINE` (streams to their
end), never be a 5xx; an error is JSON that says what went wrong (or the framework's plain
404/405 for a path no route has); a stream is events of JSON; an unknown persona is a 404;
a body not labelled JSON is a 415. Afterwards the hub serves ``/healthz`` and a persona
still answers.

Examples per route: ``PERSONA_AGENT_FUZZ_EXAMPLES`` (default 20); seed
``PERSONA_AGENT_FUZZ_SEED``.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

import httpx
import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

from tests.fuzz.a2a_checks import check_http_json_answer
from tests.fuzz.a2a_routes import ROUTES, Route, Targets, segments
from tests.fuzz.a2a_values import push_urls, task_ids, texts, wild
from tests.fuzz.budget import SEED, fuzz_settings
from tests.fuzz.conftest import Pool
from tests.fuzz.hub import FuzzHub, assert_serving
from tests.fuzz.tally import TALLY
from tests.fuzz.wire import send

PERSONAS = st.sampled_from(["socrates", "socrates", "socrates", "science-panel", "no-such-one"])
VERSIONS = st.sampled_from(["1.0", "0.3", None]) | st.text(
    st.characters(min_codepoint=33, max_codepoint=126), max_size=8
)
JSON_LABELS = ["application/json", "application/json", "application/a2a+json"]
OTHER_LABELS = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]


def _targets(pool: Pool) -> Targets:
    return Targets(
        task_ids=st.sampled_from(pool.task_ids) | task_ids,
        config_ids=st.sampled_from(pool.config_ids) | texts,
        urls=st.one_of(st.just(pool.webhook_url), push_urls, push_urls),
    )


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: route.name)
def test_each_route_with_random_requests(a2a_hub: FuzzHub, pool: Pool, route: Route) -> None:
    targets = _targets(pool)
    body = route.body(targets) if route.body is not None else st.none()
    query = route.query(targets) if route.query is not None else st.just({})

    @seed(SEED)
    @fuzz_settings()
    @given(
        persona=PERSONAS,
        task=segments(targets.task_ids),
        config=segments(targets.config_ids),
        tenant=segments(texts),
        version=VERSIONS,
        values=st.one_of(body, body, body, wild),
        params=query,
        label=st.sampled_from([*JSON_LABELS, None, *OTHER_LABELS]),
    )
    def run(**drawn: Any) -> None:
        with TALLY.case("HTTP+JSON", route.name) as counted:
            answer, labelled = _request(a2a_hub, route, drawn)
            counted.status = answer.status
            check_http_json_answer(answer)
            if drawn["persona"] == "no-such-one":
                assert answer.status == 404, answer.shown()
                assert answer.json()["error"]["code"] == "persona_not_found", answer.shown()
            elif not labelled:
                assert answer.status == 415, answer.shown()

    run()


def _request(hub: FuzzHub, route: Route, drawn: dict[str, Any]) -> tuple[Any, bool]:
    """Send the drawn request; whether its body (if any) was labelled JSON."""
    path = (
        route.path.replace("{task}", drawn["task"])
        .replace("{config}", drawn["config"])
        .replace("{tenant}", drawn["tenant"])
    )
    headers: dict[str, str] = {}
    if drawn["version"] is not None:
        headers["A2A-Version"] = drawn["version"]
    content = None
    labelled = True
    if route.method in ("POST", "PUT") and (route.body is not None or drawn["values"] is not None):
        content = json.dumps(drawn["values"]).encode("utf-8", "surrogatepass")
        if drawn["label"] is not None:
            headers["content-type"] = drawn["label"]
        labelled = drawn["label"] in JSON_LABELS
    url = f"{hub.url}/a2a/{drawn['persona']}/{path}"
    if drawn["params"]:  # encoded here: a lone surrogate becomes its bytes, not an error
        query = {k: str(v).encode("utf-8", "surrogatepass") for k, v in drawn["params"].items()}
        url = f"{url}?{urllib.parse.urlencode(query)}"
    with httpx.Client() as client:
        answer = send(client, route.method, url, content=content, headers=headers)
    return answer, labelled


def test_the_hub_serves_on_after_the_http_json_fuzzing(a2a_hub: FuzzHub) -> None:
    assert_serving(a2a_hub.url)
