"""One image part made ready: format sniffed from the bytes, limits before decoding,
scaled down, upright, without metadata; and what models are sent of stored messages."""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest
from PIL import Image

from persona_agent.media.expand import expand_media
from persona_agent.media.images import ImageError, ImageLimits, prepare_image
from persona_agent.media.vision import Vision
from persona_agent.personas.model import Persona
from tests.media.images import bomb_png, image_bytes

LIMITS = ImageLimits()


def test_the_format_is_read_from_the_bytes_not_the_media_type() -> None:
    with pytest.raises(ImageError, match=r"Part 3 \(x.png\) is not a PNG, JPEG, WebP or GIF"):
        prepare_image(b"<svg><script>alert(1)</script></svg>", "x.png", LIMITS, "Part 3 (x.png)")
    jpeg = prepare_image(image_bytes("JPEG"), "x.png", LIMITS, "Part 0")
    assert jpeg.media_type == "image/jpeg"


def test_limits_are_checked_before_decoding() -> None:
    with pytest.raises(ImageError, match="has 2,048 bytes: images may have 1,024 at most"):
        prepare_image(b"\0" * 2048, "x", ImageLimits(max_bytes=1024), "Part 0")
    with pytest.raises(ImageError, match="64,000,000 pixels to decode, more than the 25,000,000"):
        prepare_image(bomb_png(8000), "b.png", LIMITS, "Part 0")
    with pytest.raises(ImageError, match="cannot be decoded"):
        prepare_image(image_bytes("PNG")[:60], "cut.png", LIMITS, "Part 0")


def test_large_images_are_scaled_down_and_metadata_dropped() -> None:
    image = prepare_image(
        image_bytes("PNG", (400, 1000), text="GPS"), "p.png", ImageLimits(max_side=100), "P"
    )
    decoded = Image.open(io.BytesIO(image.data))
    assert (decoded.size, image.width, image.height) == ((40, 100), 40, 100)
    assert "Comment" not in decoded.info


def _persona(**model: object) -> Persona:
    return Persona.model_validate(
        {
            "id": "ada",
            "name": "Ada",
            "description": "d",
            "personal_background": "b",
            "language_style": {"tone": "plain"},
            "knowledge_domains": {"T": ["t"]},
            "model": model,
        }
    )


def test_vision_by_persona_then_by_model_name_and_never_embedded() -> None:
    vision = Vision(models=("gpt-4o*", "*-VL*"), default_model="gpt-4o-mini")
    assert vision.sees(_persona())
    assert vision.sees(_persona(name="qwen2.5-vl-7b"))
    assert not vision.sees(_persona(name="llama3"))
    assert vision.sees(_persona(name="llama3", vision=True))
    assert not vision.sees(_persona(vision=False))
    assert not Vision(models=("*",), embedded=True).sees(_persona(vision=True))


async def test_a_model_that_does_not_see_reads_a_note_and_no_history_keys() -> None:
    image = prepare_image(image_bytes("PNG"), "cat.png", LIMITS, "Part 0")
    files = [{"name": "r.pdf", "mediaType": "application/pdf", "bytes": 3}]
    stored: list[dict[str, Any]] = [
        {"role": "user", "content": "Look", "media": [image.meta()], "files": files},
        {"role": "assistant", "content": "Nice"},
    ]
    blind = await expand_media(stored, sees=False, store=None, conversation="k")
    assert blind[0] == {
        "role": "user",
        "content": "Look\n[image: cat.png (image/png, 64×48): this model does not see images]",
    }
    assert blind[1] is stored[1]
    seeing = await expand_media(stored, sees=True, store=None, conversation="k", fresh=[image])
    url = "data:image/png;base64," + base64.b64encode(image.data).decode()
    assert seeing[0]["content"] == [
        {"type": "text", "text": "Look"},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    gone = await expand_media(stored, sees=True, store=None, conversation="k")
    assert gone[0]["content"][1]["text"].endswith("no longer stored]")
    assert "media" in stored[0]  # the history's own messages are left as they are


async def test_a_prompt_shows_its_newest_images_only() -> None:
    shots = [
        prepare_image(image_bytes("PNG", (20 + n, 20)), f"{n}.png", LIMITS, "Part 0")
        for n in range(3)
    ]
    stored: list[dict[str, Any]] = [
        {"role": "user", "content": "Old", "media": [shots[0].meta(), shots[1].meta()]},
        {"role": "assistant", "content": "Nice"},
        {"role": "user", "content": "New", "media": [shots[2].meta()]},
    ]
    sent = await expand_media(stored, sees=True, store=None, conversation="k", fresh=shots, shown=2)
    old, new = sent[0]["content"], sent[2]["content"]
    assert [p["type"] for p in old] == ["text", "text", "image_url"]
    assert old[1]["text"] == (
        "[image: 0.png (image/png, 20×20): not shown: a prompt shows its 2 newest images]"
    )
    assert [p["type"] for p in new] == ["text", "image_url"]


def test_pixels_are_counted_as_decoded_a_jpeg_at_its_reduced_scale() -> None:
    limits = ImageLimits(max_pixels=1_000_000, max_side=400)
    photo = prepare_image(image_bytes("JPEG", (2000, 1500)), "p.jpg", limits, "Part 0")
    assert photo.decoded_pixels == 500 * 375  # decoded at 1/4: enough for 400 a side
    assert (photo.width, photo.height) == (400, 300)
    with pytest.raises(ImageError, match=r"2000×1500 is 3,000,000 pixels to decode, more than"):
        prepare_image(image_bytes("PNG", (2000, 1500)), "p.png", limits, "Part 0")
    with pytest.raises(ImageError, match=r"its 187,500 pixels \(500×375\) would take the message"):
        prepare_image(image_bytes("JPEG", (2000, 1500)), "p.jpg", limits, "Part 0", 100_000)
