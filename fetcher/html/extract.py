"""The page reader: a downloaded body becomes a title, a text and same-site links (SPEC 7, 7-9).

The HTML pipeline is "pruned+" from ``shared/notes/extraction.md``, measured to put the most
article text into the first 12,000 characters:

1. decode (:mod:`fetcher.html.charset`), cap each element's attributes
   (:mod:`fetcher.html.attrcap`: libxml2 is quadratic in them) and parse once with lxml;
2. take the title, and the links from the unpruned tree (:mod:`fetcher.html.links`);
3. drop page chrome on the tree (:mod:`fetcher.html.prune`);
4. find the main content (:mod:`fetcher.html.content`): when it is clear, keep only it, so the
   budget goes to the article rather than to what pruning left around it; otherwise keep
   the whole pruned page;
5. render with inscriptis and the reader CSS profile (:mod:`fetcher.html.render`);
6. normalise (:mod:`fetcher.html.plaintext`: NBSP to space, zero-width characters and controls
   removed, NFC, trailing blanks stripped, blank runs collapsed) and squeeze layout spaces
   and paragraph gaps (:func:`fetcher.html.render.squeeze_layout`); on a page that does not
   say it is an article (``og:type``), read a repeated passage once
   (:func:`fetcher.html.render.drop_repeated_passages`); when the page's schema.org JSON-LD
   describes its product and the text lacks that description (the shop shows it only from
   scripts), put the description first (:mod:`fetcher.html.structured`, read before step 3
   drops the scripts);
7. cut to :data:`PAGE_TEXT_LIMIT` at a line (else word) boundary.

A page that breaks the renderer (very deep nesting) or renders to almost nothing although it
holds text gets a plain-text rendering instead (:func:`fetcher.html.plaintext.plain_text` of the
pruned tree). When that is too little too, pruning took the page (a ``header``, ``footer`` or
``form`` wrapping all of it): the page is read again, pruned without the rules for those
wrappers, so its menus and banners still go and its main content is still found; failing
that, the plain text of the unpruned page. A page with text never reads as empty.
``text/plain`` and ``text/markdown`` bodies are decoded the same way and passed through.
Pure functions: no I/O, no clock, and :func:`read_document` never raises.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from lxml import etree
from lxml.html import (
    HtmlComment,
    HtmlElement,
    HtmlEntity,
    HTMLParser,
    HtmlProcessingInstruction,
    document_fromstring,
)

from fetcher.html.attrcap import cap_attributes
from fetcher.html.charset import decode_body
from fetcher.html.content import (
    declares_article,
    find_main_content,
    keep_only,
)
from fetcher.html.links import MAX_LINKS, are_page_links, page_links
from fetcher.html.plaintext import collapse, normalize_text, plain_text, strip_tags
from fetcher.html.prune import drop_junk, element_count, prune_chrome, text_length, trim_to_budget
from fetcher.html.render import drop_repeated_passages, render, squeeze_layout
from fetcher.html.structured import adds_to, product_description

if TYPE_CHECKING:
    from fetcher.isolation.workers import Wire

__all__ = [
    "PAGE_TEXT_LIMIT",
    "REPORT_TEXT_LIMIT",
    "Document",
    "cut",
    "document_from_wire",
    "normalize_text",
    "plain_text",
    "read_document",
]

PAGE_TEXT_LIMIT = 12_000
REPORT_TEXT_LIMIT = 24_000

_TITLE_LIMIT = 300
# A render with fewer non-blank characters than this, from a page with at least
# _MUCH_TEXT characters of text, is a failure (shared/notes/extraction.md, safety nets).
_TOO_LITTLE = 200
_MUCH_TEXT = 2_000

# Text beyond this many non-blank characters cannot reach the first PAGE_TEXT_LIMIT
# characters of the render; twice the limit leaves room for tables, whose cells render
# side by side rather than in document order.
_RENDER_CHARS = 2 * PAGE_TEXT_LIMIT
# The largest page of the corpus has under 8,000 elements once pruned.
_RENDER_ELEMENTS = 50_000

_HEAD_MARGIN = 1_000

_ONE_CLASS = etree.ElementDefaultClassLookup(
    element=HtmlElement, comment=HtmlComment, pi=HtmlProcessingInstruction, entity=HtmlEntity
)

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})

_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>")
_ATX_HEADING = re.compile(r" {0,3}#{1,6}[ \t]+")
_SETEXT_H1 = re.compile(r" {0,3}=+[ \t]*")
_FENCE = re.compile(r" {0,3}(?:```|~~~)")


@dataclasses.dataclass(frozen=True, slots=True)
class Document:
    """What the reader made of one page.

    Attributes:
        title: The page title, whitespace collapsed; may be empty.
        text: The readable text, already cut to :data:`PAGE_TEXT_LIMIT`.
        links: Absolute https same-site links, deduplicated, best first, at most 24.
    """

    title: str
    text: str
    links: tuple[str, ...]

    def to_wire(self) -> Wire:
        """The document as the JSON a render worker sends back (``fetcher.isolation.workers``)."""
        return {"title": self.title, "text": self.text, "links": list(self.links)}


def document_from_wire(value: object, *, url: str, site: str) -> Document:
    """The document a render worker sent back, checked as untrusted input.

    Args:
        value: The JSON value the worker answered (:meth:`Document.to_wire`).
        url: The page's final address.
        site: The site the page's links must be on.

    Returns:
        The document.

    Raises:
        ValueError: The answer breaks :func:`read_document`'s promises.

    # Security
    The worker parsed hostile bytes and may have been subverted by them; its answer is
    believed only within :func:`read_document`'s contract: a title of at most 300
    characters, a text of at most :data:`PAGE_TEXT_LIMIT`, and links that
    :func:`fetcher.html.links.are_page_links` accepts (at most 24, on the site, https, the
    page's ports). So a worker cannot steer the crawl off the site or past its caps, nor
    overflow the report. Proved by
    ``tests/fetcher/html/test_extract.py::test_a_worker_answer_outside_the_contract_is_refused``.
    """
    if not isinstance(value, dict) or value.keys() != {"title", "text", "links"}:
        raise ValueError("the render worker's answer is not a document")
    title, text, links = value["title"], value["text"], value["links"]
    if not (isinstance(title, str) and len(title) <= _TITLE_LIMIT):
        raise ValueError("the render worker's title breaks its limit")
    if not (isinstance(text, str) and len(text) <= PAGE_TEXT_LIMIT):
        raise ValueError("the render worker's text breaks its limit")
    if not (
        isinstance(links, list)
        and len(links) <= MAX_LINKS
        and all(isinstance(link, str) for link in links)
        and are_page_links(links, url=url, site=site)
    ):
        raise ValueError("the render worker's links are not the page's same-site links")
    return Document(title=title, text=text, links=tuple(links))


def cut(text: str, limit: int) -> str:
    """Shorten text to at most ``limit`` characters at a clean boundary.

    The cut falls at the last line break within the last tenth of the limit, else at the
    last space there, else exactly at the limit (text without spaces, such as Chinese).

    Args:
        text: The text to shorten.
        limit: The most characters the result may have.

    Returns:
        ``text`` itself when it fits; otherwise a prefix of it, trailing blanks stripped.
    """
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    head = text[: limit + 1]  # a break right after the limit still allows a clean cut
    floor = limit - max(limit // 10, 40)
    for separator in ("\n", " "):
        at = head.rfind(separator)
        if at > floor and at > 0:
            return head[:at].rstrip()
    return text[:limit].rstrip()


def _tidy(text: str, *, once: bool = False) -> str:
    squeezed = squeeze_layout(normalize_text(text))
    return drop_repeated_passages(squeezed) if once else squeezed


def _tidy_head(text: str, limit: int, *, once: bool = False) -> str:
    """Normalise and squeeze enough of a long render to fill ``limit`` characters.

    Both steps only remove characters and look at one line at a time (the fence state
    aside, which runs from the start), so the tidied head of a text is the head of the
    tidied text, except right at its end; the margin keeps that end past the cut.
    """
    size = 2 * limit
    while size < len(text):
        head = _tidy(text[:size], once=once)
        if len(head) > limit + _HEAD_MARGIN:
            return head
        size *= 2
    return _tidy(text, once=once)


def _title(root: HtmlElement) -> str:
    for path in ("//head/title", "//title[not(ancestor::svg)]", "//h1"):
        for element in root.xpath(path)[:1]:
            title = collapse(element.text_content())
            if title:
                return cut(title, _TITLE_LIMIT)
    return ""


def _non_space(text: str) -> int:
    return len(text) - sum(text.count(c) for c in " \n\t")


def _too_little(text: str, page_chars: int) -> bool:
    """Whether a render lost the page: nothing from a page with text, or a scrap of a big one.

    Small pages are trusted: their render may rightly be short (a hidden element, a menu).
    """
    shown = _non_space(text)
    if not shown:
        return page_chars > 0
    return shown < _TOO_LITTLE and page_chars >= _MUCH_TEXT


def _parse(markup: str) -> HtmlElement | None:
    # huge_tree: libxml2 otherwise silently drops everything nested deeper than 255
    # elements; bodies are capped at 2 MB upstream, so its other limits do not matter.
    # lxml parses UTF-8 bytes faster than a str, and the explicit encoding overrides any
    # <meta charset> in the page: the text was already decoded by our own rules.
    parser = HTMLParser(encoding="utf-8", huge_tree=True, remove_comments=True, remove_pis=True)
    # lxml.html picks each element's class in a Python callback (form fields get their own);
    # every later walk pays it per element. One class for all, chosen in C, halves that cost.
    parser.set_element_class_lookup(_ONE_CLASS)
    try:
        root = document_fromstring(markup.encode("utf-8", "replace"), parser=parser)
    except (etree.LxmlError, ValueError):
        return None
    return root if isinstance(root, HtmlElement) else None


def _read_gently(markup: str) -> str:
    """The text of a page that pruning emptied: pruned without the page-wrapper rules
    (``header``, ``footer``, ``form`` may hold the whole page), its main content found and
    rendered; else the plain text of the unpruned page."""
    root = _parse(markup)
    if root is None:
        return ""
    drop_junk(root)
    unpruned = plain_text(root)
    body = root.find("body")
    page_chars = text_length(body if body is not None else root)
    prune_chrome(root, wrappers=False)
    page_chars = _narrow(root, page_chars)
    if page_chars > _RENDER_CHARS or element_count(root) > _RENDER_ELEMENTS:
        trim_to_budget(root, _RENDER_CHARS, _RENDER_ELEMENTS)
    try:
        text = _tidy_head(render(root), PAGE_TEXT_LIMIT)
    except Exception:  # inscriptis on hostile trees: RecursionError, and worse
        text = ""
    return unpruned if _too_little(text, page_chars) else text


def _narrow(root: HtmlElement, page_chars: int) -> int:
    """Keeps only the main content when it is sure, and drops the trailing link lists of a
    page read whole; returns the characters there are to read (the region's, when sure: a
    short article is no failure)."""
    try:
        main = find_main_content(root)
    except Exception:  # the detection is an optimisation: never lose the page over it
        return page_chars
    for element in main.tail:
        element.drop_tree()
    if not main.sure:
        return page_chars
    keep_only(root, main.elements)
    return sum(text_length(element) for element in main.elements)


def _read_html(markup: str, *, url: str, site: str | None) -> Document:
    markup = _XML_DECLARATION.sub("", markup, count=1).replace("\x00", "\ufffd")
    # Before libxml2, whose attribute check is quadratic in one element's attributes.
    markup = cap_attributes(markup)
    root = _parse(markup)
    if root is None:
        # Nothing lxml accepts as a document (empty, or only comments): strip tags by hand.
        return Document(
            title="",
            text=cut(strip_tags(markup), PAGE_TEXT_LIMIT),
            links=(),
        )
    title = _title(root)
    # An article may repeat itself on purpose (a meal plan per week, a recipe per size):
    # only the other pages lose their repeated passages.
    once = not declares_article(root)
    try:
        links = page_links(root, url=url, site=site)
    except Exception:  # a page's links are a bonus: never lose its text over them
        links = ()
    try:
        # Before the scripts go: a shop may write its product's text only there.
        description = product_description(root)
    except Exception:  # a bonus too
        description = ""
    drop_junk(root)
    body = root.find("body")
    page_chars = text_length(body if body is not None else root)
    prune_chrome(root)
    page_chars = _narrow(root, page_chars)
    # Counting elements costs a scan; a body of under 4 characters an element cannot hold
    # too many (the shortest element, <br>, takes 4).
    if page_chars > _RENDER_CHARS or (
        len(markup) > 4 * _RENDER_ELEMENTS and element_count(root) > _RENDER_ELEMENTS
    ):
        trim_to_budget(root, _RENDER_CHARS, _RENDER_ELEMENTS)
    try:
        text = _tidy_head(render(root), PAGE_TEXT_LIMIT, once=once)
    except Exception:  # inscriptis on hostile trees: RecursionError, and worse
        text = ""
    if _too_little(text, page_chars):
        candidate = plain_text(root)
        if _too_little(candidate, page_chars):
            # Pruning took the text (a page wrapped in a <header>, say): read it again
            # without the rules for page wrappers, else unpruned.
            candidate = _read_gently(markup)
        if len(candidate) > len(text):
            text = candidate
    if not text:
        # libxml2 drops text nested deeper than it goes (2,048 elements): last resort.
        text = strip_tags(markup)
    if description and adds_to(description, text[:PAGE_TEXT_LIMIT]):
        # The page's product text is not in what the page shows: it goes first.
        text = f"{description}\n\n{text}"
    return Document(title=title, text=cut(text, PAGE_TEXT_LIMIT), links=links)


def _atx_title(rest: str) -> str:
    """The text of an ATX heading line after its opening hashes, closing hashes removed."""
    title = rest.strip()
    bare = title.rstrip("#")
    if bare != title and (not bare or bare[-1] in " \t"):
        title = bare.strip()
    return title


def _markdown_title(text: str) -> str:
    in_fence = False
    previous = ""
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            heading = _ATX_HEADING.match(line)
            title = _atx_title(line[heading.end() :]) if heading else ""
            if title:
                return cut(collapse(title), _TITLE_LIMIT)
            if previous.strip() and _SETEXT_H1.fullmatch(line):
                return cut(collapse(previous), _TITLE_LIMIT)
        previous = line if not in_fence else ""
    return ""


def read_document(
    body: bytes,
    *,
    content_type: str,
    charset: str | None,
    url: str,
    site: str | None = None,
) -> Document:
    """Turn a downloaded body into a :class:`Document`.

    Args:
        body: The response body (decoded from any transfer/content coding, at most 2 MB).
        content_type: The bare media type: ``text/html``, ``text/plain`` or ``text/markdown``.
        charset: The ``charset`` parameter of the HTTP ``Content-Type`` header, or ``None``.
        url: The page's final address, the base for relative links.
        site: The site links must be on (registrable domain); ``None`` means the site of
            ``url``.

    Returns:
        The title, the text cut to :data:`PAGE_TEXT_LIMIT`, and the same-site links (none
        for plain text and markdown). Never raises: on any internal failure the text is the
        decoded body with tags stripped.
    """
    media = content_type.split(";", 1)[0].strip().lower()
    is_html = media in _HTML_TYPES
    try:
        decoded = decode_body(body, charset, sniff_html=is_html)
        if is_html:
            return _read_html(decoded, url=url, site=site)
        text = normalize_text(decoded)
        title = _markdown_title(text) if media in _MARKDOWN_TYPES else ""
        return Document(title=title, text=cut(text, PAGE_TEXT_LIMIT), links=())
    except Exception:  # the reader must never take the crawl down
        text = strip_tags(body.decode("utf-8", "replace"))
        return Document(title="", text=cut(text, PAGE_TEXT_LIMIT), links=())
