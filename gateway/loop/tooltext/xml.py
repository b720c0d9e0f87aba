"""Incremental parser for one XML-form function call (SPEC 4a R5, R6), for :mod:`gateway.loop.tooltext.filter`.

The Qwen3-Coder form, after ``<function=``::

    NAME>
    <parameter=P>
    VALUE
    </parameter>
    </function>

:class:`XmlFunctionScan` reads one function from the filter's buffer and resumes where it
stopped on each call, so a long value fed in small chunks costs linear time. It decides, and
the filter acts: ``NEED`` (more text), ``DONE`` (a call; ``end`` is past ``</function>``, or past
``</tool_call>`` when that closed both), ``FAIL`` (malformed at ``pos``) or ``PROSE`` (a bare
``<function=NAME>`` whose next text is not a function body, released like R4).

Value ends (R5), first of: ``</parameter>`` followed, after whitespace, by ``<parameter=``,
``</function>``, ``</tool_call>`` or the end of the stream; a line-start ``<parameter=Q>`` for a
schema parameter not yet seen; ``</function>`` followed, after whitespace, by ``</tool_call>``
or the end of the stream. Anything else, tags included, is part of the value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from gateway.loop.tooltext.parse import (
    NAME_RE,
    SCAN_FAIL,
    SCAN_NEED,
    JsonScan,
    TextToolCall,
    decode_json,
    strip_one_lf,
    type_value,
)

TOOL_CALL: Final = "<tool_call>"
END_TOOL_CALL: Final = "</tool_call>"
FUNCTION: Final = "<function="
END_FUNCTION: Final = "</function>"
PARAMETER: Final = "<parameter="
END_PARAMETER: Final = "</parameter>"

NEED_TOKEN: Final = ""
"""`match_at` result: the buffer ends in a proper prefix of a token."""

NON_WS: Final = re.compile(r"\S")

# XmlFunctionScan.scan results.
NEED, DONE, FAIL, PROSE = range(4)

# Internal states.
_NAME, _BODY, _PNAME, _VALUE, _ARGS, _ARGS_END = range(6)


def match_at(buf: str, j: int, tokens: Sequence[str], eos: bool) -> str | None:
    """The token at ``buf[j:]``; ``NEED_TOKEN`` if one may still follow; else None.

    Args:
        buf: The text.
        j: Where to look.
        tokens: Candidate tokens (none a prefix of another).
        eos: Whether the stream has ended (then nothing is a prefix any more).
    """
    need = False
    for tok in tokens:
        if buf.startswith(tok, j):
            return tok
        if not eos and len(buf) - j < len(tok) and tok.startswith(buf[j:]):
            need = True
    return NEED_TOKEN if need else None


def read_name(buf: str, start: int, eos: bool) -> str | None:
    """The R5 name from ``start`` to '>', ``NEED_TOKEN`` if unfinished, None if invalid."""
    end = NAME_RE.match(buf, start).end()  # type: ignore[union-attr]  # `*` always matches
    if end == len(buf):
        return None if eos else NEED_TOKEN
    if buf[end] != ">" or end == start:
        return None
    return buf[start:end]


class XmlFunctionScan:
    """Reads one ``<function=...>`` call from the filter's buffer, resumably.

    Attributes:
        pos: The scan position; after ``FAIL``, where the text stopped fitting the form.
        committed: Whether the text is known to be a call block (a bare opener is not, until
            its first body token).
        call: After ``DONE``, the call.
        end: After ``DONE``, the index just past the function (and ``</tool_call>``).
        closed_wrapper: After ``DONE``, whether ``</tool_call>`` closed the function.
    """

    __slots__ = (
        "_args",
        "_js",
        "_la",
        "_la_at",
        "_name",
        "_name_s",
        "_param",
        "_params",
        "_properties",
        "_schema",
        "_seen",
        "_state",
        "_vscan",
        "_vstart",
        "call",
        "closed_wrapper",
        "committed",
        "end",
        "pos",
    )

    def __init__(
        self,
        start: int,
        properties: Mapping[str, dict[str, Any]],
        *,
        name: str | None = None,
    ) -> None:
        """Start after ``<function=`` (to read the name) or after ``<function=NAME>``.

        Args:
            start: Index in the buffer where reading starts.
            properties: Parameter schemas by tool name (offered tools only).
            name: The name when the opener was matched whole (bare form, not yet committed).
        """
        self._properties = properties
        self.pos = self._name_s = start
        self.committed = name is None
        self._state = _NAME if name is None else _BODY
        self._name = ""
        self._args: dict[str, Any] = {}
        self._schema: dict[str, Any] | None = None
        self._seen: set[str] = set()
        self._params = 0
        self._param = ""
        self._vstart = self._vscan = 0
        self._la = ""  # the closer whose lookahead is pending in a value, or ""
        self._la_at = 0
        self._js: JsonScan | None = None
        self.call = TextToolCall("", {})
        self.end = 0
        self.closed_wrapper = False
        if name is not None:
            self._begin(name)

    def _begin(self, name: str) -> None:
        self._name = name
        self._schema = self._properties.get(name)  # unknown tool: raw values (R6)

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
            self._s_body,
            self._s_pname,
            self._s_value,
            self._s_args,
            self._s_args_end,
        )
        while True:
            result = steps[self._state](buf, eos)
            if result is not None:
                return result

    def _done(self, end: int, token: str) -> int:
        self.call = TextToolCall(self._name, self._args)
        self.end = end
        self.closed_wrapper = token == END_TOOL_CALL
        return DONE

    def _fail(self, at: int) -> int:
        self.pos = at
        return FAIL

    def _s_name(self, buf: str, eos: bool) -> int | None:
        name = read_name(buf, self._name_s, eos)
        if name == NEED_TOKEN:
            return NEED
        if name is None:
            return self._fail(self._name_s)
        self.pos = self._name_s + len(name) + 1
        self._begin(name)
        self._state = _BODY
        return None

    def _s_body(self, buf: str, eos: bool) -> int | None:
        m = NON_WS.search(buf, self.pos)
        if m is None:
            self.pos = len(buf)
            return FAIL if eos else NEED  # R11: no </function>
        j = self.pos = m.start()
        if buf[j] == "{" and self._params == 0:  # a JSON argument object (R5)
            self.committed = True
            self._js = JsonScan(j, "{")
            self._state = _ARGS
            return None
        tokens: tuple[str, ...] = (PARAMETER, END_FUNCTION)
        if self.committed:
            tokens += (END_TOOL_CALL,)  # closes the function too (module docstring)
        tok = match_at(buf, j, tokens, eos)
        if tok == NEED_TOKEN:
            return NEED
        if tok == PARAMETER:
            self.committed = True
            self._name_s = j + len(PARAMETER)
            self._state = _PNAME
            return None
        if tok:
            self.committed = True
            return self._done(j + len(tok), tok)
        if eos and any(t.startswith(buf[j:]) for t in tokens):
            return self._fail(j)  # the stream ended inside a tag: cut short (R11)
        return self._fail(j) if self.committed else PROSE

    def _s_pname(self, buf: str, eos: bool) -> int | None:
        name = read_name(buf, self._name_s, eos)
        if name == NEED_TOKEN:
            return NEED
        if name is None:
            return self._fail(self._name_s)
        self._param = name
        self._seen.add(name)
        self._params += 1
        self._vstart = self._vscan = self._name_s + len(name) + 1
        self._la = ""
        self._state = _VALUE
        return None

    def _end_value(self, buf: str, end: int, resume: int) -> None:
        raw = strip_one_lf(buf[self._vstart : end])
        schema = self._schema
        self._args[self._param] = type_value(raw, schema.get(self._param) if schema else None)
        self.pos = resume
        self._state = _BODY

    def _s_value(self, buf: str, eos: bool) -> int | None:
        n = len(buf)
        while True:
            if self._la:
                # After </parameter> or </function>: whitespace, then what decides it.
                m = NON_WS.search(buf, self._vscan)
                if m is None:
                    self._vscan = n
                    if not eos:
                        return NEED
                    # Either closer followed by the end of the stream ends the value.
                    at = self._la_at
                    self._end_value(buf, at, n if self._la == END_PARAMETER else at)
                    return None
                r = self._vscan = m.start()
                if self._la == END_PARAMETER:
                    tok = match_at(buf, r, (PARAMETER, END_FUNCTION, END_TOOL_CALL), eos)
                    if tok:
                        self._end_value(buf, self._la_at, r)
                        return None
                else:
                    tok = match_at(buf, r, (END_TOOL_CALL,), eos)
                    if tok:
                        self._end_value(buf, self._la_at, self._la_at)
                        return None
                if tok == NEED_TOKEN:
                    return NEED
                self._la = ""  # not a closer: part of the value
                continue
            j = buf.find("<", self._vscan)
            if j < 0:
                self._vscan = n
                return FAIL if eos else NEED  # R11: the value never ended
            tok = match_at(buf, j, (END_PARAMETER, END_FUNCTION, PARAMETER), eos)
            if tok == NEED_TOKEN:
                self._vscan = j
                return NEED
            if tok in (END_PARAMETER, END_FUNCTION):
                self._la = tok
                self._la_at = j
                self._vscan = j + len(tok)
                continue
            if tok == PARAMETER:
                starts = self._line_start_param(buf, j, eos)
                if starts is None:
                    self._vscan = j
                    return NEED
                if starts:
                    self._end_value(buf, j, j)
                    return None
            self._vscan = j + 1

    def _line_start_param(self, buf: str, j: int, eos: bool) -> bool | None:
        """Whether a line-start ``<parameter=Q>`` for a new schema parameter is at ``j``.

        Returns None when the name is not complete yet.
        """
        schema = self._schema
        if not schema or j - 1 < self._vstart or buf[j - 1] != "\n":
            return False
        name = read_name(buf, j + len(PARAMETER), eos)
        if name == NEED_TOKEN:
            return None
        return name is not None and name in schema and name not in self._seen

    def _s_args(self, buf: str, eos: bool) -> int | None:
        js = self._js
        assert js is not None
        end = js.scan(buf)
        if end == SCAN_NEED:
            return FAIL if eos else NEED
        if end == SCAN_FAIL:
            return self._fail(js.pos)
        value = decode_json(buf[js.start : end])
        if not isinstance(value, dict):
            return self._fail(end)
        self._args = value  # JSON-form arguments pass through unchanged (R6)
        self.pos = end
        self._state = _ARGS_END
        return None

    def _s_args_end(self, buf: str, eos: bool) -> int | None:
        m = NON_WS.search(buf, self.pos)
        if m is None:
            self.pos = len(buf)
            return FAIL if eos else NEED  # R11: no </function>
        j = self.pos = m.start()
        tok = match_at(buf, j, (END_FUNCTION, END_TOOL_CALL), eos)
        if tok == NEED_TOKEN:
            return NEED
        if tok:
            return self._done(j + len(tok), tok)
        return self._fail(j)
