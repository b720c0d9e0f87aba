"""Incremental parsers for other model families' call forms (SPEC 4a R14-R19).

For :mod:`gateway.loop.tooltext.filter`.

Each scanner reads one block (or one function of a block) from the filter's buffer and resumes
where it stopped on each call, so a long block fed in small chunks costs linear time. Like
:class:`~gateway.loop.tooltext.xml.XmlFunctionScan` they decide and the filter acts: ``NEED`` (more
text), ``DONE`` (calls; ``end`` is past the block), ``FAIL`` (malformed at ``pos``) or ``PROSE``
(the text was never a block: released as text).

* :class:`GlmScan`: the body of ``<tool_call>`` in the GLM form (R14), from the name on::

      <tool_call>NAME
      <arg_key>K</arg_key>
      <arg_value>V</arg_value>
      </tool_call>

* :class:`InvokeScan`: one MiniMax-M2 ``<invoke name="NAME">`` function (R16), after its
  ``<invoke name="``::

      <minimax:tool_call>
      <invoke name="NAME">
      <parameter name="P">V</parameter>
      </invoke>
      </minimax:tool_call>

* :class:`PyListScan`: a pythonic list ``[NAME(ARG=VALUE, ...), ...]`` (R19), from its ``[``.
* :func:`read_name_part`: Mistral's ``NAME`` (R17) before ``[ARGS]`` or its JSON object.

Values of the XML-like forms (GLM, MiniMax) lose one leading and one trailing LF (R5) and are
typed by the offered tool's schema (R6); pythonic values are Python literals, taken as written.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from collections.abc import Mapping
from typing import Any, Final

from gateway.loop.tooltext.parse import TextToolCall, strip_one_lf, type_value
from gateway.loop.tooltext.xml import (
    DONE,
    END_PARAMETER,
    END_TOOL_CALL,
    FAIL,
    NEED,
    NEED_TOKEN,
    NON_WS,
    PROSE,
    match_at,
)

# R14 GLM (inside <tool_call>).
ARG_KEY: Final = "<arg_key>"
END_ARG_KEY: Final = "</arg_key>"
ARG_VALUE: Final = "<arg_value>"
END_ARG_VALUE: Final = "</arg_value>"
# R15 Seed-OSS.
SEED_TOOL_CALL: Final = "<seed:tool_call>"
END_SEED_TOOL_CALL: Final = "</seed:tool_call>"
# R16 MiniMax-M2.
MINIMAX_TOOL_CALL: Final = "<minimax:tool_call>"
END_MINIMAX_TOOL_CALL: Final = "</minimax:tool_call>"
INVOKE: Final = '<invoke name="'
END_INVOKE: Final = "</invoke>"
PARAMETER_NAME: Final = '<parameter name="'
PARAMETER_SP: Final = "<parameter "  # what ends a value after </parameter> (R16)
# R17 Mistral.
TOOL_CALLS: Final = "[TOOL_CALLS]"
ARGS: Final = "[ARGS]"
# R18 Llama 3.1, R19 Llama 4.
PYTHON_TAG: Final = "<|python_tag|>"
PYTHON_START: Final = "<|python_start|>"
PYTHON_END: Final = "<|python_end|>"

# A GLM name runs to whitespace or '<' (it must then be an offered tool).
_GLM_NAME: Final = re.compile(r"[^\s<]*")
# A quoted MiniMax name or parameter: non-empty, no quote, angle bracket or line break.
_QUOTED: Final = re.compile(r'[^"<>\r\n]*')
_SPACES: Final = re.compile(r"[ \t]*")
# Mistral tool names (its API allows [a-zA-Z0-9_-]).
MISTRAL_NAME: Final = re.compile(r"[\w\-]*")
# Pythonic names and keyword arguments.
_PY_NAME: Final = re.compile(r"[\w.\-]*")
_PY_ARG: Final = re.compile(r"\w*")
# Outside strings a Python literal holds only these (and brackets, quotes, commas): anything
# else stops the value, so a broken call fails where it breaks instead of holding the answer.
_PY_OUT: Final = re.compile(r"[^\w \t\r\n.+\-:]")
_PY_STR_STOP: Final = {
    "'": re.compile(r"[\\\n']"),
    '"': re.compile(r'[\\\n"]'),
    "'''": re.compile(r"[\\']"),
    '"""': re.compile(r'[\\"]'),
}
_PY_CLOSE: Final = {")": "(", "]": "[", "}": "{"}


def python_literal(text: str) -> tuple[bool, Any]:
    """A pythonic argument value (R19): a Python literal of JSON's kinds, or ``(False, None)``.

    Strings, numbers (finite), ``True``/``False``/``None``, lists and dicts with string keys;
    tuples, sets, bytes and complex numbers have no JSON counterpart and are refused.
    """
    with warnings.catch_warnings():
        # An invalid escape such as '\d' warns (and is kept as written, like Python does).
        warnings.simplefilter("ignore")
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False, None
    return (True, value) if _json_like(value) else (False, None)


def _json_like(value: object) -> bool:
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_json_like(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_like(v) for k, v in value.items())
    return False


def _tag_cut(buf: str, j: int, tokens: tuple[str, ...]) -> bool:
    """Whether the stream ended inside one of ``tokens`` at ``j`` (R11: cut short)."""
    rest = buf[j:]
    return any(t.startswith(rest) for t in tokens)


# GlmScan states.
_G_NAME, _G_AFTER_NAME, _G_KEY, _G_BETWEEN, _G_VALUE, _G_NEXT = range(6)


class GlmScan:
    """Reads a GLM-form call from the first non-space character after ``<tool_call>`` (R14).

    The body is prose (``PROSE``, released like R4) unless it is an offered tool's name
    followed, after optional whitespace, by ``<arg_key>`` or ``</tool_call>``; from there on it
    is a block (``committed``). The closing ``</tool_call>`` is optional once a pair is complete,
    as it is after R5's ``</function>``.

    Attributes:
        pos: The scan position; after ``FAIL``, where the text stopped fitting the form.
        committed: Whether the text is known to be a call block.
        call: After ``DONE``, the call.
        end: After ``DONE``, the index just past the block.
    """

    __slots__ = (
        "_after",
        "_args",
        "_key",
        "_kstart",
        "_name",
        "_names",
        "_nstart",
        "_properties",
        "_state",
        "_vscan",
        "_vstart",
        "call",
        "committed",
        "end",
        "pos",
    )

    def __init__(
        self, start: int, names: frozenset[str], properties: Mapping[str, dict[str, Any]]
    ) -> None:
        """Start at the body's first non-space character.

        Args:
            start: Its index in the buffer.
            names: The offered tools' names.
            properties: Parameter schemas by tool name.
        """
        self._names = names
        self._properties = properties
        self.pos = self._nstart = start
        self._state = _G_NAME
        self.committed = False
        self._name = ""
        self._args: dict[str, Any] = {}
        self._key = ""
        self._kstart = self._vstart = self._vscan = self._after = 0
        self.call = TextToolCall("", {})
        self.end = 0

    def scan(self, buf: str, eos: bool) -> int:
        """Read on from where the last call stopped.

        Args:
            buf: The filter's buffer.
            eos: Whether the stream has ended.

        Returns:
            ``NEED``, ``DONE``, ``FAIL`` or ``PROSE``.
        """
        steps = (
            self._s_name,
            self._s_after_name,
            self._s_key,
            self._s_between,
            self._s_value,
            self._s_next,
        )
        while True:
            result = steps[self._state](buf, eos)
            if result is not None:
                return result

    def _fail(self, at: int) -> int:
        self.pos = at
        return FAIL

    def _done(self, end: int) -> int:
        self.call = TextToolCall(self._name, self._args)
        self.end = end
        return DONE

    def _s_name(self, buf: str, eos: bool) -> int | None:
        end = _GLM_NAME.match(buf, self.pos).end()  # type: ignore[union-attr]  # `*` matches
        self.pos = end
        name = buf[self._nstart : end]
        if end == len(buf):
            if not any(n.startswith(name) for n in self._names):
                return PROSE
            # R11: the stream ended inside what may be a call's name: cut short.
            return FAIL if eos else NEED
        if name not in self._names:
            return PROSE
        self._name = name
        self._state = _G_AFTER_NAME
        return None

    def _s_after_name(self, buf: str, eos: bool) -> int | None:
        m = NON_WS.search(buf, self.pos)
        if m is None:
            self.pos = len(buf)
            return FAIL if eos else NEED  # R11: a name alone is no call yet
        j = self.pos = m.start()
        tok = match_at(buf, j, (ARG_KEY, END_TOOL_CALL), eos)
        if tok == NEED_TOKEN:
            return NEED
        if tok == ARG_KEY:
            self.committed = True
            self._kstart = self.pos = j + len(tok)
            self._state = _G_KEY
            return None
        if tok:
            self.committed = True
            return self._done(j + len(tok))
        if eos and _tag_cut(buf, j, (ARG_KEY, END_TOOL_CALL)):
            return self._fail(j)
        return PROSE

    def _s_key(self, buf: str, eos: bool) -> int | None:
        j = buf.find("<", self.pos)
        if j < 0:
            self.pos = len(buf)
            return FAIL if eos else NEED
        self.pos = j
        tok = match_at(buf, j, (END_ARG_KEY,), eos)
        if tok == NEED_TOKEN:
            return NEED
        key = buf[self._kstart : j].strip()
        if not tok or not key:
            return self._fail(j)
        self._key = key
        self.pos = j + len(tok)
        self._state = _G_BETWEEN
        return None

    def _s_between(self, buf: str, eos: bool) -> int | None:
        m = NON_WS.search(buf, self.pos)
        if m is None:
            self.pos = len(buf)
            return FAIL if eos else NEED
        j = self.pos = m.start()
        tok = match_at(buf, j, (ARG_VALUE,), eos)
        if tok == NEED_TOKEN:
            return NEED
        if not tok:
            return self._fail(j)
        self._vstart = self._vscan = j + len(tok)
        self._state = _G_VALUE
        return None

    def _s_value(self, buf: str, eos: bool) -> int | None:
        # V is verbatim up to the first </arg_value> (R14), as GLM's own parsers read it.
        j = buf.find(END_ARG_VALUE, self._vscan)
        if j < 0:
            self._vscan = max(self._vscan, len(buf) - len(END_ARG_VALUE) + 1)
            self.pos = len(buf)
            return FAIL if eos else NEED  # R11: the value never ended
        raw = strip_one_lf(buf[self._vstart : j])
        schema = self._properties.get(self._name)
        self._args[self._key] = type_value(raw, schema.get(self._key) if schema else None)
        self.pos = self._after = j + len(END_ARG_VALUE)
        self._state = _G_NEXT
        return None

    def _s_next(self, buf: str, eos: bool) -> int | None:
        m = NON_WS.search(buf, self.pos)
        if m is None:
            self.pos = len(buf)
            # R11: a complete call missing only </tool_call> is accepted.
            return self._done(self._after) if eos else NEED
        j = self.pos = m.start()
        tok = match_at(buf, j, (ARG_KEY, END_TOOL_CALL), eos)
        if tok == NEED_TOKEN:
            return NEED
        if tok == ARG_KEY:
            self._kstart = self.pos = j + len(tok)
            self._state = _G_KEY
            return None
        if tok:
            return self._done(j + len(tok))
        return self._done(self._after)  # the closer is optional, as after R5's </function>


# InvokeScan states.
_I_NAME, _I_BODY, _I_PNAME, _I_VALUE = range(4)


class InvokeScan:
    """Reads one MiniMax-M2 function after its ``<invoke name="`` (R16), resumably.

    Attributes:
        pos: The scan position; after ``FAIL``, where the text stopped fitting the form.
        call: After ``DONE``, the call.
        end: After ``DONE``, the index just past ``</invoke>`` (or ``</minimax:tool_call>``).
        closed_wrapper: After ``DONE``, whether ``</minimax:tool_call>`` closed the function.
    """

    __slots__ = (
        "_args",
        "_la_at",
        "_name",
        "_param",
        "_properties",
        "_state",
        "_vscan",
        "_vstart",
        "call",
        "closed_wrapper",
        "end",
        "pos",
    )

    def __init__(self, start: int, properties: Mapping[str, dict[str, Any]]) -> None:
        """Start at the name, just after ``<invoke name="``.

        Args:
            start: Its index in the buffer.
            properties: Parameter schemas by tool name (offered tools only).
        """
        self._properties = properties
        self.pos = start
        self._state = _I_NAME
        self._name = ""
        self._param = ""
        self._args: dict[str, Any] = {}
        self._vstart = self._vscan = 0
        self._la_at = -1  # where a </parameter> whose lookahead is pending starts, or -1
        self.call = TextToolCall("", {})
        self.end = 0
        self.closed_wrapper = False

    def scan(self, buf: str, eos: bool) -> int:
        """Read on from where the last call stopped.

        Args:
            buf: The filter's buffer.
            eos: Whether the stream has ended.

        Returns:
            ``NEED``, ``DONE`` or ``FAIL``.
        """
        steps = (self._s_name, self._s_body, self._s_name, self._s_value)
        while True:
            result = steps[self._state](buf, eos)
            if result is not None:
                return result

    def _fail(self, at: int) -> int:
        self.pos = at
        return FAIL

    def _s_name(self, buf: str, eos: bool) -> int | None:
        """``NAME">`` of the invoke or ``P">`` of a parameter."""
        n = len(buf)
        start = self.pos
        q = _QUOTED.match(buf, start).end()  # type: ignore[union-attr]  # `*` always matches
        if q == n:
            return FAIL if eos else NEED
        if q == start or buf[q] != '"':
            return self._fail(q)
        gt = _SPACES.match(buf, q + 1).end()  # type: ignore[union-attr]  # `*` always matches
        if gt == n:
            return FAIL if eos else NEED
        if buf[gt] != ">":
            return self._fail(gt)
        name = buf[start:q]
        self.pos = gt + 1
        if self._state == _I_NAME:
            self._name = name
            self._state = _I_BODY
        else:
            self._param = name
            self._vstart = self._vscan = self.pos
            self._la_at = -1
            self._state = _I_VALUE
        return None

    def _s_body(self, buf: str, eos: bool) -> int | None:
        m = NON_WS.search(buf, self.pos)
        if m is None:
            self.pos = len(buf)
            return FAIL if eos else NEED  # R11: no </invoke>
        j = self.pos = m.start()
        tokens = (PARAMETER_NAME, END_INVOKE, END_MINIMAX_TOOL_CALL)
        tok = match_at(buf, j, tokens, eos)
        if tok == NEED_TOKEN:
            return NEED
        if tok == PARAMETER_NAME:
            self.pos = j + len(tok)
            self._state = _I_PNAME
            return None
        if not tok:
            return self._fail(j)
        self.call = TextToolCall(self._name, self._args)
        self.end = j + len(tok)
        self.closed_wrapper = tok == END_MINIMAX_TOOL_CALL
        return DONE

    def _end_value(self, buf: str, resume: int) -> None:
        raw = strip_one_lf(buf[self._vstart : self._la_at])
        schema = self._properties.get(self._name)
        self._args[self._param] = type_value(raw, schema.get(self._param) if schema else None)
        self.pos = resume
        self._state = _I_BODY

    def _s_value(self, buf: str, eos: bool) -> int | None:
        n = len(buf)
        while True:
            if self._la_at >= 0:
                # After </parameter>: whitespace, then what decides whether the value ends.
                m = NON_WS.search(buf, self._vscan)
                if m is None:
                    self._vscan = n
                    if not eos:
                        return NEED
                    self._end_value(buf, n)
                    return None
                r = self._vscan = m.start()
                tok = match_at(buf, r, (PARAMETER_SP, END_INVOKE, END_MINIMAX_TOOL_CALL), eos)
                if tok == NEED_TOKEN:
                    return NEED
                if tok:
                    self._end_value(buf, r)
                    return None
                self._la_at = -1  # not a closer: part of the value
            j = buf.find(END_PARAMETER, self._vscan)
            if j < 0:
                self._vscan = max(self._vscan, n - len(END_PARAMETER) + 1)
                self.pos = n
                return FAIL if eos else NEED  # R11: the value never ended
            self._la_at = j
            self._vscan = j + len(END_PARAMETER)


def read_name_part(buf: str, start: int, scan: int, eos: bool) -> tuple[int, str | None]:
    """Mistral's ``NAME`` from ``start`` and what follows it (R17).

    Args:
        buf: The filter's buffer.
        start: Where the name starts.
        scan: Where reading resumes (``buf[start:scan]`` is known to be name characters).
        eos: Whether the stream has ended.

    Returns:
        ``(end, next)``: the name is ``buf[start:end]``; ``next`` is ``"{"`` or ``ARGS`` when
        that follows the name at once, ``NEED_TOKEN`` when that cannot be known yet, and None
        when the name is empty or is followed by anything else.
    """
    end = MISTRAL_NAME.match(buf, scan).end()  # type: ignore[union-attr]  # `*` always matches
    if end == len(buf):
        return end, None if eos else NEED_TOKEN
    if end == start:
        return end, None
    if buf[end] == "{":
        return end, "{"
    return end, match_at(buf, end, (ARGS,), eos)


# PyListScan states.
_L_NAME_WS, _L_NAME, _L_ARG_WS, _L_ARG, _L_EQ, _L_VAL_WS, _L_VALUE, _L_AFTER = range(8)


class PyListScan:
    """Reads a pythonic call list ``[NAME(ARG=VALUE, ...), ...]`` from its ``[`` (R19).

    With ``names`` (answer-initial), the list is a block only once ``[NAME(`` names an offered
    tool; until then anything that cannot be such a list is ``PROSE``. Without (inside
    ``<|python_start|>``) it is a block from the start and any name goes. After that, a list
    in which one call cannot be parsed is ``FAIL`` as a whole (R12): calls are only given at
    ``DONE``.

    Attributes:
        pos: The scan position; after ``FAIL``, where the text stopped fitting the form.
        committed: Whether the text is known to be a call block.
        calls: After ``DONE``, the calls in order.
        end: After ``DONE``, the index just past ``]``.
    """

    __slots__ = (
        "_arg",
        "_args",
        "_fname",
        "_names",
        "_quote",
        "_stack",
        "_start",
        "_state",
        "_vstart",
        "calls",
        "committed",
        "end",
        "pos",
    )

    def __init__(self, start: int, names: frozenset[str] | None) -> None:
        """Start at the ``[``.

        Args:
            start: Its index in the buffer.
            names: The only names a call may have (answer-initial), or None for any.
        """
        self._names = names
        self.committed = names is None
        self.pos = start + 1
        self._start = start
        self._state = _L_NAME_WS
        self._fname = ""
        self._arg = ""
        self._args: dict[str, Any] = {}
        self._vstart = 0
        self._stack: list[str] = []
        self._quote = ""
        self.calls: list[TextToolCall] = []
        self.end = 0

    def scan(self, buf: str, eos: bool) -> int:
        """Read on from where the last call stopped.

        Args:
            buf: The filter's buffer.
            eos: Whether the stream has ended.

        Returns:
            ``NEED``, ``DONE``, ``FAIL`` or (before the list is a block) ``PROSE``.
        """
        steps = (
            self._s_name_ws,
            self._s_name,
            self._s_arg_ws,
            self._s_arg,
            self._s_eq,
            self._s_val_ws,
            self._s_value,
            self._s_after,
        )
        while True:
            result = steps[self._state](buf, eos)
            if result is not None:
                return result

    def _fail(self, at: int) -> int:
        if not self.committed:
            return PROSE
        self.pos = at
        return FAIL

    def _more(self, buf: str, eos: bool) -> int:
        """The buffer ended mid-list: wait, or at the end of the stream the list is cut."""
        self.pos = max(self.pos, self._start)
        return self._fail(len(buf)) if eos else NEED

    def _skip_ws(self, buf: str) -> int:
        m = NON_WS.search(buf, self.pos)
        self.pos = len(buf) if m is None else m.start()
        return -1 if m is None else self.pos

    def _s_name_ws(self, buf: str, eos: bool) -> int | None:
        j = self._skip_ws(buf)
        if j < 0:
            return self._more(buf, eos)
        if buf[j] == "]" and self.calls:  # a trailing comma, as Python allows
            self.end = j + 1
            return DONE
        self._vstart = j  # the name's start
        self._state = _L_NAME
        return None

    def _s_name(self, buf: str, eos: bool) -> int | None:
        end = _PY_NAME.match(buf, self.pos).end()  # type: ignore[union-attr]  # `*` matches
        self.pos = end
        names = self._names
        if end == len(buf):
            if not self.committed and names is not None:
                name = buf[self._vstart : end]  # short: no offered name is longer
                if not any(n.startswith(name) for n in names):
                    return PROSE
            return self._more(buf, eos)
        name = buf[self._vstart : end]
        if not name or buf[end] != "(" or (names is not None and name not in names):
            return self._fail(self._vstart)
        self.committed = True
        self._fname = name
        self._args = {}
        self.pos = end + 1
        self._state = _L_ARG_WS
        return None

    def _s_arg_ws(self, buf: str, eos: bool) -> int | None:
        j = self._skip_ws(buf)
        if j < 0:
            return self._more(buf, eos)
        if buf[j] == ")":
            return self._call_done(j)
        self._vstart = j  # the argument name's start
        self._state = _L_ARG
        return None

    def _s_arg(self, buf: str, eos: bool) -> int | None:
        end = _PY_ARG.match(buf, self.pos).end()  # type: ignore[union-attr]  # `*` matches
        self.pos = end
        if end == len(buf):
            return self._more(buf, eos)
        if end == self._vstart or buf[self._vstart].isdigit():
            return self._fail(self._vstart)
        self._arg = buf[self._vstart : end]
        self._state = _L_EQ
        return None

    def _s_eq(self, buf: str, eos: bool) -> int | None:
        j = self._skip_ws(buf)
        if j < 0:
            return self._more(buf, eos)
        if buf[j] != "=":
            return self._fail(j)
        self.pos = j + 1
        self._state = _L_VAL_WS
        return None

    def _s_val_ws(self, buf: str, eos: bool) -> int | None:
        j = self._skip_ws(buf)
        if j < 0:
            return self._more(buf, eos)
        self._vstart = j
        self._stack = []
        self._quote = ""
        self._state = _L_VALUE
        return None

    def _s_value(self, buf: str, eos: bool) -> int | None:
        n = len(buf)
        pos = self.pos
        stack = self._stack
        while True:
            if self._quote:
                m = _PY_STR_STOP[self._quote].search(buf, pos)
                if m is None:
                    self.pos = n
                    return self._more(buf, eos)
                j = m.start()
                c = buf[j]
                if c == "\\":
                    if j + 1 >= n:
                        self.pos = j
                        return self._more(buf, eos)
                    pos = j + 2
                elif c == "\n":  # a single-quoted string cannot span lines
                    return self._fail(j)
                elif len(self._quote) == 1 or buf.startswith(self._quote, j):
                    pos = j + len(self._quote)
                    self._quote = ""
                elif j + 3 > n and not eos and self._quote.startswith(buf[j:]):
                    self.pos = j
                    return NEED  # a closing triple quote may be coming
                else:
                    pos = j + 1
                continue
            m = _PY_OUT.search(buf, pos)
            if m is None:
                self.pos = n
                return self._more(buf, eos)
            j = m.start()
            c = buf[j]
            if c in "'\"":
                if j + 3 > n and not eos and buf[j:] == c * (n - j):
                    self.pos = j
                    return NEED  # '' or "" at the end: an empty string or a triple quote
                self._quote = c * 3 if buf.startswith(c * 3, j) else c
                pos = j + len(self._quote)
            elif c in "([{":
                stack.append(c)
                pos = j + 1
            elif c in ")]}":
                if stack:
                    if stack.pop() != _PY_CLOSE[c]:
                        return self._fail(j)
                    pos = j + 1
                elif c != ")":
                    return self._fail(j)
                else:
                    return self._value_done(buf, j)
            elif c == "," and stack:
                pos = j + 1
            elif c == ",":
                return self._value_done(buf, j)
            else:
                return self._fail(j)

    def _value_done(self, buf: str, j: int) -> int | None:
        """The value ends at ``j`` (a ',' or ')' outside brackets)."""
        ok, value = python_literal(buf[self._vstart : j])
        if not ok:
            return self._fail(self._vstart)
        self._args[self._arg] = value
        if buf[j] == ")":
            return self._call_done(j)
        self.pos = j + 1
        self._state = _L_ARG_WS  # a trailing comma before ')' is allowed, as in Python
        return None

    def _call_done(self, j: int) -> int | None:
        self.calls.append(TextToolCall(self._fname, self._args))
        self.pos = j + 1
        self._state = _L_AFTER
        return None

    def _s_after(self, buf: str, eos: bool) -> int | None:
        j = self._skip_ws(buf)
        if j < 0:
            return self._more(buf, eos)
        if buf[j] == ",":
            self.pos = j + 1
            self._state = _L_NAME_WS
            return None
        if buf[j] != "]":
            return self._fail(j)
        self.end = j + 1
        return DONE
