"""How a tool result becomes the text the model reads."""

from __future__ import annotations

import mcp.types as types

from persona_agent.tools.tool_specs import render_result


def result(*content: types.ContentBlock, structured: object = None, error: bool = False) -> str:
    return render_result(
        types.CallToolResult(content=list(content), structured_content=structured, is_error=error)
    )


def test_text_items_are_joined_by_newlines() -> None:
    assert result(types.TextContent(text="one"), types.TextContent(text="two")) == "one\ntwo"


def test_non_text_items_are_summarized() -> None:
    text = result(
        types.ImageContent(data="AAAA", mime_type="image/png"),
        types.AudioContent(data="AAAA", mime_type="audio/wav"),
        types.ResourceLink(name="report", uri="file:///tmp/report.pdf"),
        types.EmbeddedResource(
            resource=types.BlobResourceContents(
                uri="file:///tmp/x.bin", blob="AAAA", mime_type="application/x-thing"
            )
        ),
        types.EmbeddedResource(
            resource=types.TextResourceContents(uri="file:///tmp/notes.txt", text="the notes")
        ),
    )
    assert text.splitlines() == [
        "[image: image/png]",
        "[audio: audio/wav]",
        "[resource: file:///tmp/report.pdf]",
        "[resource: file:///tmp/x.bin (application/x-thing)]",
        "the notes",
    ]


def test_structured_content_is_json_when_there_is_no_text() -> None:
    assert result(structured={"temp": 21, "sky": "clear"}) == '{"temp": 21, "sky": "clear"}'
    assert result(types.TextContent(text="21 degrees"), structured={"temp": 21}) == "21 degrees"


def test_error_results_are_prefixed() -> None:
    assert result(types.TextContent(text="no such city"), error=True) == "Error: no such city"
    assert result(error=True) == "Error: the tool failed"


def test_empty_result_is_empty_text() -> None:
    assert result() == ""
