"""A product's own description from the page's schema.org JSON-LD, when the page shows none.

Shops build their product pages in the browser: the description the reader should find may
be nowhere in the HTML, only in the ``<script type="application/ld+json">`` the shop writes
for search engines (``"@type": "Product"``, its ``description``). :func:`product_description`
takes that text from the page's top-level JSON-LD nodes (a node, a list of nodes, or a
``@graph``), and :func:`adds_to` says whether the reader's text lacks it: then the reader puts
it first (docs/reader.md, round 5). Nested products (a collection's ``ItemList``, a review's
``itemReviewed``) are not the page's own, and other types' descriptions (an article's, an
organisation's) are summaries of what the page already shows, or of nothing on it.

# Security
JSON-LD is written by the page, so it is hostile input like the rest of it: it is only ever a
source of text. Each script is parsed only when it is at most :data:`MAX_SCRIPT` characters,
and at most :data:`MAX_SCRIPTS` of them in all: bounded memory and time whatever the page
holds. ``json.loads`` raises on malformed text and on nesting deeper than the interpreter's
recursion limit; both are caught, and the script is skipped. Only the top-level nodes and
their ``@graph`` are looked at (no walk of the value), the description is read only when it is
a string, at most :data:`MAX_TEXT` characters are kept (markup in it stripped, lone
surrogates replaced, as the text of any page), and nothing in it is followed, fetched or evaluated.
"""

from __future__ import annotations

import html
import json
import re
from typing import TYPE_CHECKING

from fetcher.html.plaintext import normalize_text, strip_tags

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = ["MAX_SCRIPT", "MAX_SCRIPTS", "MAX_TEXT", "adds_to", "product_description"]

# The corpus's largest JSON-LD script is under 60,000 characters.
MAX_SCRIPT = 200_000
MAX_SCRIPTS = 1_000_000  # characters of JSON-LD parsed in all on one page
MAX_TEXT = 4_000  # characters of descriptions kept
_MAX_NODES = 200  # top-level nodes looked at on one page
# A description shorter than this is a product's name or a line of SEO, not its text.
MIN_TEXT = 100
# The reader's text lacks the description when it holds under this share of its word
# trigrams (docs/reader.md: 0.2 on the dev half; 0.5 let in descriptions the page shows in
# other words, at a cost in precision).
MAX_SHARED = 0.2
_GRAM = 3

_PRODUCT_TYPES = frozenset(("product", "productgroup", "productmodel", "individualproduct"))
_WORD = re.compile(r"\w+")
# JSON may spell lone surrogates ("\\ud800"), which no UTF-8 text can carry.
_SURROGATE = re.compile("[\ud800-\udfff]")
_LD_TYPE = "application/ld+json"


def _top_nodes(value: object) -> list[dict[str, object]]:
    """The page's top-level JSON-LD nodes: the value, its list items, their ``@graph``."""
    found: list[dict[str, object]] = []
    items = value if isinstance(value, list) else [value]
    for item in items[:_MAX_NODES]:
        if not isinstance(item, dict):
            continue
        found.append(item)
        graph = item.get("@graph")
        if isinstance(graph, list):
            found.extend(node for node in graph[:_MAX_NODES] if isinstance(node, dict))
    return found[:_MAX_NODES]


def _is_product(node: dict[str, object]) -> bool:
    kind = node.get("@type")
    kinds = kind if isinstance(kind, list) else [kind]
    return any(
        isinstance(name, str) and name.rsplit("/", 1)[-1].lower() in _PRODUCT_TYPES
        for name in kinds[:10]
    )


def _clean(text: str) -> str:
    """Description text as the reader shows text: entities decoded, markup stripped."""
    text = _SURROGATE.sub("\ufffd", text[: 2 * MAX_TEXT])
    if "&" in text:
        text = html.unescape(text)
    if "<" in text:
        text = strip_tags(text)
    return normalize_text(text).strip()


def product_description(root: HtmlElement) -> str:
    """The descriptions of the page's top-level schema.org products, in page order.

    Args:
        root: The document root, scripts still in it; not changed.

    Returns:
        The distinct descriptions of at least :data:`MIN_TEXT` characters, separated by a
        blank line, at most :data:`MAX_TEXT` characters in all; empty when there are none.
        Never raises on what the page holds.
    """
    budget = MAX_SCRIPTS
    texts: list[str] = []
    kept = 0
    for script in root.iter("script"):
        if (script.get("type") or "").strip().lower() != _LD_TYPE:
            continue
        source = script.text
        if not source or len(source) > MAX_SCRIPT or len(source) > budget:
            continue
        budget -= len(source)
        try:
            value = json.loads(source)
        except (ValueError, RecursionError):  # malformed, or nested past the interpreter
            continue
        for node in _top_nodes(value):
            description = node.get("description")
            if not isinstance(description, str) or not _is_product(node):
                continue
            text = _clean(description)
            if len(text) < MIN_TEXT or text in texts:
                continue
            texts.append(text[: MAX_TEXT - kept])
            kept += len(texts[-1]) + 2
            if kept >= MAX_TEXT:
                return "\n\n".join(texts)
    return "\n\n".join(texts)


def _grams(text: str) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[at : at + _GRAM]) for at in range(len(words) - _GRAM + 1)}


def adds_to(description: str, text: str) -> bool:
    """Whether the reader's text lacks a description: it holds under :data:`MAX_SHARED` of
    the description's word trigrams (a description of fewer than three words adds nothing).

    Args:
        description: What :func:`product_description` found.
        text: The reader's text of the page, as it will be cut (at most a page's budget).
    """
    if len(description) < MIN_TEXT:
        return False
    wanted = _grams(description)
    if not wanted:
        return False
    shared = len(wanted & _grams(text))
    return shared < MAX_SHARED * len(wanted)
