"""The fuzz suite: the hub attacked with generated requests, as part of every test run.

- ``test_rest_api.py``: the REST API from its own OpenAPI document (Schemathesis), on a hub
  without keys and one with API keys, as several callers; ``test_openapi_declarations.py``
  holds the answers the document is known to get wrong (strict xfails).
- ``test_a2a_jsonrpc.py``, ``test_a2a_http_json.py``: A2A requests made with Hypothesis,
  every method and route of 1.0 and 0.3, envelopes and bodies valid and broken.

Every answer: no 5xx, within ``budget.DEADLINE`` (streams to their end), as the
specification or the document says; afterwards the hub serves ``/healthz`` and a persona
answers. The counts (cases, failures, status codes per operation) and the seed are
printed at the end of the run (``conftest.pytest_terminal_summary``).

``PERSONA_AGENT_FUZZ_EXAMPLES`` (default 20) sets the examples per test, about a minute for
the suite on two cores; ``PERSONA_AGENT_FUZZ_SEED`` (default 32) the seed, fixed so a run is
reproduced case for case; ``PERSONA_AGENT_FUZZ_EXAMPLES=200 uv run pytest tests/fuzz`` hunts
longer (docs/security.md#fuzzing).
"""
