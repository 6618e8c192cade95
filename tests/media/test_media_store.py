"""The conversations' images on SQLite and PostgreSQL: stored once by hash, read back,
deleted with their conversation (delete, a caller forgotten, a persona deleted) and by
retention once their conversation has no message left."""

from __future__ import annotations

import time

from sqlalchemy import text

from persona_agent.chat.history import ConversationHistory
from persona_agent.conversations.branches import Branches
from persona_agent.db import GroupCommitWriter
from persona_agent.media.images import ImageInput, ImageLimits, prepare_image
from persona_agent.media.media_store import MediaStore
from persona_agent.retention import DOCUMENT_GRACE_SECONDS, Retention, RetentionLimits
from tests.media.images import image_bytes


def an_image(fmt: str = "PNG", size: tuple[int, int] = (40, 30)) -> ImageInput:
    return prepare_image(image_bytes(fmt, size), f"a.{fmt.lower()}", ImageLimits(), "Part 0")


async def count(writer: GroupCommitWriter) -> int:
    rows = await writer.fetch(text("SELECT count(*) FROM pa_media"))
    return int(rows[0][0])


async def test_an_image_is_stored_once_a_conversation_and_read_back(
    writer: GroupCommitWriter,
) -> None:
    store = MediaStore(writer)
    png, jpeg = an_image(), an_image("JPEG")
    await store.keep("ada:c1", [png, png])
    await store.keep("ada:c1", [png, jpeg])
    await store.keep("ada:c2", [png])
    assert await count(writer) == 3
    found = await store.load("ada:c1", [png.sha256, jpeg.sha256, "f" * 64])
    assert set(found) == {png.sha256, jpeg.sha256}
    assert found[jpeg.sha256].data == jpeg.data
    assert found[jpeg.sha256].media_type == "image/jpeg"
    assert await store.load("ada:c3", [png.sha256]) == {}


async def test_images_go_with_their_conversation(writer: GroupCommitWriter) -> None:
    store, history = MediaStore(writer), ConversationHistory(writer)
    branches = Branches(writer, history)
    image = an_image()
    said = [{"role": "user", "content": "hi", "media": [image.meta()]}]
    for key in ("ada:c1", "ada:@key%3Aann:c2", "bob:c3"):
        await history.append(key, said)
        await store.keep(key, [image])
    assert await branches.delete_conversation("ada:c1")
    assert await count(writer) == 2
    assert await history.forget_caller("@key%3Aann:") == (1, 1)
    assert await count(writer) == 1
    await history.forget_persona("bob")
    assert await count(writer) == 0


async def test_retention_deletes_the_images_of_conversations_without_messages(
    writer: GroupCommitWriter,
) -> None:
    store, history = MediaStore(writer), ConversationHistory(writer)
    image = an_image()
    await history.append("ada:kept", [{"role": "user", "content": "hi"}])
    for key in ("ada:kept", "ada:orphan", "ada:young"):
        await store.keep(key, [image])
    old = int((time.time() - DOCUMENT_GRACE_SECONDS - 60) * 1000)
    aged = text("UPDATE pa_media SET created_ms = :old WHERE conversation <> 'ada:young'")
    await writer.write(aged, [{"old": old}])
    await Retention(writer, RetentionLimits()).sweep()
    rows = await writer.fetch(text("SELECT conversation FROM pa_media ORDER BY conversation"))
    assert [row[0] for row in rows] == ["ada:kept", "ada:young"]
