"""Without API keys, no web page open in a local browser can write to the hub: a real
``persona-agent serve`` answered as a browser's requests would reach it (cross-origin
form posts, DNS rebinding), and A2A endpoints take only bodies labelled JSON."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.personas import BUNDLED, persona_data
from tests.security import OFFLINE_LLM
from tests.servers.hub_process import hub_process

API = "/api/v1/personas"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One hub process for the module's tests (a process takes seconds to start): each
    writes personas of its own ids, or checks that a write changed nothing."""
    root = tmp_path_factory.mktemp("browser-writes")
    shutil.copytree(BUNDLED, root / "personas")
    with hub_process(root / "personas", root / "data", **OFFLINE_LLM) as (url, _):
        yield url


def socrates_name(url: str) -> str:
    return str(httpx.get(f"{url}{API}/socrates").json()["name"])


def body(persona_id: str) -> dict[str, object]:
    return {"id": persona_id, **persona_data(name=persona_id.title())}


def exists(url: str, persona_id: str) -> bool:
    return httpx.get(f"{url}{API}/{persona_id}").status_code == 200


def test_loopback_writes_of_json_from_the_hubs_own_origin_are_accepted(hub: str) -> None:
    assert httpx.post(f"{hub}{API}", json=body("plain")).status_code == 201
    same_origin = {"Origin": hub}
    assert httpx.post(f"{hub}{API}", json=body("page"), headers=same_origin).status_code == 201
    assert httpx.delete(f"{hub}{API}/page", headers=same_origin).status_code == 204


HOST_REFUSED = ("is not a name of this machine", "PERSONA_AGENT_API_KEYS")
ORIGIN_REFUSED = ("refused from the origin", "PERSONA_AGENT_CORS_ORIGINS")


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"Host": "attacker.example:8000"}, HOST_REFUSED),  # DNS rebinding
        ({"Origin": "http://attacker.example"}, ORIGIN_REFUSED),  # a cross-site page
        ({"Origin": "http://127.0.0.1:3000"}, ORIGIN_REFUSED),  # another local app
        ({"Origin": "null"}, ORIGIN_REFUSED),  # a sandboxed page, a file:// page
    ],
)
def test_writes_from_a_foreign_host_or_origin_are_refused(
    hub: str, headers: dict[str, str], reason: tuple[str, str]
) -> None:
    before = socrates_name(hub)
    attempts = [
        httpx.post(f"{hub}{API}", json=body("intruder"), headers=headers),
        httpx.put(f"{hub}{API}/socrates", json=body("socrates"), headers=headers),
        httpx.delete(f"{hub}{API}/socrates", headers=headers),
        httpx.post(
            f"{hub}{API}/upload?replace=true",
            files={"file": ("socrates.yaml", b"name: Owned\n", "application/yaml")},
            headers=headers,
        ),
    ]
    for reply in attempts:
        assert reply.status_code == 403, reply.text
        for part in reason:
            assert part in reply.json()["detail"]
    assert not exists(hub, "intruder")
    assert socrates_name(hub) == before
    # Reads stay open to pages of other origins (which cannot read them without CORS),
    # not to a name that is not this machine's (tests/integration/test_host_guard.py).
    read = httpx.get(f"{hub}{API}", headers=headers)
    assert read.status_code == (403 if reason == HOST_REFUSED else 200)


def upload(url: str, name: str, headers: dict[str, str]) -> httpx.Response:
    text = yaml.safe_dump(persona_data(name=name))
    files = {"file": ("socrates.yaml", text.encode(), "application/yaml")}
    return httpx.post(f"{url}{API}/upload?replace=true", files=files, headers=headers)


def test_an_upload_needs_a_header_a_form_cannot_send_or_the_hubs_own_origin(hub: str) -> None:
    # A browser that sends no Origin (an old one, a privacy setting, an extension that
    # strips it) posting a page's form: nothing in it says where it came from.
    before = socrates_name(hub)
    refused = upload(hub, "Owned", {})
    assert refused.status_code == 403
    assert "X-Requested-With" in refused.json()["detail"]
    assert "PERSONA_AGENT_API_KEYS" in refused.json()["detail"]
    assert socrates_name(hub) == before
    # A tool sends the header (the personas CLI does); a page of the hub's own sends its Origin.
    assert upload(hub, "Socrates the Tool", {"X-Requested-With": "curl"}).status_code == 200
    assert upload(hub, "Socrates the Page", {"Origin": hub}).status_code == 200
    assert socrates_name(hub) == "Socrates the Page"


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_a_json_route_refuses_a_body_a_form_could_send(hub: str, content_type: str) -> None:
    reply = httpx.post(
        f"{hub}{API}", content=json.dumps(body("formed")), headers={"Content-Type": content_type}
    )
    assert reply.status_code == 415
    assert "application/json" in reply.json()["detail"]
    assert not exists(hub, "formed")


def test_a_hub_listening_beyond_loopback_needs_keys_for_every_write(
    tmp_path: Path, personas_dir: Path
) -> None:
    with hub_process(personas_dir, tmp_path / "data", HOST="0.0.0.0", **OFFLINE_LLM) as (
        url,
        process,
    ):
        reply = httpx.post(f"{url}{API}", json=body("proxied"))
        assert reply.status_code == 403
        assert "listens on 0.0.0.0" in reply.json()["detail"]
        assert httpx.get(f"{url}{API}/socrates").status_code == 200
        process.terminate()
        log = process.communicate(timeout=30)[0]
    assert "every write is refused" in log
    with hub_process(
        personas_dir, tmp_path / "data", HOST="0.0.0.0", API_KEYS="k1", **OFFLINE_LLM
    ) as (url, _):
        keyed = {"Authorization": "Bearer k1"}
        assert httpx.post(f"{url}{API}", json=body("keyed"), headers=keyed).status_code == 201


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/a2a/socrates/", "text/plain"),
        ("/a2a/socrates/", "application/x-www-form-urlencoded"),
        ("/a2a/socrates/", None),
        ("/a2a/socrates/message:send", "text/plain"),
        ("/a2a/socrates/message:send", "multipart/form-data; boundary=x"),
    ],
)
def test_a2a_refuses_bodies_not_labelled_json(
    hub: str, path: str, content_type: str | None
) -> None:
    message = (
        '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": '
        '{"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}'
    )
    headers = {"A2A-Version": "1.0"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    reply = httpx.post(f"{hub}{path}", content=message, headers=headers)
    assert reply.status_code == 415
    if path.endswith("/"):
        assert reply.json()["error"]["code"] == -32600
    else:
        assert reply.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "application/json" in reply.text


@pytest.mark.parametrize("content_type", ["application/json", "application/a2a+json"])
def test_a2a_takes_json_bodies(hub: str, content_type: str) -> None:
    rpc = '{"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "nope"}}'
    headers = {"A2A-Version": "1.0", "Content-Type": f"{content_type}; charset=utf-8"}
    reply = httpx.post(f"{hub}/a2a/socrates/", content=rpc, headers=headers)
    assert reply.status_code == 200
    assert reply.json()["error"]["code"] == -32001  # TaskNotFound: the body was read
