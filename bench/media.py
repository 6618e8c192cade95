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

Prints each figure against its target; exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
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


def peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for {pid}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", action="append", choices=("time", "memory"))
    parser.add_argument("--sends", type=int, default=100)
    args = parser.parse_args()
    parts = args.part or ["time", "memory"]
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
    width = max(len(row.figure) for row in rows)
    for row in rows:
        verdict = ("PASS" if row.ok else "FAIL") if row.target else ""
        print(f"{row.figure:<{width}}  {row.value:>9.2f} {row.unit:<3} {row.target:<8} {verdict}")
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
