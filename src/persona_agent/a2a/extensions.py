"""A2A extensions that persona-agent declares on its cards."""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import AgentExtension

from persona_agent.chat.budget import CallBudget
from persona_agent.chat.events import Done
from persona_agent.llm.base import Usage

__all__ = [
    "CONVERSATION_EXTENSION_URI",
    "COST_EXTENSION_URI",
    "COST_KIND",
    "GREETING_EXTENSION_URI",
    "MEMORY_KIND",
    "USER_EXTENSION_URI",
    "conversation_extension",
    "cost_extension",
    "cost_payload",
    "greeting_extension",
    "integral_counts",
    "memory_payload",
    "tree_cost",
    "user_extension",
]

COST_EXTENSION_URI = "urn:persona-agent:extension:cost:v1"
"""The completed task's final message carries a DataPart with this payload:

``{"kind": "cost-v1", "usage": {"promptTokens", "completionTokens", "totalTokens"},
"durationMs", "model", "llmCalls", "toolCalls"}``, plus ``usage.cachedPromptTokens`` when
the model server read prompt tokens from its cache, ``usage.imageTokens`` when it says how
many of the prompt's were images, ``costUsd`` when the model has a
price (:mod:`persona_agent.observe.pricing`) and ``demoModel: true`` when the answer comes
from the embedded demo model (docs/local-model.md), for a client to label it as such.
The tokens, calls and price are the task's whole tree's: its own model calls and those
of every task started for it (consultations, a panel's members), :func:`tree_cost`. Every
field but ``model``, ``costUsd`` and ``demoModel`` is an integer (on the JSON wire too:
``a2a/sdk_fixes/numbers.py``).
"""
COST_KIND = "cost-v1"
_COUNTS = ("durationMs", "llmCalls", "toolCalls")
_USAGE_COUNTS = (
    "promptTokens",
    "completionTokens",
    "totalTokens",
    "cachedPromptTokens",
    "imageTokens",
)


def cost_extension() -> AgentExtension:
    return AgentExtension(
        uri=COST_EXTENSION_URI,
        description=(
            "The final message of a completed task carries a DataPart with token usage, "
            "duration and model (cost-v1)."
        ),
        required=False,
    )


GREETING_EXTENSION_URI = "urn:persona-agent:extension:greeting:v1"
"""The persona opens each new conversation with a greeting (a character card's
``first_mes``): ``params.greeting`` on the card, for a client to show before the first
message; the model sees it as its own first turn. ``params.alternateGreetings`` lists
the card's other greetings."""


def greeting_extension(greeting: str, alternates: list[str]) -> AgentExtension:
    """The card's greeting extension; texts with their macros already replaced."""
    return AgentExtension(
        uri=GREETING_EXTENSION_URI,
        description=(
            "Each new conversation opens with this greeting from the persona; show it "
            "before the first message."
        ),
        required=False,
        params={"greeting": greeting, "alternateGreetings": alternates},
    )


USER_EXTENSION_URI = "urn:persona-agent:extension:user:v1"
"""Who the user is: a message's metadata under this key, ``{"name": "Ann", "description":
"..."}`` (name 1 to 64 characters, description at most 2,000, optional), makes it the
conversation's user persona from that message on: ``{{user}}`` in the persona's prompt,
greeting and examples becomes the name, and the description is a section of the system
prompt (docs/a2a.md, docs/conversations.md). A malformed value fails the request with
InvalidParams (-32602; HTTP 400)."""


def user_extension() -> AgentExtension:
    """The card's user extension (every persona's)."""
    return AgentExtension(
        uri=USER_EXTENSION_URI,
        description=(
            "Tell the persona who the user is: message metadata "
            f'{{"{USER_EXTENSION_URI}": {{"name": "Ann", "description": "..."}}}} '
            "makes it the conversation's user persona ({{user}} is the name)."
        ),
        required=False,
    )


CONVERSATION_EXTENSION_URI = "urn:persona-agent:extension:conversation:v1"
"""Steering the conversation (docs/a2a.md, docs/conversations.md): a message's metadata
under this key, ``{"op": "regenerate"}`` or ``{"op": "continue"}`` with the context's
latest task in ``referenceTaskIds`` (the message's text is not read), answers that task's
answer again as a new alternative (the selected one from then on), or continues it;
``{"greeting": k}`` on a new context's first message opens the conversation with greeting
k (0: the card's first greeting, k: its k-th alternate greeting). A malformed value fails
the request with InvalidParams (-32602; HTTP 400); a well-formed one the conversation
cannot do (the task is not the latest, nothing to regenerate, no such greeting) fails the
task with a message saying why."""


def conversation_extension() -> AgentExtension:
    """The card's conversation extension (every persona's)."""
    return AgentExtension(
        uri=CONVERSATION_EXTENSION_URI,
        description=(
            "Steer the conversation: message metadata "
            f'{{"{CONVERSATION_EXTENSION_URI}": {{"op": "regenerate"}}}} (or "continue"), '
            "with the context's latest task in referenceTaskIds, answers that task's answer "
            'again as a new alternative (or continues it); {"greeting": k} on a new '
            "context's first message opens it with greeting k."
        ),
        required=False,
    )


MEMORY_KIND = "memory-v1"
"""The final message of an answer that memory took part in carries a DataPart
``{"kind": "memory-v1", "recalled": [...], "kept": [...], "forgotten": [...]}``: the
remembered items brought into the turn's prompt (each marked with who said it), the facts
the persona kept with its ``remember`` tool, and the texts its ``forget`` tool deleted; a
list that would be empty is left out (docs/memory.md)."""


def memory_payload(done: Done, changes: dict[str, list[str]]) -> dict[str, Any] | None:
    """The memory-v1 payload of an answer: what ``done`` recalled, and ``changes`` (the
    memory tools' ``kept`` and ``forgotten``); ``None`` when memory did nothing."""
    payload: dict[str, Any] = {"kind": MEMORY_KIND}
    if done.remembered:
        payload["recalled"] = list(done.remembered)
    for name in ("kept", "forgotten"):
        if changes.get(name):
            payload[name] = list(changes[name])
    return payload if len(payload) > 1 else None


def cost_payload(done: Done, tree: CallBudget) -> dict[str, Any]:
    """The cost-v1 payload of an answer; ``tree``: its task's budget node, whose counts,
    tokens and price cover every call made for the task (its consultations' too)."""
    payload = tree_cost(tree, done.duration_ms, model=done.model)
    if done.cost_usd is None:  # the answer's own model has no price
        payload.pop("costUsd", None)
    if done.demo_model:
        payload["demoModel"] = True
    return payload


def tree_cost(tree: CallBudget, duration_ms: int, *, model: str = "") -> dict[str, Any]:
    """The cost-v1 payload of a task's whole tree (its budget node): every model call's
    tokens and price, and the model and tool calls, of the task and of every task started
    for it (consultations; a panel's turns, picks and synthesis). ``model``: the tree's
    when all its calls used one, ``mixed`` when they used several (``model`` if none was
    made); ``costUsd`` when every call's model has a price."""
    models = sorted(tree.models)
    payload: dict[str, Any] = {
        "kind": COST_KIND,
        "usage": _usage(tree.usage),
        "durationMs": duration_ms,
        "model": models[0] if len(models) == 1 else "mixed" if models else model,
        "llmCalls": tree.model_calls,
        "toolCalls": tree.tool_calls,
    }
    if tree.cost_usd is not None:
        payload["costUsd"] = round(tree.cost_usd, 10)
    return payload


def _usage(usage: Usage) -> dict[str, int]:
    counts = {
        "promptTokens": usage.prompt_tokens,
        "completionTokens": usage.completion_tokens,
        "totalTokens": usage.total_tokens,
    }
    if usage.cached_prompt_tokens:
        counts["cachedPromptTokens"] = usage.cached_prompt_tokens
    if usage.image_tokens:
        counts["imageTokens"] = usage.image_tokens
    return counts


def integral_counts(payload: dict[str, Any]) -> bool:
    """Make, in place, the counts of a cost-v1 payload that a protobuf ``Struct`` turned
    into floats (``12.0``) integers again; whether any changed."""
    changed = False
    usage = payload.get("usage")
    for fields, names in ((payload, _COUNTS), (usage, _USAGE_COUNTS)):
        if not isinstance(fields, dict):
            continue
        for name in names:
            value = fields.get(name)
            if isinstance(value, float) and value.is_integer():
                fields[name] = int(value)
                changed = True
    return changed
