"""Which form of an agent card a client gets: both protocol versions' fields, or 1.0's alone.

The SDK serves a card as its 1.0 JSON merged with the 0.3 card's fields (``url``,
``preferredTransport``, ``protocolVersion``, ``additionalInterfaces``, and 0.3's shapes
beside 1.0's inside ``securitySchemes`` and the skills): a 0.3 client reads what it
knows, and the SDK's 1.0 client ignores the rest (it parses with unknown fields
ignored). A strict 1.0 reader does not: the JSON Schema generated from the 1.0 proto
refuses properties it does not define.

A card is fetched before any version is agreed, and a 0.3 client never sends the
``A2A-Version`` header (0.3 has none), so the merged form stays the default: it is the
only one both generations can read. A client that says ``A2A-Version: 1.x`` on the card
request gets the card as 1.0 defines it, with nothing else (:func:`card_form`), and
every card answer says ``Vary: A2A-Version`` so a cache keeps the two apart.
Signatures are unchanged: they sign the canonical 1.0 card, which both forms carry.
"""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.constants import VERSION_HEADER
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.requests import Request

__all__ = ["VARY", "card_form", "strict_card", "wants_strict_card"]

VARY = VERSION_HEADER
"""The request header a card answer varies by."""


def wants_strict_card(request: Request) -> bool:
    """Whether the request asks for a 1.x card (``A2A-Version: 1.0``, ``1``, ``1.0.1``)."""
    version = request.headers.get(VERSION_HEADER, "").strip()
    return version.split(".", 1)[0] == "1"


def strict_card(card: dict[str, Any]) -> dict[str, Any]:
    """The card with the fields of 1.0's ``AgentCard`` alone (the 0.3 compatibility
    fields the SDK merges in dropped), as 1.0's JSON writes it."""
    return MessageToDict(ParseDict(card, AgentCard(), ignore_unknown_fields=True))


def card_form(request: Request, card: dict[str, Any], etag: str) -> tuple[dict[str, Any], str]:
    """The card and its entity tag in the form ``request`` asks for: the strict 1.0 form
    has an ETag of its own (the merged card's, marked ``-1.0``)."""
    if not wants_strict_card(request):
        return card, etag
    return strict_card(card), f'{etag.removesuffix(chr(34))}-1.0"'
