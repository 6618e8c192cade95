"""What the engine does with images in a turn: keeps the message's images with the
conversation, and shows the prompt's images to a model that sees (a note to one that does
not)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persona_agent.media.expand import PROMPT_IMAGES, expand_media
from persona_agent.media.images import ImageInput
from persona_agent.media.media_store import MediaStore
from persona_agent.media.vision import Vision
from persona_agent.personas.model import Persona

__all__ = ["NO_IMAGES", "TurnImages"]


class TurnImages:
    """``vision``: which personas see; ``store``: where the conversations' images are
    (none: images are neither kept nor shown, only noted); ``shown``: the most images a
    prompt shows, its newest."""

    def __init__(
        self,
        vision: Vision | None = None,
        store: MediaStore | None = None,
        shown: int = PROMPT_IMAGES,
    ) -> None:
        self.vision = vision or Vision()
        self.store = store
        self.shown = shown

    async def for_model(
        self,
        persona: Persona,
        conversation: str,
        messages: Sequence[dict[str, Any]],
        fresh: Sequence[ImageInput] = (),
    ) -> list[dict[str, Any]]:
        """The prompt's messages as the model is sent them (:func:`expand_media`)."""
        return await expand_media(
            messages,
            sees=self.vision.sees(persona),
            store=self.store,
            conversation=conversation,
            fresh=fresh,
            shown=self.shown,
        )

    async def keep(self, conversation: str, images: Sequence[ImageInput]) -> None:
        """Store the turn's images with the conversation (its lock held)."""
        if self.store is not None and images:
            await self.store.keep(conversation, images)


NO_IMAGES = TurnImages()
"""Nobody sees, nothing is stored."""
