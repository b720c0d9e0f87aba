"""Checked citations (SPEC 4): the ``[n]`` an answer wrote, checked against the ledger. Pure.

The answer's text is never rewritten; `check_citations` only reports which numbers the
ledger has (``cited``) and which it does not (``unknown``), so a page or client can mark
a citation that points at nothing.

What counts as a citation (`citation_numbers`), decided here because SPEC 4 only says
``[n]``:

- ``[n]`` with n a decimal number from 1 to 9999 written without leading zeros.
  ``[0]``, ``[01]`` and ``[12345]`` are not citations (the ledger numbers from 1; the
  others read as indexes or years more often than as sources).
- Lists and ranges inside one pair of brackets: ``[1, 2]``, ``[1;2]``, ``[1-3]``,
  ``[1–3]`` (en dash), ``[1, 3-5]``. A range is expanded (``[1-3]`` cites 1, 2 and 3)
  when it goes up and spans at most 50 numbers; a bracket holding a range that goes down
  or spans more is not a citation at all, and neither is one with any other item
  (``[1, a]``). Adjacent brackets are separate citations: ``[1][2]`` cites 1 and 2.
- Not citations: a Markdown link or image text (``[1](https://…)``), a link reference
  definition at the start of a line (``[1]: https://…``), a footnote (``[^1]``), and
  anything inside code: fenced blocks (```` ``` ```` or ``~~~``, up to three spaces of
  indent, closed by a fence of the same character at least as long) and inline code
  spans (backtick runs matched on the same line), where ``a[1]`` is code, not a source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from gateway.tools.events import Citations

#: The widest range expanded, in numbers.
MAX_RANGE: Final = 50

_NUMBER: Final = r"\d{1,5}"
_ITEM: Final = rf"{_NUMBER}(?:\s*[-–]\s*{_NUMBER})?"
_BRACKET: Final = re.compile(rf"\[\s*({_ITEM}(?:\s*[,;]\s*{_ITEM})*)\s*\](?!\()")
_FENCE: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BACKTICKS: Final = re.compile(r"`+")
_REFERENCE: Final = re.compile(r"^ {0,3}\[[^\]]*\]:")


def _number(text: str) -> int | None:
    text = text.strip()
    if text.startswith("0") or len(text) > 4:
        return None
    return int(text)


def _items(body: str) -> list[int] | None:
    numbers: list[int] = []
    for item in re.split(r"\s*[,;]\s*", body.strip()):
        low_text, dash, high_text = item.replace("–", "-").partition("-")
        low = _number(low_text)
        if low is None:
            return None
        if not dash:
            numbers.append(low)
            continue
        high = _number(high_text)
        if high is None or high < low or high - low >= MAX_RANGE:
            return None
        numbers.extend(range(low, high + 1))
    return numbers


def _without_code_spans(line: str) -> str:
    """The line with inline code spans blanked (a run of n backticks closes at the next
    run of exactly n; an unmatched run is literal text)."""
    out: list[str] = []
    at = 0
    while True:
        opener = _BACKTICKS.search(line, at)
        if opener is None:
            out.append(line[at:])
            return "".join(out)
        size = len(opener.group())
        closer = None
        for candidate in _BACKTICKS.finditer(line, opener.end()):
            if len(candidate.group()) == size:
                closer = candidate
                break
        if closer is None:
            out.append(line[at : opener.end()])
            at = opener.end()
            continue
        out.append(line[at : opener.start()])
        out.append(" " * (closer.end() - opener.start()))
        at = closer.end()


def _prose_lines(text: str) -> Iterable[str]:
    """The lines outside fenced code blocks."""
    fence: str | None = None
    for line in text.split("\n"):
        opener = _FENCE.match(line)
        if fence is not None:
            closes = (
                opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence)
            )
            if closes and opener and not line[opener.end() :].strip():
                fence = None
            continue
        if opener and not (opener.group(1)[0] == "`" and "`" in line[opener.end() :]):
            fence = opener.group(1)
            continue
        yield line


def citation_numbers(text: str) -> list[int]:
    """Every number cited in ``text``, in order of appearance, repeats kept."""
    numbers: list[int] = []
    for raw in _prose_lines(text):
        line = _without_code_spans(raw)
        reference = _REFERENCE.match(line)
        start = reference.end() if reference else 0
        for match in _BRACKET.finditer(line, start):
            items = _items(match.group(1))
            if items is not None:
                numbers.extend(items)
    return numbers


def check_citations(text: str, known: Iterable[int]) -> Citations:
    """The ``citations`` event of an answer.

    Args:
        text: Everything the answer showed the user.
        known: The ledger's numbers.
    """
    ledger = set(known)
    cited = set(citation_numbers(text))
    return Citations(tuple(sorted(cited & ledger)), tuple(sorted(cited - ledger)))
