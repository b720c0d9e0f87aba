"""Pure helpers for the text-tool-call filter (:mod:`gateway.loop.tooltext.filter`).

This module holds the parts of SPEC 4a that do not depend on streaming: what the filter knows
about the offered tools, the incremental scanner that finds where one JSON value ends, turning a
decoded JSON value into calls (R7, R8) and typing an XML parameter value by its schema (R5, R6).
Everything here is pure; nothing keeps a reference to the filter's buffer between calls.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

# R5: a function or parameter name is non-empty and has no whitespace or <>{}"'=/.
NAME_RE: Final = re.compile(r"""[^\s<>{}"'=/]*""")
_NAME_FULL_RE: Final = re.compile(r"""[^\s<>{}"'=/]+""")

# R6: "integer -> int when it matches -?digits" (ASCII digits: str.isdigit accepts others).
_INT_RE: Final = re.compile(r"-?[0-9]+")
_NUMBER_RE: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")

# Scanner stops. Outside strings, any character that cannot appear in JSON outside a string
# (such as '<') is a stop too, so a broken call fails where it breaks instead of swallowing the
# rest of the answer while waiting for a closing brace that never comes.
_OUT_RE: Final = re.compile(r"[^ \t\n\r:,0-9.+\-eEtrufalsn]")
_OUT_KEYS_RE: Final = re.compile(r"[^ \t\n\r:0-9.+\-eEtrufalsn]")  # also stops at ','
_IN_RE: Final = re.compile(r'["\\\x00-\x1f]')

# R7: the only keys a call object may have (both shapes together; checked exactly later).
_CALL_KEYS: Final = frozenset({"name", "arguments", "parameters", "type", "id", "function"})
_FLAT_KEYS: Final = frozenset({"name", "arguments", "parameters", "type", "id"})
_NESTED_KEYS: Final = frozenset({"type", "function", "id"})
_INNER_KEYS: Final = frozenset({"name", "arguments", "parameters"})

INVALID: Final = object()
"""Marker for text that :func:`decode_json` could not decode."""

SCAN_NEED: Final = -1
"""`JsonScan.scan` result: the value is not finished in the text seen so far."""
SCAN_FAIL: Final = -2
"""`JsonScan.scan` result: the text is not JSON (or, with key checking, not a call object)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TextToolCall:
    """One tool call found in the answer text.

    Attributes:
        name: The function name as written (not validated: SPEC 4a R13).
        arguments: The argument object (typed by schema for the XML form, R6).
    """

    name: str
    arguments: dict[str, Any]


class ToolIndex:
    """What the filter needs from the OpenAI ``tools`` list offered in the round.

    Attributes:
        names: Names of the offered functions.
        properties: For each offered name, its parameters' JSON schemas by parameter name.
        bare_openers: The ``<function=NAME>`` openers (R2) for offered names that R5 allows.
    """

    __slots__ = ("bare_openers", "names", "properties")

    def __init__(self, tools: Sequence[Mapping[str, Any]] | None) -> None:
        """Index the offered tools, ignoring entries that are not function tools.

        Args:
            tools: The OpenAI ``tools`` list (``{"type": "function", "function": {...}}``).
        """
        names: list[str] = []
        properties: dict[str, dict[str, Any]] = {}
        entries: Sequence[object] = tools or ()
        for tool in entries:
            if not isinstance(tool, Mapping):
                continue
            fn = tool.get("function", tool)
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                continue
            name: str = fn["name"]
            params = fn.get("parameters")
            props = params.get("properties") if isinstance(params, Mapping) else None
            names.append(name)
            properties[name] = dict(props) if isinstance(props, Mapping) else {}
        self.names: frozenset[str] = frozenset(names)
        self.properties = properties
        self.bare_openers: tuple[str, ...] = tuple(
            f"<function={n}>" for n in dict.fromkeys(names) if _NAME_FULL_RE.fullmatch(n)
        )


class JsonScan:
    """Finds, incrementally, where one JSON object or array ends.

    The scanner tracks strings and bracket nesting only; the finished text is then decoded by
    :func:`json.loads`, which does the real validation. It resumes where it stopped, so feeding
    a long value in small pieces costs linear time.

    With ``keys`` set (untagged calls, R8) it also rejects an object as soon as a key appears
    that no call object has (at the top level, and in the object under a top-level
    ``function`` key), so a JSON answer is released early instead of being held to its end
    (R3). With ``names`` set too, it rejects the object as soon as a ``name`` value there is
    complete and is not one of ``names`` (R8 accepts only offered tools), or is not a string.
    """

    __slots__ = (
        "_expect_key",
        "_in_str",
        "_inner",
        "_key",
        "_key_start",
        "_keys",
        "_names",
        "_stack",
        "_val_start",
        "pos",
        "start",
    )

    def __init__(
        self,
        start: int,
        opener: str,
        *,
        keys: bool = False,
        names: frozenset[str] | None = None,
    ) -> None:
        """Start scanning at the opening bracket.

        Args:
            start: Index of the opening ``{`` or ``[`` in the buffer.
            opener: That character.
            keys: Whether to reject objects with keys no call object has.
            names: With ``keys``: the only ``name`` values a call object may have.
        """
        self.start = start
        self.pos = start + 1
        self._stack = [opener]
        self._in_str = False
        self._keys = keys and opener == "{"
        self._names = names if self._keys else None
        # Key checking follows one object at a time: the top-level one, or (``_inner``) the
        # object that is the value of its ``function`` key.
        self._inner = False
        self._expect_key = self._keys
        self._key: str | None = None  # the key whose value comes next in that object
        self._key_start = -1  # where the key string being read started
        self._val_start = -1  # where the ``name`` value string being read started

    def _checked(self, depth: int) -> bool:
        """Whether the container at ``depth`` (1 = top level) has its keys checked."""
        return self._keys and (depth == 1 or (depth == 2 and self._inner))

    def scan(self, buf: str) -> int:
        """Scan on from where the last call stopped.

        Args:
            buf: The filter's buffer; indices are positions in it.

        Returns:
            The index just past the value's end, ``SCAN_NEED`` or ``SCAN_FAIL`` (then
            ``self.pos`` is where the text stopped being JSON).
        """
        pos, n, stack = self.pos, len(buf), self._stack
        while True:
            if self._in_str:
                m = _IN_RE.search(buf, pos)
                if m is None:
                    self.pos = n
                    return SCAN_NEED
                j = m.start()
                c = buf[j]
                if c == "\\":
                    if j + 1 >= n:
                        self.pos = j
                        return SCAN_NEED
                    pos = j + 2
                    continue
                if c != '"':  # a raw control character (newline...) is never inside a string
                    self.pos = j
                    return SCAN_FAIL
                self._in_str = False
                pos = j + 1
                if self._key_start >= 0:
                    key = decode_json(buf[self._key_start : pos])
                    self._key_start = -1
                    allowed = _CALL_KEYS if len(stack) == 1 else _INNER_KEYS
                    if key not in allowed:
                        self.pos = pos
                        return SCAN_FAIL
                    self._key = key if isinstance(key, str) else None
                elif self._val_start >= 0:
                    name = decode_json(buf[self._val_start : pos])
                    self._val_start = -1
                    assert self._names is not None
                    if name not in self._names:
                        self.pos = pos
                        return SCAN_FAIL
                continue
            checked = self._checked(len(stack))
            m = (_OUT_KEYS_RE if checked else _OUT_RE).search(buf, pos)
            if m is None:
                self.pos = n
                return SCAN_NEED
            j = m.start()
            c = buf[j]
            pos = j + 1
            # The value of a checked ``name`` comes next: anything but a string is no call (R7).
            name_next = checked and self._names is not None and self._key == "name"
            if c == '"':
                self._in_str = True
                if checked:
                    if self._expect_key:
                        self._key_start = j
                        self._expect_key = False
                    elif name_next:
                        self._val_start = j
                    self._key = None
            elif c in "{[":
                if name_next:
                    self.pos = j
                    return SCAN_FAIL
                if len(stack) == 1:
                    self._inner = c == "{" and self._key == "function"
                    self._expect_key = self._inner
                stack.append(c)
                self._key = None
            elif c in "}]":
                if (stack[-1] == "{") != (c == "}"):
                    self.pos = j
                    return SCAN_FAIL
                stack.pop()
                if not stack:
                    self.pos = pos
                    return pos
                self._expect_key = False  # a checked object, if any, wants ',' or its end
                self._key = None
            elif c == ",":  # only seen in a checked object
                if name_next:
                    self.pos = j
                    return SCAN_FAIL
                self._expect_key = True
                self._key = None
            else:
                self.pos = j
                return SCAN_FAIL


def decode_json(text: str) -> object:
    """Decode a scanned JSON value, or return :data:`INVALID` when it is not JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return INVALID


def _arguments(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The argument object of a call object, or None when it has none or two (R7)."""
    if ("arguments" in obj) == ("parameters" in obj):
        return None
    args = obj["arguments"] if "arguments" in obj else obj["parameters"]
    if isinstance(args, str):
        args = decode_json(args)
    return args if isinstance(args, dict) else None


def call_from_object(obj: object) -> TextToolCall | None:
    """Turn one decoded call object into a call (R7), or None when it is not one.

    Accepted shapes: ``{name, arguments|parameters [, type, id]}`` and
    ``{type: "function", function: {name, arguments|parameters} [, id]}``. A ``type``, when
    present, must be ``"function"``; ``arguments`` may be a string holding a JSON object.
    """
    if not isinstance(obj, dict):
        return None
    if obj.get("type", "function") != "function":
        return None
    if "function" in obj:
        if not obj.keys() <= _NESTED_KEYS:
            return None
        inner = obj["function"]
        if not isinstance(inner, dict) or not inner.keys() <= _INNER_KEYS:
            return None
        obj = inner
    elif not obj.keys() <= _FLAT_KEYS:
        return None
    name = obj.get("name")
    args = _arguments(obj)
    if not isinstance(name, str) or not name or args is None:
        return None
    return TextToolCall(name, args)


def calls_from_wrapped(value: object) -> list[TextToolCall] | None:
    """Calls from the JSON inside ``<tool_call>``: one call object or a non-empty array (R7)."""
    items = value if isinstance(value, list) else [value]
    calls = [call_from_object(item) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def strip_one_lf(value: str) -> str:
    """Drop exactly one leading and one trailing LF or CRLF (R5)."""
    if value.startswith("\r\n"):
        value = value[2:]
    elif value.startswith("\n"):
        value = value[1:]
    if value.endswith("\r\n"):
        value = value[:-2]
    elif value.endswith("\n"):
        value = value[:-1]
    return value


def _convert(kind: str, raw: str) -> tuple[bool, Any]:
    """Convert ``raw`` to one JSON-schema type; ``(False, None)`` when it does not fit."""
    text = raw.strip()
    if kind == "integer" and _INT_RE.fullmatch(text):
        try:
            return True, int(text)
        except ValueError:  # past Python's limit on digits in int(): keep it raw
            return False, None
    if kind == "number" and _NUMBER_RE.fullmatch(text):
        value = decode_json(text)
        return value is not INVALID, value
    if kind == "boolean" and text.lower() in ("true", "false"):
        return True, text.lower() == "true"
    if kind == "null" and text == "null":
        return True, None
    if kind in ("array", "object"):
        value = decode_json(text)
        if isinstance(value, list if kind == "array" else dict):
            return True, value
    return False, None


def type_value(raw: str, schema: object) -> Any:
    """Type one XML parameter value by its schema (R6).

    Args:
        raw: The value after :func:`strip_one_lf`.
        schema: The parameter's JSON schema, or None for an unknown tool or parameter.

    Returns:
        The typed value, or ``raw`` when the schema says string, says nothing usable, or the
        value does not fit the type. With a list of types the first that fits wins.
    """
    if not isinstance(schema, Mapping):
        return raw
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
    for k in kinds:
        if k == "string":
            return raw
        if isinstance(k, str):
            ok, value = _convert(k, raw)
            if ok:
                return value
    return raw
