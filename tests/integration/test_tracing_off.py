"""``persona-agent serve`` makes no spans unless an exporter is configured, and with the SDK's
tracing off still answers in full (a real process: the SDK reads the setting once, at import)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest

from tests.fakes.fake_llm import FakeLLM, Reply
from tests.servers.hub_process import hub_process

TRACING = "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"


def test_a_hub_with_tracing_off_answers_blocking_and_streaming_sends(
    tmp_path: Path, personas_dir: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRACING, "false")
    llm.script(Reply("Know thyself."), Reply("Twice."))
    settings = {"LLM_BASE_URL": llm.base_url, "LLM_API_KEY": "test", "LLM_MAX_RETRIES": "0"}
    with hub_process(personas_dir, tmp_path / "data", **settings) as (url, _):
        endpoint = f"{url}/a2a/socrates/"
        headers = {"A2A-Version": "1.0"}

        def body(method: str, params: dict[str, object]) -> dict[str, object]:
            return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}

        def message() -> dict[str, object]:
            return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "Hi"}]}

        sent = httpx.post(
            endpoint, json=body("SendMessage", {"message": message()}), headers=headers, timeout=30
        ).json()["result"]["task"]
        assert sent["status"]["state"] == "TASK_STATE_COMPLETED"
        assert sent["artifacts"][0]["parts"][0]["text"] == "Know thyself."
        got = httpx.post(
            endpoint, json=body("GetTask", {"id": sent["id"]}), headers=headers, timeout=30
        ).json()["result"]
        assert got["status"]["state"] == "TASK_STATE_COMPLETED"

        events: list[dict[str, object]] = []
        streamed = body("SendStreamingMessage", {"message": message()})
        with httpx.stream("POST", endpoint, json=streamed, headers=headers, timeout=30) as reply:
            for line in reply.iter_lines():
                if line.startswith("data:"):
                    events.append(json.loads(line[5:])["result"])
        text = "".join(
            part.get("text", "")
            for event in events
            if "artifactUpdate" in event
            for part in event["artifactUpdate"]["artifact"]["parts"]  # type: ignore[index]
        )
        assert text == "Twice."
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"  # type: ignore[index]


@pytest.mark.parametrize(
    ("environment", "off"),
    [
        ({}, True),  # the default: no exporter, no spans
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, False),
        ({"OTEL_TRACES_EXPORTER": "console"}, False),
        ({TRACING: "true"}, False),  # the SDK's own switch wins
    ],
)
def test_serve_makes_no_spans_unless_an_exporter_is_configured(
    tmp_path: Path,
    personas_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    environment: dict[str, str],
    off: bool,
) -> None:
    for name in [TRACING, "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT"]:
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    offline = {"LLM_BASE_URL": "http://127.0.0.1:9/v1", "LLM_API_KEY": "unused"}
    with hub_process(personas_dir, tmp_path / "data", LOG_LEVEL="debug", **offline) as (_, process):
        process.terminate()
        log = process.communicate(timeout=30)[0]
    # The SDK says so at import, at DEBUG, when its switch turned it off.
    assert ("A2A OTEL instrumentation disabled" in log) is off
