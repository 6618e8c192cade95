"""Persona file text to data, bounded: size, nesting and alias expansion are checked as the
text is read, before anything is built from it.

A persona file is untrusted input (an upload, a file dropped in the watched
directory). Parsers are not safe on their own against it: libyaml's composer
recurses in C (tens of thousands of nested brackets crash the process), PyYAML's
constructor and ``json`` recurse in Python (``RecursionError``), and YAML aliases
let a 100 KB file stand for hundreds of megabytes (the "billion laughs"). So YAML
is read here from libyaml's *parser events*, which it produces with a stack of its
own, counting depth and expanded size as they come; a document within the
:class:`Limits` is built from the same events, and only a document with what this
builder leaves to PyYAML (tags, merge keys, keys that are not strings, a key given
twice) is then loaded by PyYAML's strict loader, knowing it is small and shallow.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

import yaml

from persona_agent.security.limits import (
    DEFAULT_LIMITS,
    LimitExceeded,
    Limits,
    check_depth,
    too_deep,
    too_large,
)

__all__ = ["load_json", "load_yaml"]


def _too_expanded(limits: Limits) -> LimitExceeded:
    return LimitExceeded(
        f"with its aliases expanded, the content is larger than {limits.max_bytes} bytes "
        "(PERSONA_AGENT_MAX_PERSONA_BYTES)"
    )


# libyaml's parser when PyYAML was built with it (it is, in its wheels).
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "binary", "timestamp")
)
"""Tags of the scalars this builder constructs itself (besides strings)."""


class StrictLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """A safe loader that refuses a key given twice in one mapping (rather than
    silently keeping the last value)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[Hashable] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        mapping: dict[Hashable, Any] = super().construct_mapping(node, deep=deep)
        return mapping


_RESOLVER = yaml.resolver.Resolver()
_PLAIN = (True, False)


class _Frame:
    """A list or mapping being read: what is built so far, its size, its height."""

    __slots__ = ("anchor", "height", "key", "size", "value")

    def __init__(self, value: list[Any] | dict[str, Any] | None, anchor: str | None) -> None:
        self.value = value
        self.anchor = anchor
        self.key: str | None = None  # a mapping's key waiting for its value
        self.size = 1
        self.height = 1


class _Unusual(Exception):
    """Something this builder leaves to PyYAML's own loader."""


def load_yaml(text: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The one YAML document in ``text``, as PyYAML's safe loader reads it, refusing a key
    given twice.

    Raises:
        LimitExceeded: the document is over ``limits`` (checked before anything larger
            than the limits is built).
        yaml.YAMLError: the text is not one valid YAML document.
    """
    if len(text) > limits.max_bytes:  # characters: at least as many bytes
        raise too_large(len(text.encode("utf-8", "surrogatepass")), limits)
    stack: list[_Frame] = []
    anchors: dict[str, tuple[Any, int, int] | None] = {}  # value, size, height; None: open
    total = 0  # the expanded size of everything read
    building = True
    result: Any = None
    documents = 0
    constructor: StrictLoader | None = None

    def add(value: Any, size: int, height: int) -> None:
        nonlocal result, building
        if not stack:
            result = value
            return
        frame = stack[-1]
        frame.size += size
        frame.height = max(frame.height, height + 1)
        if not building:
            return
        container = frame.value
        if isinstance(container, list):
            container.append(value)
        elif container is None:
            return
        elif frame.key is None:
            if type(value) is not str or value in container:
                building = False  # a key that is not a string, or given twice: PyYAML says
                return
            frame.key = value
        else:
            container[frame.key] = value
            frame.key = None

    event: Any
    for event in yaml.parse(text, Loader=_SafeLoader):
        kind = type(event)
        if kind is yaml.ScalarEvent:
            size = len(event.value) + 1
            total += size
            if total > limits.max_bytes:
                raise _too_expanded(limits)
            tag = event.tag
            if tag is None or tag == "!":
                tag = _RESOLVER.resolve(yaml.ScalarNode, event.value, event.implicit)  # type: ignore[no-untyped-call]
            value: Any = event.value
            if building and tag != _STR_TAG:
                if tag not in _SCALAR_TAGS:
                    building = False  # a merge key, a collection's tag on a scalar, an unknown tag
                else:
                    if constructor is None:
                        constructor = StrictLoader("")
                    try:
                        value = constructor.construct_object(yaml.ScalarNode(tag, event.value))
                    except yaml.YAMLError:
                        building = False  # PyYAML's own loader says where
                    except _CONSTRUCTOR_ERRORS as error:
                        raise _bad_value(tag, error, event.start_mark) from None
            if event.anchor is not None:
                if event.anchor in anchors:
                    building = False  # PyYAML's loader refuses an anchor given twice
                anchors[event.anchor] = (value, size, 1)
            add(value, size, 1)
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            if len(stack) >= limits.max_depth:
                raise too_deep(limits)
            is_map = kind is yaml.MappingStartEvent
            if event.tag is not None and event.tag not in ("!", _MAP_TAG if is_map else _SEQ_TAG):
                building = False
            if event.anchor is not None:
                if event.anchor in anchors:
                    building = False
                anchors[event.anchor] = None
            stack.append(_Frame({} if is_map else [], event.anchor))
            total += 1
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            frame = stack.pop()
            if frame.anchor is not None:
                anchors[frame.anchor] = (frame.value, frame.size, frame.height)
            add(frame.value, frame.size, frame.height)
        elif kind is yaml.AliasEvent:
            anchored = anchors.get(event.anchor)
            if anchored is None:
                # Unknown (PyYAML says so), or a node that contains itself.
                if event.anchor in anchors:
                    raise LimitExceeded(f"alias *{event.anchor} refers to a node that contains it")
                building = False
                continue
            value, size, height = anchored
            total += size
            if total > limits.max_bytes:
                raise _too_expanded(limits)
            if len(stack) + height > limits.max_depth:
                raise too_deep(limits)
            add(value, size, height)
        elif kind is yaml.DocumentStartEvent:
            documents += 1
            if documents > 1:
                building = False  # PyYAML's loader says "expected a single document"
                break
    if building:
        return result
    loader = StrictLoader(text)
    try:
        return loader.get_single_data()
    except _CONSTRUCTOR_ERRORS as error:
        raise _bad_value(None, error, None) from None
    finally:
        loader.dispose()


_CONSTRUCTOR_ERRORS = (ValueError, TypeError, LookupError, AttributeError, ArithmeticError)
"""What PyYAML's constructors raise on a value their tag cannot take, besides
``YAMLError``: ``!!bool maybe`` (KeyError), ``!!timestamp x`` (AttributeError),
``2001-13-45`` (ValueError), a 5000-digit integer (ValueError)."""


def _bad_value(tag: str | None, error: Exception, mark: Any) -> yaml.YAMLError:
    """The YAML error for a scalar that its tag cannot take (``tag`` and ``mark`` when known)."""
    reason = None
    if isinstance(error, (ValueError, ArithmeticError)):  # may say what is wrong with the value
        reason = str(error).split("; use sys.set_int_max_str_digits()")[0]
    if tag is None:
        problem = "a value does not fit its tag" + (f" ({reason})" if reason else "")
    else:
        kind = tag.removeprefix("tag:yaml.org,2002:")
        problem = f"invalid !!{kind} value: {reason or 'the text is not a value of this type'}"
    return yaml.constructor.ConstructorError(None, None, problem, mark)


def load_json(text: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The JSON value in ``text``, refusing a key given twice.

    Raises:
        LimitExceeded: the text or its nesting is over ``limits``.
        json.JSONDecodeError: the text is not JSON.
        ValueError: a key is given twice, or ``NaN``/``Infinity`` (which JSON has not).
    """
    if len(text) > limits.max_bytes:
        raise too_large(len(text.encode("utf-8", "surrogatepass")), limits)
    try:
        data = json.loads(
            text, object_pairs_hook=_reject_duplicate_keys, parse_constant=_reject_constant
        )
    except RecursionError:
        raise too_deep(limits) from None
    check_depth(data, limits)
    return data


def _reject_constant(constant: str) -> None:
    raise ValueError(f"{constant} is not a JSON value (RFC 8259)")


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result
