"""Find a page's main content on its pruned tree, and say how sure the finding is.

The reader spends its 12,000-character budget better on the article than on what
:mod:`fetcher.html.prune` leaves of the page around it (bylines, teasers, "read more" boxes, comment
threads). This module looks for the article in one walk over the tree, in the spirit of
Readability's scoring, and returns either the elements that hold it or a verdict saying why it
is not sure. The caller renders only those elements when sure, and the whole pruned page
otherwise, so that a doubtful guess costs budget rather than content.

How a page is read (all from one walk, linear in the number of elements):

* **Text blocks.** Block elements (``p``, ``div``, ``li``, ``td``, ``pre``, headings ...) cut the
  text into blocks; each block counts its non-blank characters, the part inside links, and its
  commas (``,``, and the CJK ``，`` and ``、``). A block with at least 25 characters of text
  outside links and at most half of it in links is a *paragraph*.
* **Concentrated score.** Each paragraph adds ``1 + min(chars / 100, 3) + commas`` to the element
  holding it (its parent, or itself when it is a ``div`` with its own text), half that to the
  next ancestor and less to three more, as Readability does. Text spread thinly over many small
  containers (teasers, cards) never adds up; an article body that holds its paragraphs does.
  An element's score is that sum times the share of its text outside links. List items do not
  add: a list of captions or links is not an article.
* **Net content.** Each block also adds to every ancestor's *net content*: its characters outside
  links minus a fixed cost (30, or 8 for list items and table cells), or minus all its
  characters when it is mostly links. Adding an ancestor's other children to the region is
  worth it only when the net content grows.
* **Boilerplate names.** An element whose class or id names boilerplate (comments, related,
  share ...) and that holds at most half of the page's text counts as links only; one that
  holds more still never joins the region as a sibling.

The region starts at the best-scoring element. Other strong elements (a score of at least 0.3 of
the best, at most six levels away) pull it up to the ancestor they share with it when that adds
net content: articles split over sibling containers come together. It then moves up at most two
more levels when that adds at least 150 characters of net content, at most a quarter of it in
links (a lead paragraph or a last section outside the body container, not a rail of teasers),
and out of list and table parts. Last it takes those siblings that score well, read like a
paragraph, or hold a table or a code block, unless they are mostly links or named boilerplate.

A region of a few hundred characters (under :data:`_SCRAP`) that holds under
:data:`_MIN_SHARE` of the page's text (links included, named boilerplate not) is a scrap:
the intro line of a listing, a product's title block, a category blurb above a grid of
cards whose text is all links. The region then widens to its nearest ancestor holding that
share of the text, and to the whole page (``partial``) when that is the body. On a page
that says it is an article (``og:type``) a short region is a short article: there only one
under :data:`_ARTICLE_SCRAP` that does not hold the page's ``<h1>`` is a scrap
(docs/reader.md). On a page that does not say so, a region of any size is one part of a page
of many parts when it holds under :data:`_PART_SHARE` of the page's text and of its paragraph
text, not the page's ``<h1>``, and the text outside it is under :data:`_REST_LINKS` links: a
thread's first post above its replies, one accordion of a listing, one card of a product
page. It widens the same way, to the nearest ancestor holding that share.

Not sure (:class:`MainContentVerdict`), and the caller reads the whole pruned page, when: nothing
scores (``no_content``); the region is the whole body (``whole_page``); three or more elements
scoring at least half the best lie outside the region, as on listings and forum indexes
(``scattered``); the best element is a list (``listing``); or the region holds under a fifth of
the page's paragraph text (``partial``). The whole page is then read less the blocks after its
last strong element (the best, or a rival) that are at least half links, at every level up to
the body: the "more to explore" lists and site footers after a listing's last card.

Pure functions on an lxml tree; nothing here recurses, so any depth is safe, and every step is
counted in :attr:`MainContent.work`, so tests can check that the cost stays linear.
"""

from __future__ import annotations

import bisect
import dataclasses
import enum
import re
from typing import TYPE_CHECKING

from lxml import etree

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = [
    "MainContent",
    "MainContentVerdict",
    "declares_article",
    "find_main_content",
    "keep_only",
]

# Elements that start a block of text. Everything else (a, span, em, code, img, math ...)
# is inline and adds its text to the block around it.
_BLOCKS = frozenset((
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details",
    "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form",
    "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "html", "legend", "li",
    "listing", "main", "menu", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody",
    "td", "tfoot", "th", "thead", "tr", "ul", "xmp",
))  # fmt: skip
# Blocks whose paragraph is held by their parent: a <p> belongs to the container around it.
# A <div> with text of its own is both paragraph and container, as Readability treats it.
_LEAVES = frozenset((
    "p", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "li", "dd", "dt", "td", "th",
    "figcaption", "caption", "summary", "address",
))  # fmt: skip
_LIST_ITEMS = frozenset(("li", "dd", "dt"))
_CELLS = frozenset(("li", "dd", "dt", "td", "th", "tr"))
# Parts of a list or a table: never the region's top, which moves up to their container.
_STRUCTURE = frozenset((
    "table", "tbody", "thead", "tfoot", "tr", "th", "ul", "ol", "dl", "li", "dd", "dt", "caption",
))  # fmt: skip
_LISTS = frozenset(("ul", "ol"))
# Tables and code next to the region belong to it (lists there are comment threads and
# tickers as often as content, and the article's own lists are inside it anyway).
_STRUCTURED = frozenset(("table", "pre"))

_MIN_PARAGRAPH = 25  # characters outside links
_MAX_LINK_SHARE = 0.5
_BLOCK_COST = 30
_CELL_COST = 8
_SCORE_SHARES = (1.0, 1 / 2, 1 / 6, 1 / 9, 1 / 12)  # holder, then four more ancestors
_MAX_NAMED_SHARE = 0.5
_STRONG = 0.3  # of the best score: part of a split article
_RIVAL = 0.5  # of the best score: a competing region when outside ours
_MAX_RIVALS = 2
_TRAIL_LINKS = 0.5  # of a block's text: a link list after the last strong element
_CANDIDATES = 20  # strong or rival elements considered, best first
_JOIN_LEVELS = 6  # how far up a strong element may pull the region
_CLIMB_LEVELS = 2
_CLIMB_GAIN = 150  # net characters an ancestor must add to be worth taking
_SIBLING_SHARE = 0.2
_SIBLING_PARAGRAPH = 80
_SIBLING_LINKS = 0.25
_MIN_COVER = 0.2
# A region this small holding under this share of the page's text is a scrap of it.
_SCRAP = 600
_MIN_SHARE = 0.3
# On a page that says it is an article, only a region shorter than a headline and a
# sentence, without the page's h1, is a scrap (the reader's own "too little" line).
_ARTICLE_SCRAP = 200
# A region under this share of the page's text and paragraph text, on a page whose text
# outside it is under this share links, is one part of a page of many parts.
_PART_SHARE = 0.35
_REST_LINKS = 0.5

_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_BOILERPLATE_WORD = re.compile(
    r"comments? | commentlist | related | recommended | recommendations? | share | sharing | "
    r"social | promos? | sponsored | newsletter | subscribe | sidebar | widgets? | popular | "
    r"trending | breadcrumbs? | footer | disqus | outbrain | taboola",
    re.VERBOSE,
)
_CONTENT_WORD = re.compile(
    r"article\w* | body | content\w* | main | story | text | post | entry | prose", re.VERBOSE
)
# Substrings every boilerplate word contains: only names holding one get the word test.
_NAME_HINT = re.compile(
    "comment|relat|recommend|shar|social|promo|sponsor|newsletter|subscri|sidebar|widget|"
    "popular|trending|breadcrumb|footer|disqus|outbrain|taboola",
    re.IGNORECASE,
)


class MainContentVerdict(enum.StrEnum):
    """How the main content was found: ``MAIN`` when sure, else why not."""

    MAIN = "main"
    NO_CONTENT = "no_content"
    WHOLE_PAGE = "whole_page"
    SCATTERED = "scattered"
    LISTING = "listing"
    PARTIAL = "partial"


@dataclasses.dataclass(frozen=True, slots=True)
class MainContent:
    """The main content of a page, or why it is not clear.

    Attributes:
        verdict: ``MainContentVerdict.MAIN`` when the region is the main content; otherwise
            the reason the caller should read the whole page.
        elements: The region: one element, or sibling elements in document order; empty
            unless the verdict is ``MAIN``.
        work: Elements visited plus ancestor steps taken; grows linearly with the page.
        tail: When the verdict is not ``MAIN``: the mostly-link blocks after the page's last
            strong element, which the caller leaves out of the whole page it reads.
    """

    verdict: MainContentVerdict
    elements: tuple[HtmlElement, ...]
    work: int
    tail: tuple[HtmlElement, ...] = ()

    @property
    def sure(self) -> bool:
        """Whether :attr:`elements` is the main content."""
        return self.verdict is MainContentVerdict.MAIN


class _Node:
    """What the walk learned about one element and its subtree."""

    __slots__ = (
        "blocks",
        "chars",
        "element",
        "first",
        "last",
        "links",
        "named",
        "named_chars",
        "net",
        "paragraph_chars",
        "parent",
        "score_sum",
        "structured",
    )

    def __init__(self, element: HtmlElement, parent: _Node | None, first: int) -> None:
        self.element = element
        self.parent = parent
        self.first = first  # preorder number of the element ...
        self.last = first  # ... and of its last descendant: containment in O(1)
        self.chars = 0
        self.links = 0
        self.net = 0.0
        self.paragraph_chars = 0
        self.blocks = 0  # paragraphs in the subtree
        self.score_sum = 0.0
        self.named = False  # its class or id names boilerplate
        self.named_chars = 0  # characters inside elements counted as boilerplate by name
        self.structured = False  # whether the subtree holds a table or a code block

    @property
    def score(self) -> float:
        return self.score_sum * (1 - self.links / self.chars) if self.chars else 0.0

    def holds(self, other: _Node) -> bool:
        return self.first <= other.first <= self.last


@dataclasses.dataclass(slots=True)
class _Block:
    chars: int = 0
    links: int = 0
    commas: int = 0


def _names_boilerplate(value: str) -> bool:
    if _NAME_HINT.search(value) is None:
        return False
    words = [word.lower() for word in _WORDS.findall(value)]
    if any(_CONTENT_WORD.fullmatch(word) for word in words):
        return False
    return any(_BOILERPLATE_WORD.fullmatch(word) for word in words)


class _Walk:
    """One pass over the tree: the numbers of every block element, and the candidates.

    Only block elements get a :class:`_Node`: inline ones (links, spans, images) just add
    their text to the block around them, which keeps the walk cheap on real pages, where
    most elements are inline.
    """

    def __init__(self, start: HtmlElement) -> None:
        self.start = start
        self.work = 0
        self.nodes: dict[HtmlElement, _Node] = {}
        self.candidates: list[_Node] = []
        self.names: dict[str, bool] = {}  # class and id value: whether it names boilerplate
        counted = start.xpath("string-length(translate(normalize-space(.), ' ', ''))")
        self.page_chars = int(counted) if isinstance(counted, float) else 0
        self.root = self._walk()

    def _walk(self) -> _Node:
        # The loop runs twice per element of the page: names it uses are local, and text
        # that is only layout whitespace (most tails) is skipped before any call.
        root = _Node(self.start, None, 0)
        stack = [root]  # open block elements; stack[-1] holds the text being read
        texts = [_Block()]
        marks = [0]  # len(candidates) when each open block started
        in_link = 0
        order = 1
        events = 0
        blocks = _BLOCKS
        add_text = self._add_text
        candidates = self.candidates
        walk = etree.iterwalk(self.start, events=("start", "end"))
        next(walk)  # the start element, set up above
        add_text(texts[-1], self.start.text, 0)
        for event, element in walk:
            events += 1
            tag = element.tag
            if tag not in blocks:
                if event == "start":
                    if tag == "a":
                        in_link += 1
                    # Comments and processing instructions hold no readable text.
                    text = element.text if isinstance(tag, str) else None
                else:
                    if tag == "a":
                        in_link -= 1  # before the tail, which is outside the link
                    text = element.tail
                if text and not text.isspace():
                    add_text(texts[-1], text, in_link)
                continue
            if event == "start":
                node = _Node(element, stack[-1], order)
                order += 1
                stack.append(node)
                texts.append(_Block())
                marks.append(len(candidates))
                text = element.text
                if text and not text.isspace():
                    add_text(texts[-1], text, in_link)
                continue
            if element is self.start:
                break  # its own end: closed below
            node = stack.pop()
            node.last = order - 1
            self._close(node, tag, texts.pop(), marks.pop())
            parent = stack[-1]
            parent.chars += node.chars
            parent.links += node.links
            parent.net += node.net
            parent.paragraph_chars += node.paragraph_chars
            parent.named_chars += node.named_chars
            parent.blocks += node.blocks
            if tag in _STRUCTURED:
                node.structured = True
            if node.structured:
                parent.structured = True
            text = element.tail
            if text and not text.isspace():
                add_text(texts[-1], text, in_link)
        self.work += events
        self._close_block(root, "body", texts[0])
        root.last = order - 1
        if root.score_sum > 0:
            candidates.append(root)
        return root

    def _close(self, node: _Node, tag: str, block: _Block, mark: int) -> None:
        self._close_block(node, tag, block)
        if not node.chars:
            return
        element = node.element
        self.nodes[element] = node
        classes, ident = element.get("class"), element.get("id")
        if classes is not None or ident is not None:
            # Pages repeat their class names: each distinct one is judged once.
            value = f"{classes or ''} {ident or ''}"
            named = self.names.get(value)
            if named is None:
                named = self.names[value] = _names_boilerplate(value)
            node.named = named
        if node.named and node.chars <= _MAX_NAMED_SHARE * self.page_chars:
            # Comments, related stories ...: links to the scoring, whatever their text. Not
            # when they hold most of the page: then the name is wrong, or the page is a thread.
            node.net = -node.chars
            node.named_chars = node.chars
            node.paragraph_chars = 0
            node.score_sum = 0.0
            del self.candidates[mark:]
        elif node.score_sum > 0:
            self.candidates.append(node)

    @staticmethod
    def _add_text(block: _Block, text: str | None, in_link: int) -> None:
        if not text or text.isspace():
            return
        # Unrolled: this runs for most text nodes of the page, and generator sums cost more.
        chars = (
            len(text)
            - text.count(" ")
            - text.count("\n")
            - text.count("\t")
            - text.count("\r")
            - text.count("\xa0")
        )
        block.chars += chars
        if in_link:
            block.links += chars
        block.commas += text.count(",") + text.count("\uff0c") + text.count("\u3001")

    def _close_block(self, node: _Node, tag: str, block: _Block) -> None:
        if not block.chars:
            return
        node.chars += block.chars
        node.links += block.links
        own = block.chars - block.links
        if block.links > _MAX_LINK_SHARE * block.chars:
            node.net -= block.chars
            return
        node.net += own - (_CELL_COST if tag in _CELLS else _BLOCK_COST)
        if own < _MIN_PARAGRAPH:
            return
        node.paragraph_chars += own
        node.blocks += 1
        if tag in _LIST_ITEMS:
            return
        weight = 1 + min(own / 100, 3) + block.commas
        holder = node.parent if tag in _LEAVES else node
        for share in _SCORE_SHARES:
            if holder is None:
                break
            self.work += 1
            holder.score_sum += weight * share
            holder = holder.parent


def _common_ancestor(walk: _Walk, region: _Node, other: _Node) -> _Node | None:
    """The nearest ancestor of ``region`` holding ``other``, within a few levels."""
    node: _Node | None = region
    for _ in range(_JOIN_LEVELS + 1):
        walk.work += 1
        if node is None or node.holds(other):
            return node
        node = node.parent
    return None


def _region_top(walk: _Walk, best: _Node, ranked: list[_Node]) -> _Node:
    top = best
    for other in ranked:
        if other.score < _STRONG * best.score:
            break
        if top.holds(other) or other.holds(top):
            continue
        joined = _common_ancestor(walk, top, other)
        if joined is not None and joined is not walk.root and joined.net >= top.net:
            top = joined
    climbed, node = top, top
    for _ in range(_CLIMB_LEVELS):
        walk.work += 1
        node = node.parent if node.parent is not None else node
        if node is walk.root:
            break
        added_chars, added_links = node.chars - climbed.chars, node.links - climbed.links
        if node.net > climbed.net + _CLIMB_GAIN and added_links <= _SIBLING_LINKS * added_chars:
            climbed = node
    top = climbed
    while top.element.tag in _STRUCTURE:
        container = top.parent
        if container is None or container is walk.root:
            break
        walk.work += 1
        top = container
    return top


def _with_siblings(walk: _Walk, top: _Node, best: _Node) -> tuple[_Node, ...]:
    parent = top.element.getparent()
    if top is walk.root or parent is None:
        return (top,)
    floor = max(10.0, _SIBLING_SHARE * best.score)
    kept: list[_Node] = []
    for child in parent:
        walk.work += 1
        if child is top.element:
            kept.append(top)
            continue
        node = walk.nodes.get(child)
        if node is None or node.named:
            continue
        paragraph = (
            node.blocks == 1
            and node.paragraph_chars >= _SIBLING_PARAGRAPH
            and node.links < _SIBLING_LINKS * node.chars
        )
        structured = node.structured and node.links < _SIBLING_LINKS * node.chars
        if paragraph or structured or node.score >= floor:
            kept.append(node)
    return tuple(kept)


def _rivals(walk: _Walk, region: tuple[_Node, ...], ranked: list[_Node], best: _Node) -> int:
    """Elements scoring at least half the best that lie outside the region and its ancestors."""
    top = region[0]
    firsts = [node.first for node in region]  # siblings: in document order, disjoint
    count = 0
    for other in ranked:
        walk.work += 1
        if other.score < _RIVAL * best.score:
            break
        at = bisect.bisect_right(firsts, other.first) - 1
        inside = at >= 0 and region[at].holds(other)
        if not inside and not other.holds(top):
            count += 1
    return count


def find_main_content(root: HtmlElement) -> MainContent:
    """Find the elements that hold a page's main content.

    Args:
        root: The document root, after :func:`fetcher.html.prune.prune_chrome`; not changed.

    Returns:
        The region and ``MainContentVerdict.MAIN`` when sure; otherwise an empty region and
        the reason.
    """
    body = root.find("body")
    walk = _Walk(body if body is not None else root)
    if not walk.candidates:
        return MainContent(MainContentVerdict.NO_CONTENT, (), walk.work)
    ranked = sorted(walk.candidates, key=lambda node: node.score, reverse=True)[:_CANDIDATES]
    best = ranked[0]
    top = _region_top(walk, best, ranked[1:])
    if top is walk.root:
        tail = _trailing_lists(walk, best, ranked[1:])
        return MainContent(MainContentVerdict.WHOLE_PAGE, (), walk.work, tail)
    region = _with_siblings(walk, top, best)
    verdict = MainContentVerdict.MAIN
    if best.element.tag in _LISTS:
        verdict = MainContentVerdict.LISTING
    elif _rivals(walk, region, ranked[1:], best) > _MAX_RIVALS:
        verdict = MainContentVerdict.SCATTERED
    elif sum(node.paragraph_chars for node in region) < _MIN_COVER * walk.root.paragraph_chars:
        verdict = MainContentVerdict.PARTIAL
    if verdict is MainContentVerdict.MAIN and not _titled_article(root, region):
        article = declares_article(root)
        region = _widened(walk, region, _ARTICLE_SCRAP if article else _SCRAP)
        if region and not article and _is_part(walk, region):
            region = _widened(walk, region, 0, _PART_SHARE)
        if not region:
            verdict = MainContentVerdict.PARTIAL
    if verdict is not MainContentVerdict.MAIN:
        tail = _trailing_lists(walk, best, ranked[1:])
        return MainContent(verdict, (), walk.work, tail)
    return MainContent(verdict, tuple(node.element for node in region), walk.work)


def _trailing_lists(walk: _Walk, best: _Node, ranked: list[_Node]) -> tuple[HtmlElement, ...]:
    """What a page read whole leaves out: the blocks after its last strong element (the
    best, or a rival scoring half as well), at every level up to the body, that are at
    least :data:`_TRAIL_LINKS` links: a listing's "more to explore" lists, a site footer
    the pruner did not know by name. In document order per level, innermost first."""
    last = best
    for node in ranked:
        if node.score < _RIVAL * best.score:
            break
        if node.first > last.last:
            last = node
    found: list[HtmlElement] = []
    element = last.element
    while element is not walk.root.element:
        for sibling in element.itersiblings():
            walk.work += 1
            child = walk.nodes.get(sibling)
            if child is not None and child.chars and child.links >= _TRAIL_LINKS * child.chars:
                found.append(sibling)
        parent = element.getparent()
        if parent is None:
            break
        walk.work += 1
        element = parent
    return tuple(found)


def declares_article(root: HtmlElement) -> bool:
    """Whether the page says it is an article (Open Graph ``og:type``): then a short region
    is a short article, not a scrap."""
    kinds = root.xpath("/html/head/meta[@property='og:type']/@content")
    return any(str(kind).strip().lower().startswith("article") for kind in kinds)


def _titled_article(root: HtmlElement, region: tuple[_Node, ...]) -> bool:
    """Whether the page says it is an article and the region holds its ``<h1>``."""
    if not declares_article(root):
        return False
    return any(next(node.element.iter("h1"), None) is not None for node in region)


def _is_part(walk: _Walk, region: tuple[_Node, ...]) -> bool:
    """Whether the region is one part of a page of many: under :data:`_PART_SHARE` of its
    text and of its paragraph text, without the page's ``<h1>``, on a page whose other text
    is mostly not links (a thread's first post, one accordion of a listing, one card)."""
    chars = sum(node.chars for node in region)
    root = walk.root
    if chars >= _PART_SHARE * (root.chars - root.named_chars):
        return False
    if sum(node.paragraph_chars for node in region) >= _PART_SHARE * root.paragraph_chars:
        return False
    rest = root.chars - chars
    if rest <= 0 or root.links - sum(node.links for node in region) >= _REST_LINKS * rest:
        return False
    return not any(next(node.element.iter("h1"), None) is not None for node in region)


def _widened(
    walk: _Walk, region: tuple[_Node, ...], scrap: int, share: float = _MIN_SHARE
) -> tuple[_Node, ...]:
    """The region, or the nearest ancestor holding enough text when it is a scrap.

    Args:
        walk: The walk of the page.
        region: The region found.
        scrap: Regions with fewer characters may be scraps; 0: the region is one.
        share: The share of the page's text (named boilerplate aside) that is enough.

    Returns:
        The region itself; one ancestor; or nothing when only the body holds enough.
    """
    chars = sum(node.chars for node in region)
    wanted = share * (walk.root.chars - walk.root.named_chars)
    if scrap and (chars >= scrap or chars >= wanted):
        return region
    node = region[0].parent
    while node is not None and node is not walk.root:
        walk.work += 1
        if node.chars >= wanted:
            return (node,)
        node = node.parent
    return ()


def keep_only(root: HtmlElement, elements: tuple[HtmlElement, ...]) -> None:
    """Remove everything from a tree but the given sibling elements and their ancestors.

    The ancestors keep no text of their own, and the elements lose their tails: only what
    the elements hold stays. Linear in the size of the tree.

    Args:
        root: The document root, changed in place.
        elements: Siblings in document order, as :func:`find_main_content` returns them.
    """
    if not elements:
        return
    parent = elements[0].getparent()
    if parent is None:
        return
    kept = set(elements)
    for child in list(parent):
        if child not in kept:
            parent.remove(child)
    for element in elements:
        element.tail = None
    parent.text = None
    node = parent
    while (above := node.getparent()) is not None:
        for sibling in list(above):
            if sibling is not node:
                above.remove(sibling)
        above.text = None
        node.tail = None
        node = above
