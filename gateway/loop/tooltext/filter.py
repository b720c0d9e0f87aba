"""The streaming filter that finds tool calls written into the answer text (SPEC 4a).

One :class:`TextToolFilter` serves one model response (R1). :meth:`TextToolFilter.feed` takes
each content delta and returns a :class:`FilterOutput`: the text that may be shown now, the
calls completed now and the number of malformed blocks found now. :meth:`TextToolFilter.close`
ends the stream (R11). Results do not depend on how the text was cut into chunks.

State machine
-------------
The filter keeps one buffer and a scan cursor; every state resumes where it stopped, so each
character is examined a bounded number of times (linear time). The buffer is trimmed whenever
nothing is held. The modes:

* ``GAP``: whitespace whose fate is not known yet. At the start of the answer (policy LEAD)
  it is dropped if the answer starts with a removed block and kept otherwise; here an
  answer-initial ``{`` or code fence may start an untagged call (R8). After a removed block
  (policy AFTER) it also swallows orphan ``</tool_call>`` / ``</function>`` closers, and
  further blocks continue the same swallowed stretch. Of the stretch it keeps only the last
  non-empty whitespace run (held as a string, so the buffer need not keep the closers), and
  only if the visible text is non-empty and does not end in whitespace (R10).
* ``TEXT``: prose. Runs up to the next ``<`` or backtick are emitted in bulk. At ``<`` an
  opener (R2) is matched; a proper prefix at the end of the buffer is held (R3).
* ``CODE``: inline code spans and fenced blocks (R9), followed by
  :class:`~gateway.loop.tooltext.code.CodeScan`. Code is emitted at once; nothing in it is
  detected. A span that closes within the buffer is passed over inside ``TEXT``.
* ``WRAP``: after ``<tool_call>``, deciding the body (R4). ``XML``: one function in the XML
  form (R5, R6), read by :class:`~gateway.loop.tooltext.xml.XmlFunctionScan`; ``FN_AFTER``: after
  ``</function>`` in a wrapper, another function or the optional ``</tool_call>``. ``JSON``
  and ``JSON_END``: a JSON value (:class:`~gateway.loop.tooltext.parse.JsonScan`) and the optional
  closer after it (R7, R8). ``SKIP``: a malformed block, hidden up to its closer (R12).
* ``FENCE_OPEN`` / ``FENCE_BETWEEN``: an answer-initial fence held until its body is known
  to be only tool-call blocks or one call object (then hidden) or anything else (then
  released and re-read as an ordinary code block).

Text that turns out not to be a block (R4, a failed untagged call or fence) is released by
moving the cursor back to its start and re-reading it as prose; that happens at most once per
held stretch, so the total work stays linear.

Choices where SPEC 4a leaves room
---------------------------------
* ``<function=NAME>`` outside a wrapper follows R4 like ``<tool_call>``: it is a block only
  when the first non-space text after it is ``<parameter=``, ``{`` or ``</function>``;
  otherwise it is prose and released unchanged. Inside a wrapper any NAME is accepted.
* ``</tool_call>`` where ``</function>`` could come closes both (the model forgot
  ``</function>``); R5 already treats ``</parameter>`` + ``</tool_call>`` as a value end. At
  end of stream a missing ``</function>`` is still malformed (R11).
* A lone complete opener at end of stream (``<tool_call>`` or an offered ``<function=NAME>``)
  is malformed; a partial opener is released as text.
* An answer-initial ``{`` is an opener (R2), so JSON after it that is unfinished at end of
  stream is a block cut short: hidden and counted (R11), in a fence too. It is decided as
  early as the text allows: a key no call object has (at the top level or in the object
  under ``function``), a ``name`` there whose value, once complete, is not a string naming an
  offered tool, or anything that is not JSON releases it as text at once, so a plain JSON
  answer is not held (R3) and never counted. Every ``name`` value is judged, so with
  duplicate keys each must name an offered tool. Inside ``<tool_call>`` any name goes (R7).
* "The last whitespace run before the next text" (R10) is the last non-empty run in the
  whole swallowed stretch, even when orphan closers or further removed blocks (malformed
  ones too) follow it: ``Hello<block> </tool_call>world`` shows ``Hello world``. A wrapper
  opener that turns out to be prose (R4) is next text like any other.
* Only ```` ``` ```` fences are code (R9 names no other); ``~~~`` is prose. A fence opener line
  whose info string holds a backtick is an inline code span (CommonMark). An unmatched
  backtick run hides detection until the end of its line (holding the line to see whether a
  closer follows would break R3).
* An answer-initial fence is one whose opener line has at most three spaces of indent after
  the leading whitespace. Its body may hold blocks (with whitespace and orphan closers between
  them) or one untagged call object; a malformed block in it still makes it a tool-call fence
  (hidden, counted). An empty body, or one that ends the stream unstarted, is text.
* A line-start ``<parameter=Q>`` (R5) comes right after a line feed, without indent.
* A malformed block is hidden from where it broke up to ``</tool_call>`` (wrapper) or
  ``</function>`` (bare form), or to a closing fence inside an answer-initial fence, else to
  the end of the stream.
* Several JSON values in one wrapper are not joined: the block ends after the first (R7).
* Typing (R6) strips surrounding whitespace before matching a non-string type; ``number`` is
  typed like ``integer`` (a JSON number, else raw); with a list of types the first that fits
  wins; a repeated parameter keeps its last value. A call object's ``type``, when present,
  must be ``"function"``; exactly one of ``arguments`` / ``parameters`` must be present.
* Whitespace is Unicode whitespace (``str.isspace``); line starts for fences are judged on
  the visible text. A kept whitespace run (R10) is kept as written. A closing fence line
  may end in CRLF, as CommonMark's line ends do (otherwise a CRLF answer's fence would
  never close, and a call after it would reach the page as text).
* ``feed`` or ``close`` after ``close`` raises :class:`FilterClosedError`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from gateway.loop.tooltext.code import CodeScan, inline_span_end, run_end
from gateway.loop.tooltext.parse import (
    INVALID,
    SCAN_FAIL,
    SCAN_NEED,
    JsonScan,
    TextToolCall,
    ToolIndex,
    call_from_object,
    calls_from_wrapped,
    decode_json,
)
from gateway.loop.tooltext.xml import (
    END_FUNCTION,
    END_TOOL_CALL,
    FUNCTION,
    NEED_TOKEN,
    NON_WS,
    TOOL_CALL,
    XmlFunctionScan,
    match_at,
)
from gateway.loop.tooltext.xml import FAIL as XML_FAIL
from gateway.loop.tooltext.xml import NEED as XML_NEED
from gateway.loop.tooltext.xml import PROSE as XML_PROSE

__all__ = ["FilterClosedError", "FilterOutput", "TextToolCall", "TextToolFilter"]

_TEXT_STOP: Final = re.compile(r"[<`]")
_FENCE_CLOSE: Final = re.compile(r"(`+)[ \t\r]*")
_INFO_STOP: Final = re.compile(r"[`\n]")

_CLOSERS: Final = (END_TOOL_CALL, END_FUNCTION)

# Modes (ints: the dispatch runs once per decision and is on the hot path).
GAP, TEXT, CODE, WRAP, XML, FN_AFTER, JSON, JSON_END, SKIP, FENCE_OPEN, FENCE_BETWEEN = range(11)
_COMPACTABLE: Final = frozenset({TEXT, CODE})  # states that keep no position but the cursor

# JSON purposes: inside <tool_call> (R7) or untagged at the start (R8).
_P_WRAP, _P_UNTAGGED = range(2)


def _col_after(col: int, s: str) -> int:
    """Spaces since the last line start after ``s`` (0-3), or 4 when not at a line start."""
    nl = s.rfind("\n")
    if nl >= 0:
        col, s = 0, s[nl + 1 :] if len(s) - nl <= 4 else "...."
    if col > 3 or col + len(s) > 3 or s.strip(" "):
        return 4
    return col + len(s)


class FilterClosedError(RuntimeError):
    """Raised when :meth:`TextToolFilter.feed` or ``close`` is called after ``close``."""


@dataclasses.dataclass(frozen=True, slots=True)
class FilterOutput:
    """What one :meth:`TextToolFilter.feed` or ``close`` step released.

    Attributes:
        text: Visible text released now.
        calls: Calls completed now, in order.
        malformed: Hidden malformed blocks found now (R12).
    """

    text: str
    calls: list[TextToolCall]
    malformed: int


class TextToolFilter:
    """Removes tool calls written as text from one streamed answer and reports them.

    Example:
        >>> f = TextToolFilter([])
        >>> out = f.feed('Checking.<tool_call>{"name": "s", "arguments": {}}</tool_call>')
        >>> out.text, out.calls
        ('Checking.', [TextToolCall(name='s', arguments={})])
    """

    def __init__(self, tools: Sequence[Mapping[str, Any]] | None) -> None:
        """Create the filter for one round.

        Args:
            tools: The OpenAI ``tools`` list offered in this round (may be empty).
        """
        self._index = ToolIndex(tools)
        self._openers: tuple[str, ...] = (TOOL_CALL, *self._index.bare_openers)
        self._opener_re = re.compile("|".join(map(re.escape, self._openers)))
        self._opener_max = max(map(len, self._openers))
        self._buf = ""
        self._pos = 0
        self._eos = False
        self._closed = False
        self._mode = GAP
        # Released in the current step.
        self._out: list[str] = []
        self._calls: list[TextToolCall] = []
        self._bad = 0
        # Visible text so far (R10) and the column for fence line starts (R9).
        self._vis_any = False
        self._vis_ws_end = False
        self._col = 0
        # The pending whitespace (R10) and whether it leads the answer (R8, R10). After a
        # removed block the stretch up to the next text may hold several whitespace runs
        # (between swallowed closers and further blocks); only the last non-empty one counts.
        self._gap_lead = True  # nothing but whitespace so far: the answer's start (R8)
        self._gap_on = True  # a stretch is pending
        self._gap_ws = ""  # the last non-empty whitespace run of the stretch, as written
        self._gap_s = 0  # where the run being read started
        self._code: CodeScan | None = None  # Markdown code being read (R9)
        # Current block.
        self._blk_start = 0
        self._opener = TOOL_CALL
        self._wrapped = False
        self._after = 0  # where the block ends if the optional closer does not come
        self._xml: XmlFunctionScan | None = None
        self._js: JsonScan | None = None
        self._js_purpose = _P_WRAP
        self._skip_re: re.Pattern[str] = re.compile(re.escape(END_TOOL_CALL))
        self._skip_margin = 0
        # Answer-initial fence (R8): None when not deciding one.
        self._fence: _FenceHold | None = None
        self._handlers: tuple[Callable[[], bool], ...] = (
            self._h_gap,
            self._h_text,
            self._h_code,
            self._h_wrap,
            self._h_xml,
            self._h_fn_after,
            self._h_json,
            self._h_json_end,
            self._h_skip,
            self._h_fence_open,
            self._h_fence_between,
        )

    # ----------------------------------------------------------------------------- interface

    def feed(self, chunk: str) -> FilterOutput:
        """Take the next content delta.

        Args:
            chunk: The delta's text, in stream order.

        Returns:
            What can be released now (R3).

        Raises:
            FilterClosedError: After :meth:`close`.
        """
        if self._closed:
            raise FilterClosedError("feed() after close()")
        if not chunk:
            return FilterOutput("", [], 0)
        if self._mode == TEXT and self._pos == len(self._buf) and not _TEXT_STOP.search(chunk):
            # Fast path: plain prose with nothing held is released as it came.
            self._buf = ""
            self._pos = 0
            self._note_visible(chunk)
            return FilterOutput(chunk, [], 0)
        buf = self._compacted()
        # Appending to a string nobody else references is done in place by CPython, which
        # keeps a long held block fed in tiny chunks linear instead of quadratic.
        self._buf = ""
        buf += chunk
        self._buf = buf
        del buf
        return self._run()

    def close(self) -> FilterOutput:
        """End the stream: release or resolve everything still held (R11).

        Returns:
            The last release.

        Raises:
            FilterClosedError: When called twice.
        """
        if self._closed:
            raise FilterClosedError("close() called twice")
        self._eos = True
        out = self._run()
        self._closed = True
        self._buf = ""
        self._pos = 0
        return out

    # ------------------------------------------------------------------------------ plumbing

    def _compacted(self) -> str:
        """The buffer without the text no state can look at again (positions shifted)."""
        mode = self._mode
        if mode in _COMPACTABLE or (mode == SKIP and self._fence is None):
            cut = self._pos
        elif mode == GAP:
            cut = min(self._gap_s, self._pos)
            self._gap_s -= cut
        else:  # a held block or fence: its start is still needed
            return self._buf
        self._pos -= cut
        return self._buf[cut:] if cut else self._buf

    def _run(self) -> FilterOutput:
        """Run the states until one needs more text; collect what they released."""
        handlers = self._handlers
        while handlers[self._mode]():
            pass
        text = "".join(self._out)
        self._out = []
        calls, self._calls = self._calls, []
        bad, self._bad = self._bad, 0
        return FilterOutput(text, calls, bad)

    def _note_visible(self, s: str) -> None:
        """Track what R9 and R10 need to know about the visible text."""
        self._vis_any = True
        last = s[-1]
        self._vis_ws_end = last.isspace()
        if last == "\n":
            self._col = 0
        elif self._col <= 3 or "\n" in s[-4:]:
            self._col = _col_after(self._col, s)

    def _emit(self, s: str) -> None:
        if s:
            self._out.append(s)
            self._note_visible(s)

    def _match(self, j: int, tokens: Sequence[str]) -> str | None:
        """The token at ``buf[j:]``, ``NEED_TOKEN`` if one may still follow, else None."""
        return match_at(self._buf, j, tokens, self._eos)

    def _end_run(self, j: int) -> None:
        """The whitespace run being read ends at ``j``; remember it unless empty (R10)."""
        if j > self._gap_s:
            self._gap_ws = self._buf[self._gap_s : j]
            self._gap_s = j

    def _flush_gap(self) -> None:
        """Text follows the pending whitespace: keep it or drop it (R10)."""
        if self._gap_on:
            self._gap_on = False
            if self._gap_lead or (self._vis_any and not self._vis_ws_end):
                self._emit(self._gap_ws)
            self._gap_ws = ""
        self._gap_lead = False

    def _add_call(self, call: TextToolCall) -> None:
        """A complete call: released now, or held with an undecided answer-initial fence."""
        if self._fence is not None:
            self._fence.calls.append(call)
        else:
            self._calls.append(call)

    def _add_bad(self) -> None:
        """A malformed block (R12), held like calls inside an undecided fence."""
        if self._fence is not None:
            self._fence.bad += 1
        else:
            self._bad += 1

    def _commit(self) -> None:
        """The held opener is a block: leading whitespace before it goes (R10).

        Whitespace before it after an earlier block stays pending: the swallowed stretch
        goes on after this block, and its last whitespace run may still be kept.
        """
        if self._fence is None and self._gap_lead:
            self._gap_on = False
            self._gap_lead = False
            self._gap_ws = ""

    def _end_block(self, end: int) -> bool:
        """A block ends at ``end``: whitespace and orphan closers after it are next (R10)."""
        self._pos = end
        if self._fence is not None:
            self._fence.item_end = end
            self._mode = FENCE_BETWEEN
        else:
            self._mode = GAP
            if self._gap_lead or not self._gap_on:  # a new stretch starts here
                self._gap_ws = ""
            self._gap_lead = False
            self._gap_on = True
            self._gap_s = end
        return True

    def _release_opener(self) -> bool:
        """R4: the opener was prose after all; release it and read on after it."""
        if self._fence is not None:
            return self._release_fence()
        self._flush_gap()
        end = self._blk_start + len(self._opener)
        self._emit(self._buf[self._blk_start : end])
        self._pos = end
        self._mode = TEXT
        return True

    def _malformed(self, at: int) -> bool:
        """R12: count the block and hide it up to its closer."""
        self._add_bad()
        closer = END_TOOL_CALL if self._wrapped else END_FUNCTION
        pattern = re.escape(closer)
        self._skip_margin = len(closer) - 1
        if self._fence is not None:
            pattern += rf"|\n {{0,3}}`{{{self._fence.n}}}"
            self._skip_margin = max(self._skip_margin, self._fence.n + 4)
        self._skip_re = re.compile(pattern)
        self._pos = at
        self._mode = SKIP
        return True

    def _cut(self) -> bool:
        """R11: the stream ended inside a block's structure: hidden and counted."""
        self._add_bad()
        return self._end_block(len(self._buf))

    def _start_opener(self, tok: str, j: int) -> bool:
        """A complete opener at ``j``: decide its body next (R3, R4)."""
        self._blk_start = j
        self._opener = tok
        self._pos = j + len(tok)
        if tok == TOOL_CALL:
            self._wrapped = True
            self._mode = WRAP
        else:
            self._wrapped = False
            self._start_xml(self._pos, tok[len(FUNCTION) : -1])
        return True

    def _start_xml(self, start: int, name: str | None) -> bool:
        """Read one XML-form function from ``start`` (R5)."""
        self._xml = XmlFunctionScan(start, self._index.properties, name=name)
        self._pos = start
        self._mode = XML
        return True

    def _start_json(self, j: int, purpose: int) -> bool:
        """Read one JSON value from ``j``, in a wrapper (R7) or untagged (R8)."""
        untagged = purpose == _P_UNTAGGED
        names = self._index.names if untagged else None
        self._js = JsonScan(j, self._buf[j], keys=untagged, names=names)
        self._js_purpose = purpose
        self._pos = j
        self._mode = JSON
        return True

    # ------------------------------------------------------------------------- prose states

    def _h_gap(self) -> bool:
        """Whitespace before the answer or after a block, and what follows it (R8, R10)."""
        buf = self._buf
        m = NON_WS.search(buf, self._pos)
        if m is None:
            self._pos = len(buf)
            if self._eos and self._gap_on:
                # Nothing follows: leading whitespace of a text-only answer stays; after a
                # block it goes.
                if self._gap_lead:
                    self._end_run(len(buf))
                    self._flush_gap()
                self._gap_on = False
            return False
        j = self._pos = m.start()
        self._end_run(j)
        c = buf[j]
        if c == "<":
            tok = self._match(j, _CLOSERS) if not self._gap_lead else None
            if tok:  # an orphan closer after a block: swallowed, the stretch goes on
                self._pos = self._gap_s = j + len(tok)
                return True
            if tok == NEED_TOKEN:
                return False
            tok = self._match(j, self._openers)
            if tok:
                return self._start_opener(tok, j)
            if tok == NEED_TOKEN:
                return False
        elif self._gap_lead and c == "{":
            return self._start_json(j, _P_UNTAGGED)
        elif self._gap_lead and c == "`" and _col_after(self._col, self._gap_ws) <= 3:
            self._fence = _FenceHold(j)
            self._mode = FENCE_OPEN
            return True
        self._flush_gap()
        self._mode = TEXT
        return True

    def _h_text(self) -> bool:
        """Prose: emit in bulk up to an opener, a partial opener, or code (R2, R3, R9)."""
        buf = self._buf
        n = len(buf)
        start = scan = self._pos  # emit from start; look for the next stop from scan
        search = _TEXT_STOP.search
        opener = self._opener_re.match
        while True:
            m = search(buf, scan)
            if m is None:
                self._emit(buf[start:] if start else buf)
                self._pos = n
                return False
            j = m.start()
            if buf[j] == "<":
                om = opener(buf, j)
                if om is not None:
                    self._emit(buf[start:j])
                    return self._start_opener(om.group(), j)
                if n - j < self._opener_max and self._match(j, self._openers) == NEED_TOKEN:
                    self._emit(buf[start:j])
                    self._pos = j
                    return False
                scan = j + 1
                continue
            self._emit(buf[start:j])  # the column must be current for a fence line start
            # Fast path: a code span wholly in the buffer goes out with the prose around it.
            end = inline_span_end(buf, j) if self._col > 3 else -1
            if end < 0:  # a possible fence, or a span not complete in the buffer
                self._code = CodeScan(line_start=self._col <= 3)
                self._pos = j
                self._mode = CODE
                return True
            start, scan = j, end

    def _h_code(self) -> bool:
        """Code: emitted as it comes, nothing detected (R9)."""
        code = self._code
        assert code is not None
        end, prose = code.scan(self._buf, self._pos, self._eos)
        self._emit(self._buf[self._pos : end])
        self._pos = end
        if prose:
            self._mode = TEXT
        return prose

    # ------------------------------------------------------------------------- block states

    def _h_wrap(self) -> bool:
        """After ``<tool_call>``: JSON form, XML form, or prose (R4)."""
        buf = self._buf
        m = NON_WS.search(buf, self._pos)
        if m is None:
            self._pos = len(buf)
            return self._eos and self._cut()  # R11: a lone <tool_call>
        j = self._pos = m.start()
        c = buf[j]
        if c in "{[":
            self._commit()
            return self._start_json(j, _P_WRAP)
        tok = self._match(j, (FUNCTION,))
        if tok:
            self._commit()
            return self._start_xml(j + len(FUNCTION), None)
        if tok == NEED_TOKEN:
            return False
        if self._eos and buf.startswith("<", j) and FUNCTION.startswith(buf[j:]):
            return self._cut()  # cut inside "<function="
        return self._release_opener()

    def _h_xml(self) -> bool:
        """One XML-form function: a call, malformed, or a bare opener that was prose."""
        xml = self._xml
        assert xml is not None
        result = xml.scan(self._buf, self._eos)
        if result == XML_NEED:
            return False
        if result == XML_PROSE:
            return self._release_opener()
        self._commit()
        if result == XML_FAIL:
            return self._cut() if self._eos else self._malformed(xml.pos)
        self._add_call(xml.call)
        return self._after_function(xml.end, closed_wrapper=xml.closed_wrapper)

    def _after_function(self, end: int, *, closed_wrapper: bool) -> bool:
        """After ``</function>``: a bare block ends; a wrapper may go on (R5)."""
        if closed_wrapper or not self._wrapped:
            return self._end_block(end)
        self._after = self._pos = end
        self._mode = FN_AFTER
        return True

    def _h_fn_after(self) -> bool:
        """In a wrapper after ``</function>``: another function or the optional closer."""
        buf = self._buf
        m = NON_WS.search(buf, self._pos)
        if m is None:
            self._pos = len(buf)
            # R11: only </tool_call> is missing: the block is complete.
            return self._eos and self._end_block(self._after)
        j = self._pos = m.start()
        tok = self._match(j, (FUNCTION, END_TOOL_CALL))
        if tok == NEED_TOKEN:
            return False
        if tok == FUNCTION:  # several functions may share one wrapper (R5)
            return self._start_xml(j + len(FUNCTION), None)
        if tok:
            return self._end_block(j + len(tok))
        return self._end_block(self._after)  # the closer is optional (R5)

    def _h_json(self) -> bool:
        """A JSON value: calls (R7, R8), malformed (R12), or an untagged ``{`` that is text."""
        js = self._js
        assert js is not None
        end = js.scan(self._buf)
        purpose = self._js_purpose
        if end == SCAN_NEED:
            return self._eos and self._cut()  # R11: unfinished JSON
        if end == SCAN_FAIL:
            if purpose == _P_UNTAGGED:
                return self._release_untagged()
            return self._malformed(js.pos)
        value = decode_json(self._buf[js.start : end])
        if purpose == _P_WRAP:
            calls = calls_from_wrapped(value)
            if calls is None:
                self._add_bad()  # valid or not, the block ends where the value ends (R7)
            else:
                for call in calls:
                    self._add_call(call)
            self._after = self._pos = end
            self._mode = JSON_END
            return True
        found = call_from_object(value) if value is not INVALID else None
        if found is None or found.name not in self._index.names:
            return self._release_untagged()
        self._commit()
        self._add_call(found)
        if self._fence is not None:
            self._fence.json_only = True
        return self._end_block(end)

    def _release_untagged(self) -> bool:
        """R8: an answer-initial ``{`` that is not a call is ordinary text."""
        if self._fence is not None:
            return self._release_fence()
        assert self._js is not None
        self._flush_gap()
        self._pos = self._js.start
        self._mode = TEXT
        return True

    def _h_json_end(self) -> bool:
        """After a wrapper's JSON: the optional ``</tool_call>`` (R7)."""
        buf = self._buf
        m = NON_WS.search(buf, self._pos)
        if m is None:
            self._pos = len(buf)
            return self._eos and self._end_block(self._after)
        j = self._pos = m.start()
        tok = self._match(j, (END_TOOL_CALL,))
        if tok == NEED_TOKEN:
            return False
        return self._end_block(j + len(tok) if tok else self._after)

    def _h_skip(self) -> bool:
        """A malformed block: hidden up to its closer (R12)."""
        buf = self._buf
        m = self._skip_re.search(buf, self._pos)
        if m is None:
            if self._eos:
                return self._end_block(len(buf))
            self._pos = max(self._pos, len(buf) - self._skip_margin)
            return False
        # A closing fence (inside an answer-initial fence) ends the block before its line.
        return self._end_block(m.start() if buf[m.start()] == "\n" else m.end())

    # ------------------------------------------------------------- answer-initial fence (R8)

    def _h_fence_open(self) -> bool:
        """An answer-initial fence's opener line: backticks, then an info string (R8)."""
        fence = self._fence
        assert fence is not None
        buf = self._buf
        if not fence.info:
            end = run_end(buf, self._pos)
            self._pos = end
            if end == len(buf) and not self._eos:
                return False
            fence.n = end - fence.start
            if fence.n < 3:
                return self._release_fence()
            fence.info = True
        m = _INFO_STOP.search(buf, self._pos)
        if m is None:
            self._pos = len(buf)
            return self._eos and self._release_fence()
        j = m.start()
        if buf[j] == "`":  # an info string cannot hold a backtick: inline code
            return self._release_fence()
        self._pos = fence.item_end = j
        self._mode = FENCE_BETWEEN
        return True

    def _h_fence_between(self) -> bool:
        """Inside an answer-initial fence: blocks, one call object, or the closing fence."""
        fence = self._fence
        assert fence is not None
        buf = self._buf
        m = NON_WS.search(buf, self._pos)
        if m is None:
            self._pos = len(buf)
            if not self._eos:
                return False
            # R11: a body of complete blocks missing only its closing fence is accepted.
            return self._accept_fence(len(buf)) if fence.has_blocks else self._release_fence()
        j = self._pos = m.start()
        c = buf[j]
        if c == "`":
            line = buf.rfind("\n", fence.item_end, j)
            indent = buf[line + 1 : j]
            if line < 0 or len(indent) > 3 or indent.strip(" "):
                return self._release_fence()
            m2 = _FENCE_CLOSE.match(buf, j)
            assert m2 is not None
            end = m2.end()
            if end == len(buf) and not self._eos:
                return False
            closes = len(m2.group(1)) >= fence.n and (end == len(buf) or buf[end] == "\n")
            if closes and fence.has_blocks:
                return self._accept_fence(end)
            return self._release_fence()
        if c == "{" and not fence.has_blocks:
            return self._start_json(j, _P_UNTAGGED)
        if c == "<" and not fence.json_only:
            tok = self._match(j, (*self._openers, *(_CLOSERS if fence.has_blocks else ())))
            if tok == NEED_TOKEN:
                return False
            if tok in _CLOSERS:
                self._pos = fence.item_end = j + len(tok)
                return True
            if tok:
                return self._start_opener(tok, j)
        return self._release_fence()

    def _accept_fence(self, end: int) -> bool:
        """The fence held only calls: hide it and release what it produced (R8)."""
        fence = self._fence
        assert fence is not None
        self._fence = None
        self._calls.extend(fence.calls)
        self._bad += fence.bad
        self._commit()
        return self._end_block(end)

    def _release_fence(self) -> bool:
        """The fence is ordinary code: release it and re-read it as such (R9)."""
        fence = self._fence
        assert fence is not None
        self._fence = None
        self._flush_gap()
        self._pos = fence.start
        self._mode = TEXT
        return True


@dataclasses.dataclass(slots=True)
class _FenceHold:
    """An answer-initial fence being decided (R8): what its body produced so far."""

    start: int
    n: int = 0
    info: bool = False
    item_end: int = 0
    json_only: bool = False
    calls: list[TextToolCall] = dataclasses.field(default_factory=list)
    bad: int = 0

    @property
    def has_blocks(self) -> bool:
        return bool(self.calls) or self.bad > 0
