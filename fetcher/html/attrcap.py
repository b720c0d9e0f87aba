"""A cap on the attributes of one element, applied to the markup before libxml2 parses it.

Pure: text in, text out, in one linear pass. libxml2's HTML parser compares each attribute
of a start tag with every one before it (to drop a repeated name), so one element with
many distinct attributes costs their square: 25,000 take 0.5 s of CPU, 50,000 take 2.6 s,
and a 2 MiB page of them would spend the render worker's whole CPU limit. A start tag
with more than `MAX_ATTRIBUTES` attributes is rewritten to its first `MAX_ATTRIBUTES`,
plus the first of each attribute the reader looks at (`READER_ATTRIBUTES`) found after
them; every other start tag, and everything else, is left exactly as written.

The tags are found the way HTML tokenizes them closely enough for this purpose: a ``<``
and a letter start a tag, attribute values in quotes may hold ``>``; the text of comments,
scripts and styles is not markup and is never changed (a script's JSON may hold an SVG
path that looks like a tag with hundreds of attributes). Only a start tag of more than
`MAX_ATTRIBUTES` attributes is ever changed.
"""

from __future__ import annotations

import re

#: Most attributes kept on one element. Real pages stay far below it (an SVG path or a
#: heavily data-attributed widget has a few dozen); a 2 MiB page of elements of 128
#: attributes each parses in about twice the time of a plain page of the same size.
MAX_ATTRIBUTES = 128

#: The attributes the reader uses, kept (their first occurrence) wherever they stand in
#: a capped tag: links (``href``, ``<base href>``), pruning and main-content detection
#: (``role``, ``hidden``, ``aria-hidden``, ``style``, ``class``, ``id``), rendering
#: (``style``).
READER_ATTRIBUTES = frozenset({"href", "role", "hidden", "aria-hidden", "style", "class", "id"})

# HTML's white space (ASCII only, as libxml2 reads it; \s would take NBSP and others too).
_WS = r"[ \t\n\r\f]"
# One item of a start tag: an attribute (its name, then maybe ``=`` and a value, quoted or
# up to a space or ``>``), or anything else up to a space or ``>``, which libxml2 skips as
# a bogus attribute and then goes on reading attributes: counted too, so it cannot hide
# attributes from the cap. Atomic groups and possessive quantifiers: an item is read one
# way only (a quoted value is never re-read as words), and nothing ever backtracks.
_NAME_TEXT = r"""[^ \t\n\r\f"'<>/=][^ \t\n\r\f"'<>/=]*+"""
_VALUE_TEXT = r""""[^"]*+"|'[^']*+'|[^ \t\n\r\f>]++"""
_ITEM = rf"(?>{_NAME_TEXT}(?:{_WS}*+={_WS}*+(?:{_VALUE_TEXT}))?+|[^ \t\n\r\f>]++)"
_NEXT_ITEM = rf"[ \t\n\r\f/]*+{_ITEM}"
_TAG_NAME_TEXT = r"<[A-Za-z][^ \t\n\r\f/>]*+"
# Elements whose text libxml2 does not read as markup.
_RAW = r"<(?i:script|style)(?=[ \t\n\r\f/>])"
#: Everything up to the next comment, script, style or crowded start tag, in one match:
#: text, end tags and every other start tag with its items (at most MAX_ATTRIBUTES and
#: no more), so a ``<`` inside a quoted value is never taken for a tag.
_QUIET = re.compile(
    rf"(?:[^<]++|<(?![A-Za-z]|!--)|(?!{_RAW}){_TAG_NAME_TEXT}"
    rf"(?:{_NEXT_ITEM}){{0,{MAX_ATTRIBUTES}}}+(?!{_NEXT_ITEM}))*+"
)
#: A start tag's name followed by more than MAX_ATTRIBUTES items.
_CROWDED = re.compile(rf"{_TAG_NAME_TEXT}(?:{_NEXT_ITEM}){{{MAX_ATTRIBUTES + 1}}}")
#: All of a tag's items; one item (in group 1) with what separates it from the one before.
_ITEMS = re.compile(rf"(?:{_NEXT_ITEM})*+")
_ITEM_AT = re.compile(rf"[ \t\n\r\f/]*+({_ITEM})")
_NAME = re.compile(_NAME_TEXT)
_TAG_NAME = re.compile(_TAG_NAME_TEXT)
_RAW_START = re.compile(_RAW)
_COMMENT_END = re.compile(r"--!?>")
_RAW_END = {"script": re.compile(r"</(?i:script)"), "style": re.compile(r"</(?i:style)")}


def cap_attributes(markup: str) -> str:
    """``markup`` with no start tag holding more than `MAX_ATTRIBUTES` attributes (plus
    the reader's own, `READER_ATTRIBUTES`).

    Args:
        markup: An HTML document, decoded.

    Returns:
        The same text when no tag is over the cap (the common case, and then the very
        object passed in); otherwise each crowded tag rewritten as ``<name attr ...``
        with the attributes kept, in their order, and the rest of the text untouched.

    # Security
    Rule: the parser never sees more than `MAX_ATTRIBUTES` + 7 attributes on one element.
    Threat: a hostile page makes libxml2's quadratic attribute check spend the render
    worker's CPU limit on every page of a site, and saturates the render pool.
    Callers rely on: linear time in the markup, and the reader's attributes surviving.
    Proved by ``tests/fetcher/html/test_attrcap.py`` (both sides of the cap, the reader's
    attributes kept, quoted values holding ``>``); its cost by doubling in
    ``bench/scaling.py``.
    """
    out: list[str] = []
    done = 0
    position = _QUIET.match(markup).end()  # type: ignore[union-attr]
    while position < len(markup):
        if markup.startswith("<!--", position):
            position = _after(_COMMENT_END, markup, position + 4)
        else:
            crowded = _CROWDED.match(markup, position)
            end = _TAG_NAME.match(markup, position).end()  # type: ignore[union-attr]
            if crowded is not None:
                end = _ITEMS.match(markup, crowded.end()).end()  # type: ignore[union-attr]
                out.append(markup[done:position])
                out.append(_rewrite(markup[position:end]))
                done = end
            raw = _RAW_START.match(markup, position)
            if raw is not None:
                # Past the start tag's items, then past the element's text.
                end = _ITEMS.match(markup, end).end()  # type: ignore[union-attr]
                end = _after(_RAW_END[raw.group()[1:].lower()], markup, end)
            position = end
        position = _QUIET.match(markup, position).end()  # type: ignore[union-attr]
    if not out:
        return markup
    out.append(markup[done:])
    return "".join(out)


def _after(closing: re.Pattern[str], markup: str, position: int) -> int:
    """Where the text after ``closing`` starts, searching from ``position`` (the end of
    the markup when it never comes)."""
    found = closing.search(markup, position)
    return len(markup) if found is None else found.end()


def _rewrite(tag: str) -> str:
    """One crowded start tag (``<name`` and its attributes, without the ``>``), capped."""
    name = _TAG_NAME.match(tag)
    assert name is not None  # _CROWDED matched the same
    kept = [name.group()]
    seen: set[str] = set()
    for count, attribute in enumerate(_ITEM_AT.findall(tag, name.end())):
        key = _NAME.match(attribute)
        lowered = key.group().lower() if key is not None else ""
        if count < MAX_ATTRIBUTES or (lowered in READER_ATTRIBUTES and lowered not in seen):
            kept.append(attribute)
            seen.add(lowered)
    return " ".join(kept)
