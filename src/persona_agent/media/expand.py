"""A prompt's messages as the model server takes them: the ``media`` of a stored user
message (:mod:`persona_agent.media.media_store`) becomes OpenAI ``image_url`` content parts (data
URLs) for a model that sees, a note for one that does not; no message sent keeps the
``media`` or ``files`` keys (the history's, not the API's). A prompt shows its newest
images only, as many as a message may have: the older are notes (a conversation of many
images would otherwise load them all for every turn)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from persona_agent.media.images import ImageInput
from persona_agent.media.media_store import MediaStore, StoredImage

__all__ = ["HISTORY_KEYS", "PROMPT_IMAGES", "expand_media", "image_note"]

HISTORY_KEYS = ("media", "files")
"""Keys of a stored message that are the hub's, never sent to a model server."""

PROMPT_IMAGES = 16
"""The most images a prompt shows, its newest (``PERSONA_AGENT_IMAGE_MAX_PER_MESSAGE``)."""

Message = dict[str, Any]


def image_note(entry: dict[str, Any], why: str) -> str:
    """What a model that is not shown an image reads in its place."""
    size = f", {entry.get('width')}×{entry.get('height')}" if entry.get("width") else ""
    return f"[image: {entry.get('name') or 'image'} ({entry.get('mediaType')}{size}): {why}]"


async def expand_media(
    messages: Sequence[Message],
    *,
    sees: bool,
    store: MediaStore | None,
    conversation: str,
    fresh: Sequence[ImageInput] = (),
    shown: int = PROMPT_IMAGES,
) -> list[Message]:
    """``messages`` for the model (see the module); ``fresh``: this turn's images, not
    stored yet; the history's are read from ``store`` (one query for the prompt);
    ``shown``: how many images, the newest, the model is shown (the older are notes)."""
    if not any(key in message for message in messages for key in HISTORY_KEYS):
        return list(messages)
    newest = _newest(messages, shown)
    found = {i.sha256: StoredImage(i.sha256, i.media_type, i.data) for i in fresh}
    if sees and store is not None:
        wanted = {
            str(entry.get("sha256"))
            for place, message in enumerate(messages)
            for index, entry in enumerate(message.get("media") or ())
            if (place, index) in newest and entry.get("sha256") not in found
        }
        found |= await store.load(conversation, wanted)
    note = f"not shown: a prompt shows its {shown} newest images"
    return [
        _for_model(message, sees, found, {i for p, i in newest if p == place}, note)
        for place, message in enumerate(messages)
    ]


def _newest(messages: Sequence[Message], shown: int) -> set[tuple[int, int]]:
    """The places (message, entry) of the prompt's ``shown`` newest images."""
    places = [
        (place, index)
        for place, message in enumerate(messages)
        for index, _entry in enumerate(message.get("media") or ())
    ]
    return set(places[-shown:]) if shown > 0 else set()


def _for_model(
    message: Message, sees: bool, found: dict[str, StoredImage], newest: set[int], note: str
) -> Message:
    if not any(key in message for key in HISTORY_KEYS):
        return message
    clean = {key: value for key, value in message.items() if key not in HISTORY_KEYS}
    media = message.get("media") or []
    if not media:
        return clean
    text = clean.get("content") if isinstance(clean.get("content"), str) else ""
    if not sees:
        notes = [image_note(entry, "this model does not see images") for entry in media]
        clean["content"] = "\n".join(filter(None, [text, *notes]))
        return clean
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for index, entry in enumerate(media):
        image = found.get(str(entry.get("sha256")))
        if index not in newest or image is None:
            why = note if index not in newest else "no longer stored"
            parts.append({"type": "text", "text": image_note(entry, why)})
            continue
        encoded = base64.b64encode(image.data).decode("ascii")
        url = f"data:{image.media_type};base64,{encoded}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    clean["content"] = parts
    return clean
