"""Render a (pruned) lxml HTML tree to text with inscriptis and a reader CSS profile.

inscriptis 2.7.6 out of the box indents every nested ``<div>``, loses the newlines of
``<pre><code>``, runs ``<dt>term</dt><dd>def</dd>`` together as "termdef" and cannot mark
headings (a CSS prefix is repeated before every text chunk of the element). The reader
profile here fixes that (see ``shared/notes/extraction.md``, "inscriptis notes"):

* every element inherits ``white-space`` from its parent, as CSS says, so markup inside
  ``<pre>`` keeps the code's newlines and indentation;
* ``section``, ``dl``/``dt``/``dd``, ``details``/``summary``, ``hr``, ``fieldset`` and friends
  are blocks; ``div`` is a block without indentation; lists indent by 2;
* inline ``style`` attributes may hide an element or switch ``white-space``, but their
  margins and paddings are ignored: a page cannot spend our budget on indentation;
* headings get ``#`` markers and ``<pre>`` blocks get fences, inserted at the offsets of
  inscriptis annotations.

For speed, inline elements that change nothing in the text (``span``, ``a``, ``em`` ...)
are unwrapped before rendering and CSS elements copy themselves in straight-line code.
:func:`squeeze_layout` then removes the layout spaces and paragraph gaps that cost budget,
and :func:`drop_repeated_passages` the second copy of a passage a responsive page renders
twice (the reader applies it to pages that do not call themselves articles).

Raises whatever inscriptis raises (``RecursionError`` on very deep trees); the caller falls back.
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

from inscriptis.css_profiles import CSS_PROFILES
from inscriptis.html_engine import Inscriptis
from inscriptis.html_properties import Display, WhiteSpace
from inscriptis.model.canvas.block import Block
from inscriptis.model.config import ParserConfig
from inscriptis.model.html_element import HtmlElement as CssElement
from lxml import etree

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = ["drop_repeated_passages", "render", "squeeze_layout"]

_INHERIT: Any = None  # inscriptis reads a false-y whitespace as "inherit from the parent"

_BLOCKS = (
    "section",
    "dl",
    "dt",
    "details",
    "summary",
    "hr",
    "center",
    "fieldset",
    "legend",
    "caption",
    "form",
    "menu",
    "dir",
    "search",
    "address",
    "main",
    "article",
    "header",
    "footer",
    "hgroup",
    "figcaption",
    "blockquote",
    "div",
    "li",
    "nav",
    "aside",
    "noscript",
)

# Inline elements that change nothing in the text: unwrapped (text kept) before rendering,
# because inscriptis spends most of its per-element work on them; a third fewer elements,
# identical output on the corpus. (A ``white-space`` style on one of them is lost.)
_UNWRAP = (
    "a", "abbr", "b", "bdi", "bdo", "big", "cite", "data", "del", "dfn", "em", "font", "i",
    "img", "ins", "label", "mark", "picture", "s", "small", "source", "span", "strike",
    "strong", "time", "u", "wbr",
)  # fmt: skip

_HEADINGS = {f"h{level}": "#" * level + " " for level in range(1, 7)}
_FENCE = "```"
_SPACE_RUN = re.compile(" {3,}")
_HEADING_LINE = re.compile("#{1,6} ")
_LEADING_PREFIX = re.compile(r"\s*(?:[*+o-] |\d+\. )?")


_KNOWN_SLOTS = (
    "align", "annotation", "canvas", "display", "limit_whitespace_affixes", "list_bullet",
    "margin_after", "margin_before", "padding_inline", "prefix", "previous_margin_after",
    "suffix", "tag", "valign", "whitespace",
)  # fmt: skip
_BLOCK_SLOTS = ("_content", "collapsable_whitespace", "idx", "prefix")


def _merge_normal(block: Block, text: str) -> None:
    """Append text to a line the way ``Block.merge_normal_text`` does, without its loop.

    inscriptis collapses white space one character at a time in Python, the slowest step
    of its render; ``str.split`` does it in C and splits on exactly the characters
    ``str.isspace`` names. Unlike inscriptis it does not ``html.unescape`` the text a
    second time: lxml already decoded the page's entities.
    """
    words = text.split()
    if words:
        line = " ".join(words)
        if not block.collapsable_whitespace and text[0].isspace():
            line = " " + line
        trailing = text[-1].isspace()
        if trailing:
            line += " "
        block.collapsable_whitespace = trailing
    elif block.collapsable_whitespace or not text:
        return
    else:
        line = " "
        block.collapsable_whitespace = True
    if not block._content:
        line = block.prefix.first + line
    block._content += line
    block.idx += len(line)


def _merge_pre(block: Block, text: str) -> None:
    """``Block.merge_pre_text`` without its second entity decoding."""
    text = block.prefix.first + text.replace("\n", "\n" + block.prefix.rest)
    block._content += text
    block.idx += len(text)
    block.collapsable_whitespace = False


class _QuickCopy(CssElement):  # type: ignore[misc]  # inscriptis is untyped
    """A CSS element that copies itself in straight-line code and writes text without
    inscriptis' per-character loop.

    inscriptis copies a profile element for every element it renders, with a loop of
    ``getattr``/``setattr`` over 15 slots; this is five times faster, a tenth of the render.
    Its text goes straight to the canvas's current line (:func:`_merge_normal`,
    :func:`_merge_pre`), which is what ``Canvas.write`` and ``Block.merge`` do, decoding
    entities once instead of twice. Used only while inscriptis has exactly the slots below
    (see :data:`_Css`); ``tests/fetcher/html/test_render.py`` fails loudly when they change.
    """

    __slots__ = ()

    def __copy__(self) -> _QuickCopy:
        new = object.__new__(_QuickCopy)
        new.align = self.align
        new.annotation = self.annotation
        new.canvas = self.canvas
        new.display = self.display
        new.limit_whitespace_affixes = self.limit_whitespace_affixes
        new.list_bullet = self.list_bullet
        new.margin_after = self.margin_after
        new.margin_before = self.margin_before
        new.padding_inline = self.padding_inline
        new.prefix = self.prefix
        new.previous_margin_after = self.previous_margin_after
        new.suffix = self.suffix
        new.tag = self.tag
        new.valign = self.valign
        new.whitespace = self.whitespace
        return new

    def write(self, text: str) -> None:
        if not text or self.display is Display.none:
            return
        if self.prefix or self.suffix:
            text = "".join((self.prefix, text, self.suffix))
        if self.whitespace is WhiteSpace.pre:
            _merge_pre(self.canvas.current_block, text)
        else:
            _merge_normal(self.canvas.current_block, text)

    def write_verbatim_text(self, text: str) -> None:
        if not text:
            return
        if self.display is Display.block:
            self.canvas.open_block(self)
        _merge_pre(self.canvas.current_block, text)
        if self.display is Display.block:
            self.canvas.close_block(self)


# Another inscriptis version may add a slot that the quick copy would miss, or keep its
# lines differently; then inscriptis' own code runs, and its second decoding is undone in
# advance (:func:`_escape_ampersands`).
QUICK = (
    tuple(sorted(CssElement.__slots__)) == _KNOWN_SLOTS
    and tuple(sorted(Block.__slots__)) == _BLOCK_SLOTS
)
_Css: type[CssElement] = _QuickCopy if QUICK else CssElement


def _as_css(element: CssElement) -> CssElement:
    converted = object.__new__(_Css)
    for slot in CssElement.__slots__:
        setattr(converted, slot, getattr(element, slot))
    return converted


class _Profile(dict[str, CssElement]):
    """A CSS profile whose unknown elements are inline and inherit ``white-space``.

    inscriptis looks tags up with ``css.get(tag, default)``; its own default is an inline
    element with ``white-space: normal``, which is why ``<pre><code>`` lost its newlines.
    """

    _fallback = _Css(whitespace=_INHERIT)

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key, self._fallback)


def _build_profile() -> _Profile:
    css = _Profile()
    for tag, strict in CSS_PROFILES["strict"].items():
        element = _as_css(strict)
        if element.whitespace is WhiteSpace.normal and tag != "body":
            element.whitespace = _INHERIT
        css[tag] = element
    for tag in _BLOCKS:
        css[tag] = _Css(display=Display.block, whitespace=_INHERIT)
    css["dd"] = _Css(display=Display.block, padding_inline=2, whitespace=_INHERIT)
    for tag in ("ul", "ol"):
        css[tag] = _Css(display=Display.block, padding_inline=2, whitespace=_INHERIT)
    for tag in ("pre", "xmp", "listing", "plaintext"):
        css[tag] = _Css(
            display=Display.block, margin_before=1, margin_after=1, whitespace=WhiteSpace.pre
        )
    for tag in ("head", "title", "script", "style", "template", "link", "meta"):
        css[tag] = _Css(display=Display.none)
    return css


def _apply_style(value: str, element: CssElement) -> None:
    """Honour the parts of an inline ``style`` that matter for text, ignore the rest."""
    for declaration in value.lower().split(";"):
        name, _, setting = declaration.partition(":")
        name, setting = name.strip(), setting.strip()
        if (name == "display" and setting == "none") or (
            name == "visibility" and setting == "hidden"
        ):
            element.display = Display.none
        elif name == "white-space":
            if setting.startswith("pre"):
                element.whitespace = WhiteSpace.pre
            elif setting in ("normal", "nowrap"):
                element.whitespace = WhiteSpace.normal


class _StyleOnly:
    """Stands in for inscriptis' attribute handler, which loops over every attribute of
    every element; the only attribute that matters here is ``style``."""

    def apply_attributes(self, attributes: Any, html_element: CssElement) -> CssElement:
        style = attributes.get("style")
        if style:
            _apply_style(style, html_element)
        return html_element


def _build_config() -> ParserConfig:
    rules = {tag: [tag] for tag in _HEADINGS}
    rules["pre"] = ["pre"]
    config = ParserConfig(css=_build_profile(), annotation_rules=rules)
    # ParserConfig deep-copies the profile to add annotations; keep our lookup behaviour.
    config.css = _Profile(config.css)
    config.attribute_handler = _StyleOnly()
    return config


_CONFIG = _build_config()


def _fresh_config() -> ParserConfig:
    """Return a config safe to use in one render.

    inscriptis attaches its canvas to the profile's ``body`` element, so two renders sharing
    one profile (threads) would write into each other; everything else is read-only.
    """
    config = copy.copy(_CONFIG)
    css = _Profile(_CONFIG.css)
    css["body"] = copy.copy(_CONFIG.css["body"])
    config.css = css
    return config


def _line_start(text: str, position: int) -> int:
    return text.rfind("\n", 0, position) + 1


def _insertions(text: str, annotations: list[Any]) -> list[tuple[int, str]]:
    edits: list[tuple[int, str]] = []
    for note in annotations:
        start, end, label = int(note.start), int(note.end), str(note.metadata)
        if label == "pre":
            body = text[start:end].rstrip()
            if not body.strip():
                continue
            edits.append((_line_start(text, start), _FENCE + "\n"))
            edits.append((start + len(body), "\n" + _FENCE))
        elif label in _HEADINGS:
            match = _LEADING_PREFIX.match(text, start, end)
            at = match.end() if match else start
            if text[at:end].strip():
                edits.append((at, _HEADINGS[label]))
    return edits


def _escape_ampersands(root: HtmlElement) -> None:
    """Undo in advance the second entity decoding inscriptis applies to text.

    inscriptis runs ``html.unescape`` on text lxml has already decoded, so a page showing
    ``&lt;b&gt;`` (an HTML tutorial) would read ``<b>``, and "a=1&copy=2" would read
    "a=1©=2". Escaping ``&`` in the few text nodes holding one makes that step a no-op.
    """
    done: set[tuple[HtmlElement, bool]] = set()
    for value in root.xpath("//text()[contains(., '&')]"):
        parent = value.getparent()
        key = (parent, bool(value.is_tail))
        if parent is None or key in done:
            continue  # adjacent text nodes come back one by one but share one .text
        done.add(key)
        if value.is_tail:
            parent.tail = (parent.tail or "").replace("&", "&amp;")
        else:
            parent.text = (parent.text or "").replace("&", "&amp;")


def render(root: HtmlElement) -> str:
    """Render a document tree to text with heading markers and fenced code blocks.

    Args:
        root: The document root (usually already pruned); inline elements are unwrapped
            in place.

    Returns:
        The text, not yet normalised (trailing blanks and blank runs remain).
    """
    etree.strip_tags(root, *_UNWRAP)
    if not QUICK:
        _escape_ampersands(root)
    engine = Inscriptis(root, _fresh_config())
    text: str = engine.get_text()
    edits = _insertions(text, list(engine.get_annotations()))
    if not edits:
        return text
    edits.sort(key=lambda edit: edit[0])
    pieces: list[str] = []
    last = 0
    for position, insert in edits:
        pieces.append(text[last:position])
        pieces.append(insert)
        last = position
    pieces.append(text[last:])
    return "".join(pieces)


def squeeze_layout(text: str) -> str:
    """Remove the spaces and blank lines inscriptis lays text out with, outside code blocks.

    Table columns are padded to their widest cell and a cell in a second column is
    indented by the width of the first, so a layout table can spend a quarter of the page
    budget on spaces. Outside fenced code, lines lose their indentation and runs of three or
    more spaces shrink to two, which still separates table cells; nested list items stay
    distinguishable by their bullets (``*``, ``+``, ``o``, ``-``). inscriptis never wraps
    lines, so every paragraph is one line and the blank line between two paragraphs tells
    the reader nothing: only blank lines before a heading or a code block stay. On the
    corpus this puts 0.1-0.2 points more of the article into the page budget.

    Works line by line (looking one line ahead), so squeezing the head of a text gives the
    head of the squeezed text, up to its last line.

    Args:
        text: Rendered, normalised text.

    Returns:
        The text with layout spaces and paragraph gaps removed.
    """
    lines = text.split("\n")
    kept: list[str] = []
    in_code = False
    for index, line in enumerate(lines):
        if line.startswith(_FENCE):
            in_code = not in_code
        elif in_code:
            pass
        elif not line:
            following = lines[index + 1] if index + 1 < len(lines) else ""
            if not (following.startswith(_FENCE) or _HEADING_LINE.match(following)):
                continue
        elif line.startswith(" ") or "   " in line:
            kept.append(_SPACE_RUN.sub("  ", line.lstrip(" ")))
            continue
        kept.append(line)
    return "\n".join(kept)


# A passage read twice: at least this many lines holding at least this many characters.
_REPEAT_LINES = 3
_REPEAT_CHARS = 200


def drop_repeated_passages(text: str) -> str:
    """Read a passage that the text repeats, line for line, only once.

    Responsive pages carry a copy of their content for each screen size (a specification
    table for desktops and again for phones, a product's description in a tab and in a
    fold), and both copies render: the second spends budget on nothing new. A run of at
    least :data:`_REPEAT_LINES` lines and :data:`_REPEAT_CHARS` characters that repeats the
    lines following an earlier occurrence of its first line is dropped. Lines repeated
    one by one (a "Reply" under each post, the same heading over each section) and
    passages in fenced code stay: only whole repeated passages go (docs/reader.md).

    Linear: each line is compared against the lines after one earlier occurrence of its
    own, and a comparison that does not drop its lines stops within the size of a
    passage; a text of ``n`` characters costs ``O(n)`` comparisons.

    Args:
        text: Squeezed text (:func:`squeeze_layout`): code fenced, other lines unindented.

    Returns:
        The text without its repeated passages.
    """
    lines = text.split("\n")
    in_code = [False] * len(lines)
    inside = False
    for index, line in enumerate(lines):
        if line.startswith(_FENCE):
            inside = not inside
            in_code[index] = True
        else:
            in_code[index] = inside
    first: dict[str, int] = {}
    kept: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        earlier = first.get(line) if line and not in_code[index] else None
        if earlier is not None:
            size = chars = 0
            while (
                index + size < len(lines)
                and earlier + size < index
                and not in_code[index + size]
                and lines[index + size] == lines[earlier + size]
            ):
                chars += len(lines[index + size])
                size += 1
                if size > _REPEAT_CHARS and chars < _REPEAT_CHARS:
                    break  # only blank lines and scraps so far: no passage
            if size >= _REPEAT_LINES and chars >= _REPEAT_CHARS:
                index += size
                continue
        if line and not in_code[index]:
            first.setdefault(line, index)
        kept.append(line)
        index += 1
    return "\n".join(kept)
