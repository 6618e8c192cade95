"""Character cards as the tools people use write them, for the tests.

``MIRA_V2`` is shaped like a SillyTavern V2 export: the V1 fields mirrored at the top
level beside ``spec``/``data``, ST's own keys (``avatar``, ``talkativeness``,
``create_date``, ...), a lorebook with ST's entry extensions. ``ORLA_V3`` is a V3 card
with what V3 adds (``assets``, ``nickname``, ``group_only_greetings``, multilingual
notes, ``use_regex`` lore entries).
"""

from __future__ import annotations

import base64
import copy
import io
import json
from typing import Any

from PIL import Image, PngImagePlugin

MIRA_DATA: dict[str, Any] = {
    "name": "Captain Mira Voss",
    "description": (
        "{{char}} is the captain of the salvage ship Kestrel, forty years old, scarred "
        "left hand, grey coat. She trusts her crew and nobody else."
    ),
    "personality": "Dry, decisive, protective of her crew, allergic to paperwork.",
    "scenario": "{{user}} has just signed on as the Kestrel's new mechanic.",
    "first_mes": "*{{char}} looks up from the star chart.* So you're the new mechanic, {{user}}?",
    "mes_example": (
        "<START>\n{{user}}: Why salvage?\n{{char}}: Because the dead don't haggle.\n"
        "<START>\n{{user}}: Do you trust me?\n{{char}}: Ask me in a year."
    ),
    "creator_notes": "Works best with a slow-burn crew story.",
    "system_prompt": "Write {{char}}'s next reply in a space-salvage roleplay. {{original}}",
    "post_history_instructions": "Stay terse; no more than three sentences.",
    "alternate_greetings": ["*The airlock hisses.* You're late, {{user}}."],
    "character_book": {
        "name": "Kestrel lore",
        "scan_depth": 2,
        "token_budget": 60,
        "recursive_scanning": False,
        "extensions": {},
        "entries": [
            {
                "id": 0,
                "keys": ["Kestrel", "the ship"],
                "content": (
                    "The Kestrel is a patched-up Class IV hauler with a temperamental reactor."
                ),
                "extensions": {"position": 0, "depth": 4, "probability": 100},
                "enabled": True,
                "insertion_order": 100,
                "case_sensitive": False,
                "name": "Kestrel",
                "priority": 10,
                "comment": "The ship",
                "selective": False,
                "secondary_keys": [],
                "constant": False,
                "position": "before_char",
            },
            {
                "id": 1,
                "keys": ["Halden"],
                "content": "Halden Yard is the salvage port where Mira owes money to everyone.",
                "extensions": {},
                "enabled": True,
                "insertion_order": 50,
                "priority": 5,
                "position": "after_char",
            },
        ],
    },
    "tags": ["sci-fi", "captain", "salvage"],
    "creator": "test-author",
    "character_version": "1.2",
    "extensions": {
        "talkativeness": "0.5",
        "fav": False,
        "world": "Kestrel lore",
        "depth_prompt": {"prompt": "", "depth": 4, "role": "system"},
    },
}

MIRA_V2: dict[str, Any] = {
    "name": MIRA_DATA["name"],
    "description": MIRA_DATA["description"],
    "personality": MIRA_DATA["personality"],
    "scenario": MIRA_DATA["scenario"],
    "first_mes": MIRA_DATA["first_mes"],
    "mes_example": MIRA_DATA["mes_example"],
    "creatorcomment": MIRA_DATA["creator_notes"],
    "avatar": "none",
    "chat": "Captain Mira Voss - 2024-5-1 @12h 00m 00s 000ms",
    "talkativeness": "0.5",
    "fav": False,
    "tags": MIRA_DATA["tags"],
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": MIRA_DATA,
    "create_date": "2024-5-1 @12h 00m 00s 000ms",
}

ORLA_V3: dict[str, Any] = {
    "spec": "chara_card_v3",
    "spec_version": "3.0",
    "data": {
        "name": "Orla of the Lighthouse",
        "description": "{{char}} keeps the lighthouse on Skerry Rock and reads the weather.",
        "tags": ["fantasy", "cozy"],
        "creator": "test-author",
        "character_version": "3",
        "mes_example": "",
        "extensions": {"risuai": {"utilityBot": False}},
        "system_prompt": "",
        "post_history_instructions": "",
        "first_mes": "Mind the steps, {{user}}; the lamp needs oil.",
        "alternate_greetings": [],
        "personality": "",
        "scenario": "",
        "creator_notes": "A gentle character.",
        "character_book": {
            "extensions": {},
            "entries": [
                {
                    "keys": ["/storm(s)?/i"],
                    "content": "@@depth 4\nStorms on Skerry Rock come from the north-west.",
                    "extensions": {},
                    "enabled": True,
                    "insertion_order": 1,
                    "use_regex": False,
                    "constant": False,
                },
                {
                    "keys": ["^lamp"],
                    "content": "The lamp burns whale oil; Orla hates it.",
                    "extensions": {},
                    "enabled": True,
                    "insertion_order": 2,
                    "use_regex": True,
                },
                {
                    "keys": [],
                    "content": "Orla never leaves the island.",
                    "extensions": {},
                    "enabled": True,
                    "insertion_order": 0,
                    "constant": True,
                    "use_regex": False,
                },
            ],
        },
        "assets": [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}],
        "nickname": "Orla",
        "creator_notes_multilingual": {"en": "A gentle character.", "ga": "Carachtar séimh."},
        "source": ["https://example.org/orla"],
        "group_only_greetings": ["Orla nods to the group."],
        "creation_date": 1700000000,
        "modification_date": 1700000500,
    },
}


def card_copy(card: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(card)


def picture(size: tuple[int, int] = (48, 64), mode: str = "RGBA") -> Image.Image:
    """An image whose every pixel differs, so a changed pixel is seen."""
    image = Image.new(mode, size)
    width, height = size
    image.putdata(
        [
            ((x * 5) % 256, (y * 3) % 256, (x + y) % 256, 255 - (x % 7))[: len(mode)]
            for y in range(height)
            for x in range(width)
        ]
    )
    return image


def png_bytes(image: Image.Image, chunks: dict[str, str] | None = None) -> bytes:
    """A PNG with these tEXt chunks (values as given: base64 is the caller's)."""
    info = PngImagePlugin.PngInfo()
    for name, value in (chunks or {}).items():
        info.add_text(name, value)
    output = io.BytesIO()
    image.save(output, "PNG", pnginfo=info)
    return output.getvalue()


def encoded(card: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(card).encode("utf-8")).decode("ascii")


def card_png(card: dict[str, Any], image: Image.Image | None = None) -> bytes:
    """A PNG card as SillyTavern writes one: ``chara`` (and ``ccv3`` for a V3 card)."""
    chunks = {"chara": encoded(card)}
    if card.get("spec") == "chara_card_v3":
        chunks["ccv3"] = encoded(card)
    return png_bytes(image or picture(), chunks)


def pixels(raw: bytes) -> tuple[str, tuple[int, int], bytes]:
    with Image.open(io.BytesIO(raw)) as image:
        return image.mode, image.size, image.tobytes()


def text_chunks(raw: bytes) -> dict[str, str]:
    with Image.open(io.BytesIO(raw)) as image:
        image.load()
        return {str(k): v for k, v in image.info.items() if isinstance(v, str)}


def decoded_chunk(raw: bytes, name: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(base64.b64decode(text_chunks(raw)[name]))
    return value
