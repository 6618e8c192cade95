"""Request heads are bounded (431): a real ``persona-agent serve`` and raw sockets, on each
HTTP parser uvicorn may use: httptools (installed, so uvicorn's and ``serve``'s choice) and
h11 (what ``serve`` runs where httptools is not installed: here hidden from the process)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

from tests.fakes.fake_llm import FakeLLM
from tests.personas import BUNDLED
from tests.servers.hub_process import hub_process_with

BOUND = 30.0
"""Seconds after which a socket call gives up."""
LIMIT = 64 * 1024
"""The default PERSONA_AGENT_MAX_HEAD_BYTES."""
HUGE = 50 * 1024 * 1024
"""The header of the attack: 50 MB (it was buffered, answered 200, and cost 97 MB)."""
RSS_BOUND = 16 * 1024 * 1024
"""What the refused huge header may cost the hub's memory, at most: far less than it."""


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def hidden_httptools(root: Path) -> dict[str, str]:
    """An environment in which ``import httptools`` fails, as where it is not installed."""
    hide = root / "hide"
    (hide / "httptools").mkdir(parents=True)
    (hide / "httptools" / "__init__.py").write_text(
        'raise ImportError("httptools is hidden by the test")\n', encoding="utf-8"
    )
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(hide), os.environ.get("PYTHONPATH")]))}


def has_httptools(environ: dict[str, str]) -> bool:
    """Whether a process with ``environ`` can import httptools (else uvicorn, and
    ``serve``, run h11)."""
    found = subprocess.run(
        [sys.executable, "-c", "import httptools"],
        env={**os.environ, **environ},
        capture_output=True,
        timeout=60,
    )
    return found.returncode == 0


@pytest.fixture(scope="module", params=["httptools", "h11"])
def hub(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    root = tmp_path_factory.mktemp(f"heads-{request.param}")
    environ = hidden_httptools(root) if request.param == "h11" else {}
    assert has_httptools(environ) == (request.param == "httptools")
    (root / "personas").symlink_to(BUNDLED)
    settings = {"LLM_BASE_URL": llm.base_url, "LLM_API_KEY": "unused"}
    with hub_process_with(root / "personas", root / "data", environ, **settings) as running:
        yield running


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


class Exchanged(NamedTuple):
    answer: bytes
    """Everything the hub answered before it closed the connection."""
    cut_off: bool
    """Whether the hub closed the connection (a reset, or its end) before the client had
    sent it everything: it stopped reading, and let go of what it had not read."""


def exchange(url: str, head: bytes, then: Iterable[bytes] = ()) -> Exchanged:
    """Send ``head``, then each piece of ``then`` while the hub still reads; what the hub
    answered before it closed the connection, and whether it closed it before the end.

    A hub that answers and closes while the client still sends makes its kernel reset the
    connection (it closed with bytes unread): the client may see the reset on a ``recv``
    or a ``send``, before or after it read the answer. A reset drops nothing the client's
    kernel already received (Linux): the answer is read all the same, after it."""
    received = b""
    cut_off = False
    with socket.create_connection(address(url), timeout=BOUND) as sock:
        sock.sendall(head)
        for piece in then:
            try:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:
                    chunk = sock.recv(65_536)
                    if not chunk:
                        cut_off = True
                        break
                    received += chunk
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                cut_off = True
                break
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65_536):
                received += chunk
    return Exchanged(received, cut_off)


def status_and_body(answer: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head, "the hub answered nothing"
    return int(head.split(b" ", 2)[1]), json.loads(body) if body else {}


def rss(process: subprocess.Popen[str]) -> int:
    """The process's resident memory, in bytes."""
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def request_head(*headers: bytes, path: bytes = b"/healthz") -> bytes:
    return b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n" % (
        path,
        b"".join(header + b"\r\n" for header in headers),
    )


def test_a_huge_header_is_refused_without_being_held(
    hub: tuple[str, subprocess.Popen[str]],
) -> None:
    url, process = hub
    assert httpx.get(f"{url}/healthz").status_code == 200  # start-up's allocations done
    before = rss(process)
    piece = b"a" * 65_536
    exchanged = exchange(
        url,
        b"GET /api/v1/personas HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ",
        (piece for _ in range(HUGE // len(piece))),
    )
    # Not held: the hub let the connection go before the client could send the 50 MB.
    assert exchanged.cut_off
    status, body = status_and_body(exchanged.answer)
    assert status == 431
    assert f"limit of {LIMIT} bytes" in str(body["detail"])
    assert "PERSONA_AGENT_MAX_HEAD_BYTES" in str(body["detail"])
    assert rss(process) - before < RSS_BOUND
    assert httpx.get(f"{url}/healthz").status_code == 200


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(request_head(b"X-Big: " + b"b" * LIMIT), id="one-header-at-once"),
        pytest.param(request_head(path=b"/healthz?" + b"q" * LIMIT), id="request-line"),
        pytest.param(
            request_head(*(b"X-F%d: %s" % (n, b"c" * 1000) for n in range(80))),
            id="many-fields-of-1000-bytes",
        ),
    ],
)
def test_a_head_over_the_limit_is_refused(
    hub: tuple[str, subprocess.Popen[str]], head: bytes
) -> None:
    url, _ = hub
    status, body = status_and_body(exchange(url, head).answer)
    assert status == 431
    assert "PERSONA_AGENT_MAX_HEAD_BYTES" in str(body["detail"])


def test_too_many_header_fields_are_refused(hub: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = hub
    head = request_head(*(b"X-F%d: 1" % n for n in range(101)))
    status, body = status_and_body(exchange(url, head).answer)
    assert status == 431
    assert "more than 100 header fields (PERSONA_AGENT_MAX_HEADERS)" in str(body["detail"])


def test_a_head_within_the_limits_is_served(hub: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = hub
    big_but_allowed = {"X-Token": "t" * (LIMIT - 2048)}
    assert httpx.get(f"{url}/healthz", headers=big_but_allowed).status_code == 200
    many = {f"X-F{n}": "1" for n in range(90)}
    assert httpx.get(f"{url}/healthz", headers=many).status_code == 200


def test_a_pipelined_head_over_the_limit_is_refused_after_the_first_answer(
    hub: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = hub
    answer = exchange(url, request_head() + request_head(b"X-Big: " + b"d" * LIMIT)).answer
    first, _, rest = answer.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 200 ")
    assert b"HTTP/1.1 431 " in rest
    assert httpx.get(f"{url}/healthz").status_code == 200
