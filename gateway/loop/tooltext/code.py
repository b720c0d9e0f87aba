"""Markdown code in the answer (SPEC 4a R9), for :mod:`gateway.loop.tooltext.filter`.

Inside code nothing is detected, so the filter hands the text from a backtick run on to
:class:`CodeScan` and gets back how far the code goes; all of it is visible and is released at
once. The rules, as a Markdown reader would see them:

* A run of N backticks opens an inline code span, closed by the next run of exactly N; the span
  resets at a newline (an unclosed span ends with its line).
* A run of three or more at a line start (up to three spaces of indent) whose line holds no other
  backtick opens a fenced block; it closes at a line holding, after up to three spaces, a run at
  least as long and then only spaces or tabs (and the CR of a CRLF line end). A fence line
  whose info string holds a backtick is an inline span (CommonMark). ``~~~`` fences are not
  code (R9 names only backticks).
"""

from __future__ import annotations

import re
from typing import Final

_SPAN_STOP: Final = re.compile(r"[`\n]")
_TICK_RUN: Final = re.compile(r"`*")

_TICKS, _SPAN, _FENCED = range(3)
# Where FENCED is in a line, looking for the closing fence.
_BODY, _SPACES, _RUN, _TAIL = range(4)


def run_end(buf: str, j: int) -> int:
    """The index just past the backtick run starting at ``j`` (``j`` if there is none)."""
    return _TICK_RUN.match(buf, j).end()  # type: ignore[union-attr]  # `* always matches


def inline_span_end(buf: str, j: int) -> int:
    """Where an inline span opened at ``j`` (not a fence candidate) ends, if the buffer shows it.

    Returns:
        The index just past the closing run or the resetting newline, or -1 when that is not
        in the buffer yet (a run at the end of the buffer may still grow).
    """
    n = len(buf)
    k = run_end(buf, j) - j
    pos = j + k
    while pos < n:
        m = _SPAN_STOP.search(buf, pos)
        if m is None:
            return -1
        q = m.start()
        if buf[q] == "\n":
            return q + 1
        pos = run_end(buf, q)
        if pos >= n:
            return -1
        if pos - q == k:
            return pos
    return -1


class CodeScan:
    """Follows code from its first backtick until prose resumes; resumable across chunks."""

    __slots__ = (
        "_fence_candidate",
        "_fence_n",
        "_fk",
        "_fl",
        "_line_start",
        "_span_n",
        "_state",
        "_ticks",
    )

    def __init__(self, *, line_start: bool) -> None:
        """Start at a backtick run.

        Args:
            line_start: Whether the run starts a line (after at most three spaces).
        """
        self._line_start = line_start
        self._state = _TICKS
        self._ticks = 0
        self._span_n = 0  # the opening run's length
        self._fence_candidate = False
        self._fence_n = 0
        self._fl = _BODY
        self._fk = 0

    def scan(self, buf: str, pos: int, eos: bool) -> tuple[int, bool]:
        """Read code from ``pos``.

        Args:
            buf: The filter's buffer.
            pos: Where the last call stopped.
            eos: Whether the stream has ended.

        Returns:
            ``(end, prose)``: ``buf[pos:end]`` is code text, and ``prose`` says whether prose
            resumes at ``end`` (otherwise ``end`` is the end of the buffer).
        """
        n = len(buf)
        while True:
            if self._state == _TICKS:
                end = run_end(buf, pos)
                self._ticks += end - pos
                pos = end
                if end == n and not eos:
                    return pos, False
                if self._span_n == 0:  # the opening run
                    self._span_n = self._ticks
                    self._fence_candidate = self._line_start and self._ticks >= 3
                elif self._ticks == self._span_n:  # the matching closer
                    return pos, True
                else:  # another run: a fence's opener line cannot hold backticks
                    self._fence_candidate = False
                self._state = _SPAN
            elif self._state == _SPAN:
                m = _SPAN_STOP.search(buf, pos)
                if m is None:
                    return n, False
                j = m.start()
                if buf[j] == "`":
                    pos = j
                    self._ticks = 0
                    self._state = _TICKS
                    continue
                pos = j + 1
                if not self._fence_candidate:
                    return pos, True  # spans reset at a newline
                self._fence_n = self._span_n
                self._fl = _SPACES
                self._fk = 0
                self._state = _FENCED
            else:
                return self._fenced(buf, pos)

    def _fenced(self, buf: str, pos: int) -> tuple[int, bool]:
        n = len(buf)
        while pos < n:
            fl = self._fl
            if fl == _BODY:
                j = buf.find("\n", pos)
                if j < 0:
                    return n, False
                pos = j + 1
                self._fl = _SPACES
                self._fk = 0
                continue
            c = buf[pos]
            if fl == _SPACES:
                if c == " " and self._fk < 3:
                    self._fk += 1
                elif c == "`":
                    self._fl = _RUN
                    self._fk = 1
                else:
                    self._fl = _BODY
                    continue
            elif fl == _RUN and c == "`":
                self._fk += 1
            elif self._fk >= self._fence_n and c in " \t\r":
                self._fl = _TAIL
            elif self._fk >= self._fence_n and c == "\n":
                return pos + 1, True  # the closing fence line
            else:
                self._fl = _BODY
                continue
            pos += 1
        return n, False
