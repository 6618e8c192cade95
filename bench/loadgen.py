"""Closed-loop load generator for A2A JSON-RPC (protocol 1.0), blocking and streaming sends.

Each of ``-c`` workers holds one keep-alive HTTP/1.1 connection (from one of
``--callers`` loopback addresses when given) and sends one
request at a time, back to back, for ``--warmup`` + ``--duration`` seconds (or
until ``--max-requests`` have been started): it stops by itself. The HTTP client
is a small one on raw asyncio streams (uvloop when installed), so that the
client takes as little of the machine's CPU as possible; run it in a process of
its own, next to the servers it measures.

    python bench/loadgen.py --url http://127.0.0.1:8000/a2a/ada-lovelace/ \
        --mode send -c 16 -d 10 [--watch-pid hub=PID]

Every answer is checked: HTTP 200, a JSON-RPC ``result`` shaped as protocol
1.0, a task that ends ``TASK_STATE_COMPLETED`` (or an agent message), and answer
text that contains ``--expect``. Streams: ``text/event-stream``, every event a
valid result, the last state completed. Anything else counts as an error, by
kind (``http_500``, ``jsonrpc_error:-32601``, ``state:failed``, ``timeout`` ...).

Only answers that complete inside the measured window count: ``rps`` is their
number over the window, latencies are theirs. Errors count whenever they
happen, warm-up included; ``checked`` is every answer that passed the checks.
``stream`` mode adds ``ttft_ms`` (send to the first artifact text),
``text_chunks`` (artifact events with text per answer), ``words_delivered`` (the
words of answer text, in artifact events, that reached the client inside the window,
whether or not their answer ended in it: a model's tokens are words for the fake LLM,
so this is the tokens a server delivered), ``words_per_s`` and ``words_by_second``
(each second of the window: a server still filling up shows as a rising count) and, with
``--timing-file`` and ``--mark``, writes one line a request,
``ID<TAB>first<TAB>last<TAB>chunks``: ``time.monotonic()`` when the first and
the last answer text arrived (the message carries ``[[bench:ID]]``,
which the fake LLM logs with its own token times).

Prints one JSON line on stdout. Exit status 1 when no request succeeded.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import IO, Any
from urllib.parse import urlsplit

NOT_ANSWER_STATES = {"", "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_UNSPECIFIED"}


class Bad(Exception):
    """An answer that does not count as a success; ``str()`` is the error kind."""


# ---------------------------------------------------------------------------
# HTTP/1.1 on asyncio streams


class Connection:
    """One keep-alive connection; reopened after an error or ``Connection: close``."""

    def __init__(self, host: str, port: int, source: str | None = None) -> None:
        self.host, self.port, self.source = host, port, source
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.reader is None or self.writer is None:
            local = (self.source, 0) if self.source else None
            self.reader, self.writer = await asyncio.open_connection(
                self.host, self.port, local_addr=local
            )
        return self.reader, self.writer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def _head(self, reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes]]:
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            if line:
                key, _, value = line.partition(b":")
                headers[key.strip().lower()] = value.strip()
        return status, headers

    async def request(
        self, data: bytes, on_chunk: Callable[[bytes], None] | None = None
    ) -> tuple[int, bytes, bytes]:
        """Send ``data`` (a whole request); -> (status, content type, body).

        With ``on_chunk``, each piece of the body is handed over as it arrives
        (and the returned body is empty).
        """
        try:
            reader, writer = await self._open()
            writer.write(data)
            status, headers = await self._head(reader)
            body: list[bytes] = []
            take = on_chunk or body.append
            if b"content-length" in headers:
                take(await reader.readexactly(int(headers[b"content-length"])))
            elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
                while True:
                    size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                    if size == 0:
                        await reader.readuntil(b"\r\n")
                        break
                    take((await reader.readexactly(size + 2))[:-2])
            else:  # body until the connection closes
                take(await reader.read())
                headers[b"connection"] = b"close"
            if headers.get(b"connection", b"").lower() == b"close":
                self.close()
            return status, headers.get(b"content-type", b""), b"".join(body)
        except BaseException:
            self.close()
            raise


# ---------------------------------------------------------------------------
# A2A v1.0 JSON-RPC bodies and answers


def request_bytes(url: str, body: bytes, stream: bool, extra: tuple[str, ...] = ()) -> bytes:
    parts = urlsplit(url)
    head = (
        f"POST {parts.path or '/'} HTTP/1.1\r\n"
        f"Host: {parts.netloc}\r\n"
        "Content-Type: application/json\r\n"
        "A2A-Version: 1.0\r\n"
        + "".join(f"{header}\r\n" for header in extra)
        + f"Accept: {'text/event-stream' if stream else 'application/json'}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def message_body(number: int, text: str, stream: bool) -> bytes:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    method = "SendStreamingMessage" if stream else "SendMessage"
    return json.dumps(
        {"jsonrpc": "2.0", "id": number, "method": method, "params": {"message": message}}
    ).encode()


def _texts(parts: Any) -> list[str]:
    return [
        p["text"] for p in parts or () if isinstance(p, dict) and isinstance(p.get("text"), str)
    ]


def result_of(document: Any) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise Bad("shape:not-object")
    if document.get("error") is not None:
        error = document["error"]
        raise Bad(f"jsonrpc_error:{error.get('code') if isinstance(error, dict) else '?'}")
    result = document.get("result")
    if not isinstance(result, dict):
        raise Bad("shape:no-result")
    return result


@dataclass
class Delivered:
    """The words of answer text that reached the client inside ``[start, stop)``."""

    start: float
    stop: float
    words: int = 0
    by_second: list[int] = field(default_factory=list)

    def add(self, now: float, text: str) -> None:
        if self.start <= now < self.stop:
            count = len(text.split())
            self.words += count
            second = int(now - self.start)
            while len(self.by_second) <= second:
                self.by_second.append(0)
            self.by_second[second] += count


@dataclass
class Answer:
    """What the events of one answer said."""

    state: str = ""
    texts: list[str] = field(default_factory=list)
    events: int = 0
    text_chunks: int = 0
    body_bytes: int = 0
    """The bytes of the response body (for a stream: every SSE event, framing included)."""
    first_text: float = 0.0
    last_text: float = 0.0
    delivered: Delivered | None = None
    """Where the words of each artifact event's text are counted (streams)."""

    def take(self, result: dict[str, Any], now: float) -> None:
        self.events += 1
        if "artifactUpdate" in result:
            texts = _texts((result["artifactUpdate"].get("artifact") or {}).get("parts"))
            if any(texts):
                self.text_chunks += 1
                self.first_text = self.first_text or now
                self.last_text = now
                if self.delivered is not None:
                    self.delivered.add(now, "".join(texts))
            self.texts.extend(texts)
        elif "message" in result:
            if result["message"].get("role") != "ROLE_AGENT":
                raise Bad("message:not-agent")
            self.state = "message"
            self.texts.extend(_texts(result["message"].get("parts")))
        elif "task" in result or "statusUpdate" in result:
            value = result.get("task") or result["statusUpdate"]
            status = value.get("status") or {}
            self.state = status.get("state", "")
            if self.state not in NOT_ANSWER_STATES:
                self.texts.extend(_texts((status.get("message") or {}).get("parts")))
            for artifact in value.get("artifacts") or ():
                self.texts.extend(_texts(artifact.get("parts")))
        else:
            raise Bad("shape:not-v1.0")

    def check(self, expect: str) -> None:
        if self.state not in ("message", "TASK_STATE_COMPLETED"):
            raise Bad(f"state:{self.state or 'none'}")
        text = "".join(self.texts)
        if not text or (expect and expect not in text):
            raise Bad("text:expected-text-missing")


async def send_one(conn: Connection, data: bytes, expect: str) -> Answer:
    status, _, body = await conn.request(data)
    if status != 200:
        raise Bad(f"http_{status}")
    try:
        document = json.loads(body)
    except ValueError:
        raise Bad("shape:not-json") from None
    answer = Answer()
    answer.take(result_of(document), time.monotonic())
    if answer.state != "message" and "task" not in result_of(document):
        raise Bad("shape:send-returned-event")
    answer.check(expect)
    return answer


async def stream_one(
    conn: Connection, data: bytes, expect: str, delivered: Delivered | None = None
) -> Answer:
    answer = Answer(delivered=delivered)
    buffer = b""

    def on_chunk(chunk: bytes) -> None:
        nonlocal buffer
        now = time.monotonic()
        answer.body_bytes += len(chunk)
        buffer = (buffer + chunk).replace(b"\r\n", b"\n")
        *events, buffer = buffer.split(b"\n\n")
        for event in events:
            lines = [line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")]
            if not lines:
                continue
            try:
                document = json.loads(b"\n".join(lines))
            except ValueError:
                raise Bad("shape:sse-not-json") from None
            answer.take(result_of(document), now)

    status, content_type, _ = await conn.request(data, on_chunk)
    if status != 200:
        raise Bad(f"http_{status}")
    if not content_type.startswith(b"text/event-stream"):
        raise Bad("shape:not-sse")
    if answer.events == 0:
        raise Bad("stream:no-events")
    answer.check(expect)
    return answer


# ---------------------------------------------------------------------------
# /proc readings (Linux)

_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return None


def host_cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def percentile(ordered: list[float], p: float) -> float:
    k = (len(ordered) - 1) * p / 100.0
    low = int(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def distribution_ms(values: list[float]) -> dict[str, float] | None:
    ordered = sorted(values)
    if not ordered:
        return None
    return {
        "p50": round(percentile(ordered, 50) * 1000, 3),
        "p90": round(percentile(ordered, 90) * 1000, 3),
        "p99": round(percentile(ordered, 99) * 1000, 3),
        "mean": round(sum(ordered) / len(ordered) * 1000, 3),
        "max": round(ordered[-1] * 1000, 3),
    }


# ---------------------------------------------------------------------------
# the run


async def run(args: argparse.Namespace) -> dict[str, Any]:
    parts = urlsplit(args.url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    stream = args.mode == "stream"
    t_start = time.monotonic()
    t_measure = t_start + args.warmup
    t_stop = t_measure + args.duration
    delivered = Delivered(t_measure, t_stop)
    one: Callable[[Connection, bytes, str], Coroutine[Any, Any, Answer]] = (
        partial(stream_one, delivered=delivered) if stream else send_one
    )
    timing: IO[str] | None = open(args.timing_file, "a") if args.timing_file else None  # noqa: SIM115, ASYNC230 - opened once, before the load starts
    watch = {}
    for item in args.watch_pid or ():
        label, _, pid = item.rpartition("=")
        watch[label or pid] = int(pid)

    latencies: list[float] = []
    ttfts: list[float] = []
    chunks: list[int] = []
    body_bytes: list[int] = []
    events: list[int] = []
    errors: collections.Counter[str] = collections.Counter()
    samples: list[str] = []
    numbers = iter(range(1, 1 << 62))
    started = checked = 0

    async def worker(number: int) -> None:
        nonlocal started, checked
        source = f"127.0.0.{2 + number % args.callers}" if args.callers else None
        conn = Connection(host, port, source)
        try:
            while True:
                sent = time.monotonic()
                if sent >= t_stop or started >= args.max_requests:
                    return
                started += 1
                number = next(numbers)
                mark = f"{os.getpid()}-{number}"
                text = f"{args.text} [[bench:{mark}]]" if args.mark else args.text
                data = request_bytes(
                    args.url, message_body(number, text, stream), stream, tuple(args.header or ())
                )
                try:
                    answer = await asyncio.wait_for(one(conn, data, args.expect), args.timeout)
                except Exception as error:  # every failure is counted, by kind
                    if isinstance(error, Bad):
                        kind = str(error)
                    elif isinstance(error, TimeoutError):
                        kind = "timeout"
                    else:
                        kind = f"exc:{type(error).__name__}"
                    errors[kind] += 1  # warm-up included: every answer is checked
                    if len(samples) < 3:
                        samples.append(f"{kind}: {error!r}"[:300])
                    conn.close()
                    if not isinstance(error, Bad):
                        await asyncio.sleep(0.01)
                    continue
                done = time.monotonic()
                checked += 1
                if t_measure <= sent and done <= t_stop:
                    latencies.append(done - sent)
                    events.append(answer.events)
                    if stream:
                        chunks.append(answer.text_chunks)
                        body_bytes.append(answer.body_bytes)
                        if answer.first_text:
                            ttfts.append(answer.first_text - sent)
                if timing is not None and answer.first_text:
                    timing.write(
                        f"{mark}\t{answer.first_text:.6f}\t{answer.last_text:.6f}\t"
                        f"{answer.text_chunks}\n"
                    )
        finally:
            conn.close()

    tasks = [asyncio.create_task(worker(n)) for n in range(args.concurrency)]
    await asyncio.sleep(max(0.0, t_measure - time.monotonic()))
    cpu0 = {k: process_cpu_seconds(p) for k, p in watch.items()}
    host0 = host_cpu_ticks()
    self0 = time.process_time()
    w0 = time.monotonic()
    waiter = asyncio.gather(*tasks)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(waiter), max(0.0, t_stop - time.monotonic()))
    w1 = time.monotonic()
    cpu1 = {k: process_cpu_seconds(p) for k, p in watch.items()}
    host1 = host_cpu_ticks()
    self1 = time.process_time()
    rss = {k: rss_kib(p) for k, p in watch.items()}
    await waiter
    if timing is not None:
        timing.close()

    window = max(w1 - w0, 1e-9)
    ok = len(latencies)
    summary: dict[str, Any] = {
        "mode": args.mode,
        "concurrency": args.concurrency,
        "window_s": round(window, 3),
        "started": started,
        "ok": ok,
        "checked": checked,
        "errors": sum(errors.values()),
        "error_kinds": dict(errors.most_common(8)),
        "rps": round(ok / window, 2),
        "latency_ms": distribution_ms(latencies),
        "events_per_answer": round(sum(events) / ok, 2) if ok else None,
        "client_cpu_pct": round(100 * (self1 - self0) / window, 1),
        "host_cpu_pct": round(
            100 * (os.cpu_count() or 1) * (host1[0] - host0[0]) / max(host1[1] - host0[1], 1), 1
        ),
        "server_cpu_pct": {
            k: round(100 * (c1 - c0) / window, 1)
            for k in watch
            if (c0 := cpu0[k]) is not None and (c1 := cpu1[k]) is not None
        },
        "server_rss_kib": rss,
    }
    if stream:
        summary["ttft_ms"] = distribution_ms(ttfts)
        summary["text_chunks_per_answer"] = round(sum(chunks) / len(chunks), 2) if chunks else None
        summary["bytes_per_answer"] = (
            round(sum(body_bytes) / len(body_bytes)) if body_bytes else None
        )
        summary["words_delivered"] = delivered.words
        summary["words_per_s"] = round(delivered.words / window, 1)
        summary["words_by_second"] = delivered.by_second
    for sample in samples:
        print("error sample:", sample, file=sys.stderr)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", required=True, help="the JSON-RPC endpoint")
    parser.add_argument("--mode", choices=("send", "stream"), default="send")
    parser.add_argument("-c", "--concurrency", type=int, default=16)
    parser.add_argument("-d", "--duration", type=float, default=10.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds first")
    parser.add_argument("--max-requests", type=int, default=1 << 62, help="stop after N sends")
    parser.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    parser.add_argument("--text", default="hello")
    parser.add_argument("--expect", default="Hello", help="the answer must contain this")
    parser.add_argument("--mark", action="store_true", help="add [[bench:ID]] to each message")
    parser.add_argument("--timing-file", default=None, help="stream: append arrival times")
    parser.add_argument("--watch-pid", action="append", help="LABEL=PID: CPU%% and RSS")
    parser.add_argument(
        "--callers",
        type=int,
        default=0,
        help="spread the connections over N loopback source addresses (127.0.0.2 ...): "
        "N callers to a server that limits each",
    )
    parser.add_argument(
        "--header", action="append", help="'Name: value' sent with every request (credentials)"
    )
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.duration <= 0:
        parser.error("concurrency must be >= 1 and duration > 0")
    try:
        import uvloop

        summary = uvloop.run(run(args))
    except ImportError:
        summary = asyncio.run(run(args))
    print(json.dumps(summary, separators=(",", ":")))
    return 0 if summary["ok"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
