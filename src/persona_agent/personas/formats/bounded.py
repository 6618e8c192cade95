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


class _Reading:
    """One document read from libyaml's parser events: the bounds checked as they come, and
    the document built from them while ``building`` (else PyYAML's loader reads it)."""

    __slots__ = (
        "anchors",
        "building",
        "constructor",
        "documents",
        "limits",
        "result",
        "stack",
        "total",
    )

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.stack: list[_Frame] = []
        # An anchor's value, size and height; None while its collection is open.
        self.anchors: dict[str, tuple[Any, int, int] | None] = {}
        self.total = 0  # the expanded size of everything read
        self.building = True
        self.result: Any = None
        self.documents = 0
        self.constructor: StrictLoader | None = None

    def add(self, value: Any, size: int, height: int) -> None:
        """A value read whole (a scalar, a closed collection, an alias) into its parent."""
        stack = self.stack
        if not stack:
            self.result = value
            return
        frame = stack[-1]
        frame.size += size
        frame.height = max(frame.height, height + 1)
        if not self.building:
            return
        container = frame.value
        if isinstance(container, list):
            container.append(value)
        elif container is None:
            return
        elif frame.key is None:
            if type(value) is not str or value in container:
                self.building = False  # a key that is not a string, or given twice: PyYAML says
                return
            frame.key = value
        else:
            container[frame.key] = value
            frame.key = None

    def scalar(self, event: Any) -> None:
        size = len(event.value) + 1
        self.total += size
        if self.total > self.limits.max_bytes:
            raise _too_expanded(self.limits)
        tag = event.tag
        if tag is None or tag == "!":
            tag = _RESOLVER.resolve(yaml.ScalarNode, event.value, event.implicit)  # type: ignore[no-untyped-call]
        value: Any = event.value
        if self.building and tag != _STR_TAG:
            value = self._construct(tag, event)
        if event.anchor is not None:
            if event.anchor in self.anchors:
                self.building = False  # PyYAML's loader refuses an anchor given twice
            self.anchors[event.anchor] = (value, size, 1)
        self.add(value, size, 1)

    def _construct(self, tag: str, event: Any) -> Any:
        """A scalar of another tag than a string's, as PyYAML's constructor makes it (or its
        text, when PyYAML's own loader is left to read the document)."""
        if tag not in _SCALAR_TAGS:
            self.building = False  # a merge key, a collection's tag on a scalar, an unknown tag
            return event.value
        if self.constructor is None:
            self.constructor = StrictLoader("")
        try:
            return self.constructor.construct_object(yaml.ScalarNode(tag, event.value))
        except yaml.YAMLError:
            self.building = False  # PyYAML's own loader says where
            return event.value
        except _CONSTRUCTOR_ERRORS as error:
            raise _bad_value(tag, error, event.start_mark) from None

    def start(self, event: Any, is_map: bool) -> None:
        if len(self.stack) >= self.limits.max_depth:
            raise too_deep(self.limits)
        if event.tag is not None and event.tag not in ("!", _MAP_TAG if is_map else _SEQ_TAG):
            self.building = False
        if event.anchor is not None:
            if event.anchor in self.anchors:
                self.building = False
            self.anchors[event.anchor] = None
        self.stack.append(_Frame({} if is_map else [], event.anchor))
        self.total += 1

    def end(self) -> None:
        frame = self.stack.pop()
        if frame.anchor is not None:
            self.anchors[frame.anchor] = (frame.value, frame.size, frame.height)
        self.add(frame.value, frame.size, frame.height)

    def alias(self, event: Any) -> None:
        anchored = self.anchors.get(event.anchor)
        if anchored is None:
            # Unknown (PyYAML says so), or a node that contains itself.
            if event.anchor in self.anchors:
                raise LimitExceeded(f"alias *{event.anchor} refers to a node that contains it")
            self.building = False
            return
        value, size, height = anchored
        self.total += size
        if self.total > self.limits.max_bytes:
            raise _too_expanded(self.limits)
        if len(self.stack) + height > self.limits.max_depth:
            raise too_deep(self.limits)
        self.add(value, size, height)


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
    reading = _Reading(limits)
    event: Any
    for event in yaml.parse(text, Loader=_SafeLoader):
        kind = type(event)
        if kind is yaml.ScalarEvent:
            reading.scalar(event)
        elif kind is yaml.MappingStartEvent:
            reading.start(event, is_map=True)
        elif kind is yaml.SequenceStartEvent:
            reading.start(event, is_map=False)
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            reading.end()
        elif kind is yaml.AliasEvent:
            reading.alias(event)
        elif kind is yaml.DocumentStartEvent:
            reading.documents += 1
            if reading.documents > 1:
                reading.building = False  # PyYAML's loader says "expected a single document"
                break
    if reading.building:
        return reading.result
    return _load_strictly(text)


def _load_strictly(text: str) -> Any:
    """The document of ``text`` as PyYAML's strict loader reads it (known to be in bounds)."""
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
