"""Content types (A2A 1.0.1 section 5.4): a part the persona cannot take, and an answer the
client cannot take, are ContentTypeNotSupportedError on every binding and version, sent
or streamed: JSON-RPC -32005, HTTP+JSON 400 with the reason CONTENT_TYPE_NOT_SUPPORTED.

1.0.0's table gave HTTP 415; 1.0.1 (a2aproject/A2A#1627) aligned the HTTP statuses with
``google.rpc.Code`` (INVALID_ARGUMENT is 400), and the SDK the hub pins answers so. 415
stays the answer to what RFC 9110 means by it, a body whose ``Content-Type`` the endpoint
does not read (tests/conformance/test_bad_requests.py).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conformance.conftest import MODULE_LOOP, SPEC_ERRORS, Wire, file_part, text_part
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import TRANSPORTS, Hub

pytestmark = MODULE_LOOP

SVG = file_part(b'<svg xmlns="http://www.w3.org/2000/svg"/>', "image/svg+xml", "dot.svg")


async def _send(
    wire: Wire, parts: list[dict[str, Any]], accepted: list[str] | None, *, stream: bool
) -> httpx.Response:
    """A send (or stream) of ``parts``, with ``acceptedOutputModes`` when given."""
    params: dict[str, Any] = {"message": wire._message(parts, None, None)}
    if accepted is not None:
        params["configuration"] = {"acceptedOutputModes": accepted}
    if stream:
        method, path = "SendStreamingMessage", "/message:stream"
    else:
        method, path = "SendMessage", "/message:send"
    return await wire._call(method, params, "POST", path, body=params)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_streamed_part_of_a_type_the_persona_does_not_read_is_refused(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    # (a send: tests/conformance/test_errors.py)
    wire = Wire(module_hub.http, "socrates", transport)
    error = wire.error(await _send(wire, [text_part("Look"), SVG], None, stream=True))
    assert error.matches(wire.binding, SPEC_ERRORS["ContentTypeNotSupported"]), error
    assert "image/svg+xml" in error.message
    assert llm.requests == []


@pytest.mark.parametrize("stream", [False, True], ids=["send", "stream"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_answer_the_client_cannot_take_is_refused_before_a_task(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str], stream: bool
) -> None:
    wire = Wire(module_hub.http, "socrates", transport)
    accepted = ["image/png", "video/*"]
    error = wire.error(await _send(wire, [text_part("Hi")], accepted, stream=stream))
    assert error.matches(wire.binding, SPEC_ERRORS["ContentTypeNotSupported"]), error
    assert "image/png, video/*" in error.message
    assert "text/plain" in error.message  # what the persona does answer in
    assert llm.requests == []


@pytest.mark.parametrize(
    "accepted",
    [
        ["text/plain"],
        ["TEXT/Plain; charset=utf-8"],
        ["image/png", "application/json"],
        ["text/*"],
        ["*/*"],
        ["text"],  # not a media type (early A2A samples): nothing the hub can check
        [],
    ],
)
async def test_an_answer_the_client_takes_is_given(
    module_hub: Hub, llm: FakeLLM, accepted: list[str]
) -> None:
    llm.script(Reply("Gladly."))
    wire = Wire(module_hub.http, "socrates", ("JSONRPC", "1.0"))
    task = wire.task(await _send(wire, [text_part("Hi")], accepted, stream=False))
    assert wire.state(task) == "TASK_STATE_COMPLETED"
    assert "Gladly." in str(task["artifacts"])
