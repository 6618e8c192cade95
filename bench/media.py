"""Images in (issue 38): what an image part costs the hub, apart from the model's own time.

    python bench/media.py                  # both parts
    python bench/media.py --part time --sends 200

Parts, against ``persona-agent serve`` in its default configuration (its default model
``gpt-4o-mini`` sees images) as a process of its own, the fake LLM answering at once in
another:

The hub's ``PERSONA_AGENT_MAX_MESSAGE_BYTES`` is raised to 16 MiB (a phone's photo in
base64 is more than the default 1 MiB).

- ``time``: blocking JSON-RPC sends to Socrates, one at a time, each in a new
  conversation, alternating a message of text and an image (a JPEG photo of 1024×768, and
  one of 4032×3024 as a phone takes it) with a short text, the text message padded to the
  image message's length (bytes of the request). The figure is the difference of the
  medians: the image's preparation (decode, scale, encode, in a worker thread), its
  storing, and the data URL the model request carries. Target <= 20 ms for the 1024×768.
- ``memory``: the hub's peak RSS (``VmHWM``) after the time part's sends, then after 100
  image sends of the 4032×3024 photo (a request of 5 MB), 4 at a time; the growth divided
  by 4. What one image costs is bounded by the limits: its request's copies on the way
  (body, JSON, protobuf, the task the SDK stores with the message: about 6 of a request of
  at most ``PERSONA_AGENT_MAX_MESSAGE_BYTES``) and its frame (decoded at 1/2, 1/4 or 1/8 of
  its size when that is enough, at most ``PERSONA_AGENT_IMAGE_MAX_PIXELS``) with its scaled
  copy. Target for the phone's photo: <= 48 MB an image.
- ``many`` (issue 46.2): messages of 16 image URLs each (the most a message may have), at a
  server on 127.0.0.1 (allow-listed) serving PNGs of random pixels at 1568 pixels a side
  (7 MB each, which nothing compresses), 4 messages at a time, 12 in all, each failing at
  its byte budget (``PERSONA_AGENT_IMAGE_MESSAGE_BYTES``) after four or so; ``/healthz`` asked
  every 50 ms meanwhile. Figures: the hub's peak RSS growth (target <= 600 MB: before, 150
  URLs in one message reached 5.4 GB), its RSS once they are done over its RSS before
  (target <= 200 MB: 2.5 GB stayed held), and ``/healthz``'s slowest answer (target <= 1 s:
  22.9 s before).

Prints each figure against its target; exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # persona_agent, tests

from run import Row, fake_llm, hub, hub_home
from starlette.types import Receive, Scope, Send

from tests.servers.threaded import ServedInThread

LARGE = {"PERSONA_AGENT_MAX_MESSAGE_BYTES": str(16 * 1024 * 1024)}
"""A phone's photo is more than the default 1 MiB a message may have (base64 adds a third)."""


def photo(size: tuple[int, int]) -> bytes:
    """A JPEG of ``size`` with a photo's detail (a Mandelbrot set, in colour)."""
    grey = Image.effect_mandelbrot(size, (-2.0, -1.2, 0.8, 1.2), 80)
    image = Image.merge(
        "RGB", (grey, grey.rotate(180), grey.transpose(Image.Transpose.FLIP_LEFT_RIGHT))
    )
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def body(parts: list[dict[str, Any]]) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


def image_parts(jpeg: bytes) -> list[dict[str, Any]]:
    raw = base64.b64encode(jpeg).decode()
    return [{"text": "What is this?"}, {"raw": raw, "mediaType": "image/jpeg", "filename": "p.jpg"}]


async def _send(client: httpx.AsyncClient, url: str, parts: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    reply = await client.post(url, json=body(parts), headers={"A2A-Version": "1.0"})
    took = (time.perf_counter() - started) * 1000
    answer = reply.json()
    if "result" not in answer:
        raise RuntimeError(f"a send was refused: {reply.text[:500]}")
    state = answer["result"]["task"]["status"]["state"]
    if state != "TASK_STATE_COMPLETED":
        raise RuntimeError(f"a send ended {state}: {reply.text[:500]}")
    return took


async def _timed(url: str, jpeg: bytes, sends: int) -> tuple[float, float]:
    image = image_parts(jpeg)
    length = len(str(body(image)))
    text = [{"text": "x" * (length - len(str(body([{"text": ""}]))))}]
    times: dict[str, list[float]] = {"text": [], "image": []}
    async with httpx.AsyncClient(timeout=60) as client:
        for n in range(sends + 5):
            for kind, parts in (("text", text), ("image", image)):
                took = await _send(client, url, parts)
                if n >= 5:  # warm-up
                    times[kind].append(took)
    return statistics.median(times["text"]), statistics.median(times["image"])


async def _burst(url: str, jpeg: bytes, sends: int, concurrency: int) -> None:
    parts = image_parts(jpeg)
    async with httpx.AsyncClient(timeout=120) as client:
        pending = iter(range(sends))

        async def worker() -> None:
            for _ in pending:
                await _send(client, url, parts)

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def peak_kib(pid: int, field: str = "VmHWM") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


class NoiseImages(ServedInThread):
    """``/{n}.png``: a PNG of random pixels, 1568 a side (about 7 MB)."""

    label = "image server"

    def __init__(self) -> None:
        pixels = Image.frombytes("RGB", (1568, 1568), random.Random(46).randbytes(1568**2 * 3))
        buffer = io.BytesIO()
        pixels.save(buffer, format="PNG", compress_level=1)
        self.png = buffer.getvalue()

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"image/png")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.png})


async def _many(base: str, images: NoiseImages, messages: int = 12) -> float:
    """Messages of 16 image URLs, 4 at a time; ``/healthz`` meanwhile: its slowest answer."""
    urls = [
        {"url": f"http://127.0.0.1:{images.port}/{n}.png", "mediaType": "image/png"}
        for n in range(16)
    ]
    slowest = 0.0
    async with httpx.AsyncClient(timeout=300) as client:
        pending = iter(range(messages))

        async def worker() -> None:
            for _ in pending:
                reply = await client.post(
                    f"{base}/a2a/socrates/", json=body(urls), headers={"A2A-Version": "1.0"}
                )
                reply.raise_for_status()

        work = asyncio.gather(*(worker() for _ in range(4)))
        while not work.done():
            started = time.perf_counter()
            (await client.get(f"{base}/healthz")).raise_for_status()
            slowest = max(slowest, time.perf_counter() - started)
            await asyncio.sleep(0.05)
        await work
    return slowest


def many_rows(directory: Path, llm: str) -> list[Row]:
    with NoiseImages() as images:
        allowed = {"PERSONA_AGENT_IMAGE_URL_ALLOWED_HOSTS": f"127.0.0.1:{images.port}"}
        with hub(llm, hub_home(directory, "many"), settings=allowed) as (base, started):
            before = peak_kib(started.pid, "VmRSS")
            slowest = asyncio.run(_many(base, images))
            peak = (peak_kib(started.pid) - before) / 1024
            held = (peak_kib(started.pid, "VmRSS") - before) / 1024
    return [
        Row("peak RSS growth, 16-URL messages, 4 at once", peak, "MB", "<= 600", peak <= 600),
        Row("RSS held after them", held, "MB", "<= 200", held <= 200),
        Row("slowest /healthz meanwhile", slowest * 1000, "ms", "<= 1000", slowest <= 1),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", action="append", choices=("time", "memory", "many"))
    parser.add_argument("--sends", type=int, default=100)
    args = parser.parse_args()
    parts = args.part or ["time", "memory", "many"]
    rows: list[Row] = []
    small, phone = photo((1024, 768)), photo((4032, 3024))
    with (
        tempfile.TemporaryDirectory(prefix="bench-media-") as directory,
        fake_llm() as llm,
        hub(llm, hub_home(Path(directory), "media"), settings=LARGE) as (base, started),
    ):
        url = f"{base}/a2a/socrates/"
        sizes = (("1024×768", small, 20.0), ("4032×3024", phone, 0.0)) if "time" in parts else ()
        for name, jpeg, target in sizes:
            text_ms, image_ms = asyncio.run(_timed(url, jpeg, args.sends))
            added = image_ms - text_ms
            print(f"    {name}: text {text_ms:.1f} ms, image {image_ms:.1f} ms", file=sys.stderr)
            ok = added <= target if target else True
            rows.append(
                Row(
                    f"added hub time, image {name}",
                    added,
                    "ms",
                    f"<= {target:g}" if target else "",
                    ok,
                )
            )
        if "memory" in parts:
            before = peak_kib(started.pid)
            asyncio.run(_burst(url, phone, 100, 4))
            each = (peak_kib(started.pid) - before) / 1024 / 4
            rows.append(Row("peak RSS growth an image, 4 at once", each, "MB", "<= 48", each <= 48))
    if "many" in parts:
        with tempfile.TemporaryDirectory(prefix="bench-media-") as directory, fake_llm() as llm:
            rows += many_rows(Path(directory), llm)
    width = max(len(row.figure) for row in rows)
    for row in rows:
        verdict = ("PASS" if row.ok else "FAIL") if row.target else ""
        print(f"{row.figure:<{width}}  {row.value:>9.2f} {row.unit:<3} {row.target:<8} {verdict}")
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
