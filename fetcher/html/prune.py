"""Remove page chrome from a parsed HTML tree before it is rendered to text.

This is the "pruned+" pipeline of ``shared/notes/extraction.md``: it spends the 12,000-character
page budget on the article rather than on menus, cookie banners and share buttons. Each rule
below carries a guard that the measurements showed to be necessary, because a rule without
its guard wiped whole articles on real pages:

* elements that never carry readable text (scripts, styles, templates, svg, iframes, form
  controls) and navigation landmarks (``nav``, ``aside``, ``menu``, chrome ARIA roles) go;
* hidden elements go (``hidden``, ``display:none``, ``visibility:hidden``), except closed
  tabs and folds (``role="tabpanel"``, or a class/id word such as tab, pane, panel,
  accordion, collapse, faq, answer): a product's specification table waits in one. Not
  ``aria-hidden="true"``, which hides from screen readers only: carousels, card grids and
  duplicate card links wear it on text the page shows (docs/reader.md);
* ``header``/``footer`` go only outside ``article``/``main``, so an article keeps its own title
  and byline;
* a ``form`` goes only when it holds no ``article``/``main`` and fewer than 3 paragraphs
  (ASP.NET pages wrap the whole page in one form);
* an element whose class or id names boilerplate (cookie, share, related, ads, a forum
  post's signature, avatar or user card: ``user`` followed by info, details, extras ...)
  goes only
  when that class name or id does not also name content (each space-separated name is
  judged alone: ``article-share`` names content, ``SiteFooter main-content`` a footer
  that also wears a layout class), it holds no ``article``/``main``, and it holds at most
  30 % of the page's text; words for the page's own chrome (nav, widget,
  footer) count only outside ``article``/``main``. A part of a class or id that mixes
  letters and digits (``jXK9ad``, ``h.6c1f73b0``) is a generated name and holds no words.

The tree is changed in place. Nothing here recurses in Python, so deep trees are safe, and
nothing costs depth x size: an element nested in a dropped one is not dropped again (lxml
walks a subtree on every removal), "is it inside an article" is remembered along each
chain of ancestors, and the boilerplate rule counts text for all its candidates in one walk.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from lxml import etree

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = ["drop_junk", "element_count", "prune_chrome", "text_length", "trim_to_budget"]

# Elements that never hold text a reader wants, whatever the page. Dropped first, and also
# before the plain-text fallback, so even that never shows script source.
_JUNK = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "iframe",
    "object",
    "embed",
    "canvas",
    "button",
    "select",
    "textarea",
    "dialog",
)

_CHROME_TAGS = ("nav", "aside", "menu")
_CHROME_ROLES = (
    "navigation",
    "banner",
    "contentinfo",
    "complementary",
    "search",
    "dialog",
    "alertdialog",
    "menu",
    "menubar",
)


# libxml2 does the scanning; Python sees only candidates. ``iter(tags)`` is the cheapest scan;
# for attributes, selecting the attribute values themselves is about twice as fast as
# selecting elements by an attribute predicate (each value knows its element and name).
_MARKED_XPATH = "//body//@role | //body//@hidden | //body//@style"
_NAMED_XPATH = "//body//@class | //body//@id"

_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)

# Words in class/id values that mark boilerplate. Matched against whole words of the value
# (split at punctuation and camelCase), so "ad" matches "ad-slot" but not "header" or "read".
_BOILERPLATE_WORD = re.compile(
    r"""
    cookies? | consent | gdpr | newsletters? | subscribe | subscription |
    share | sharing | sharebar | sharetools | social | socials |
    related | recommended | recommendations? | promos? | promotions? | promoted |
    ads? | advert\w* | adsbygoogle | adslot | adunit | sponsor(?:ed|s)? | dfp |
    breadcrumbs? | sidebar | comments? | commentlist | popups? | modal |
    taboola | outbrain | disqus | paywall | signup | trending | most(?:read|popular) |
    signatures? | avatars? | usercard
    """,
    re.VERBOSE,
)
# Words for the page's own chrome, which an article may legitimately use for its parts (a
# "footer" of footnotes): they count only outside article/main, like <header>/<footer>.
_PAGE_CHROME_WORD = re.compile(r"nav | navbar | navigation | widgets? | footer", re.VERBOSE)
# Words that name content: a class like "article-share" or "post-comments-count" is too close
# to the article to drop on its class name alone.
_CONTENT_WORD = re.compile(
    r"article\w* | body | content\w* | main | story | stories | text | post | entry | "
    r"column | page | wrap\w* | prose | embed\w*",
    re.VERBOSE,
)
# After "user", words that make a forum poster's card (``user-info``, ``messageUserExtras``):
# join date, post count, rank, badges; the thread is the posts, not their authors' stats.
_USER_CARD_WORD = re.compile(
    r"info | details | extras? | stats | card | banner | title | block | profile", re.VERBOSE
)
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_PARTS = re.compile(r"[^\W_]+")
# Words naming a tab, an accordion fold or an FAQ answer: hidden until clicked, but the
# page's own content (a product's specification table, a service's FAQ).
_PANEL_WORD = re.compile(
    r"tabs? | tabpanel | panes? | panels? | accordion\w* | collapse | collapsible | faq\w* | "
    r"answer",
    re.VERBOSE,
)

# Substrings every boilerplate class/id contains; only values holding one get the word test.
# (str.find scans several times faster than one regex alternation over the same text.)
_BOILERPLATE_HINTS = (
    "cookie", "consent", "gdpr", "newsletter", "subscri", "shar", "social", "related",
    "recommend", "promo", "sponsor", "dfp", "breadcrumb", "sidebar", "comment", "popup",
    "modal", "taboola", "outbrain", "disqus", "paywall", "signup", "trending", "most",
    "nav", "widget", "footer", "signature", "avatar", "user",
)  # fmt: skip

_MAX_BOILERPLATE_SHARE = 0.3
_MIN_FORM_PARAGRAPHS = 3


def _drop(element: HtmlElement) -> None:
    """Remove an element but keep its tail text, which belongs to the parent."""
    parent = element.getparent()
    if parent is None:
        return
    tail = element.tail
    if tail and tail.strip():
        previous = element.getprevious()
        if previous is not None:
            previous.tail = (previous.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(element)


def text_length(element: HtmlElement) -> int:
    """Count the characters of an element's text, blank runs counted once, in libxml2."""
    result = element.xpath("string-length(normalize-space(.))")
    return int(result) if isinstance(result, float) else 0


def drop_junk(root: HtmlElement) -> None:
    """Drop elements that never hold readable text (scripts, styles, svg, form controls ...).

    Args:
        root: The document root, changed in place.
    """
    for element in list(root.iter(*_JUNK)):
        _drop(element)


def _with_ancestors(elements: list[HtmlElement]) -> set[HtmlElement]:
    """The elements and all their ancestors: exactly the elements that hold one of them."""
    holders: set[HtmlElement] = set()
    for element in elements:
        if element in holders:
            continue
        holders.add(element)
        for ancestor in element.iterancestors():
            if ancestor in holders:
                break
            holders.add(ancestor)
    return holders


class _MarkedAbove:
    """Answers "is an ancestor of this element marked?" in amortised linear time.

    Each element's answer ("it or an ancestor is marked") is remembered, so a chain of
    ancestors is walked once however many of its elements are asked about.
    """

    def __init__(self, marked: Callable[[HtmlElement], bool]) -> None:
        self._marked = marked
        self._memo: dict[HtmlElement, bool] = {}

    def __call__(self, element: HtmlElement) -> bool:
        chain: list[HtmlElement] = []
        node = element.getparent()
        answer = False
        while node is not None:
            known = self._memo.get(node)
            if known is not None:
                answer = known
                break
            chain.append(node)
            node = node.getparent()
        for node in reversed(chain):
            answer = answer or self._marked(node)
            self._memo[node] = answer
        return answer


def _is_content(element: HtmlElement) -> bool:
    return element.tag in ("article", "main") or element.get("role") == "main"


def _name_words(value: str) -> list[str]:
    """The lower-cased words of a class or id value, split at punctuation and camelCase.

    A part that mixes letters and digits is a generated name (CSS modules, Google Sites):
    read as words, ``jXK9ad`` would hold "ad" and ``navQ2x`` "nav", so it holds none.
    """
    return [
        word.lower()
        for part in _PARTS.findall(value)
        if part.isalpha() or part.isdigit()
        for word in _WORDS.findall(part)
    ]


def _names_user_card(words: list[str]) -> bool:
    """Whether the words name a forum poster's card: "user" then info, details, extras ..."""
    return any(
        word == "user" and _USER_CARD_WORD.fullmatch(following)
        for word, following in itertools.pairwise(words)
    )


def _names_boilerplate(element: HtmlElement, inside_content: _MarkedAbove) -> bool:
    """Whether one of the element's class names or its id names boilerplate."""
    value = f"{element.get('class', '')} {element.get('id', '')}"
    return any(_name_is_boilerplate(name, element, inside_content) for name in value.split())


def _name_is_boilerplate(name: str, element: HtmlElement, inside_content: _MarkedAbove) -> bool:
    """Whether one class name or id names boilerplate: a content word in the same name
    (``article-share``) saves it; one in another name of the element does not."""
    words = _name_words(name)
    if any(_CONTENT_WORD.fullmatch(w) for w in words):
        return False
    if any(_BOILERPLATE_WORD.fullmatch(w) for w in words) or _names_user_card(words):
        return True
    return any(_PAGE_CHROME_WORD.fullmatch(w) for w in words) and not inside_content(element)


def _drop_outermost(elements: list[HtmlElement]) -> None:
    """Drop each element that is not inside another one of them (those go with it)."""
    doomed = set(elements)
    inside_doomed = _MarkedAbove(doomed.__contains__)
    outermost = [element for element in elements if not inside_doomed(element)]
    for element in outermost:
        _drop(element)


def _text_counts(
    root: HtmlElement, candidates: list[HtmlElement]
) -> tuple[int, dict[HtmlElement, tuple[int, int, int]]]:
    """Non-blank characters of the page, and of each candidate with its span in document order.

    One walk: text goes to the innermost open candidate, whose total goes to the next one
    out when it closes. A candidate's span (first and last element number) tells whether
    another candidate is inside it.
    """
    wanted = set(candidates)
    found: dict[HtmlElement, tuple[int, int, int]] = {}
    open_: list[tuple[HtmlElement, int, int]] = []  # candidate, its count, its number
    total = 0
    number = 0
    for event, element in etree.iterwalk(root, events=("start", "end")):
        if event == "start":
            number += 1
            text = element.text
            chars = _non_space(text) if text and isinstance(element.tag, str) else 0
            if element in wanted:
                open_.append((element, chars, number))
            elif open_:
                top, count, first = open_[-1]
                open_[-1] = (top, count + chars, first)
            total += chars
            continue
        if open_ and open_[-1][0] is element:
            _, count, first = open_.pop()
            found[element] = (count, first, number)
            if open_:
                top, outer, outer_first = open_[-1]
                open_[-1] = (top, outer + count, outer_first)
        tail_text = element.tail
        tail = _non_space(tail_text) if tail_text and element is not root else 0
        if tail and open_:
            top, count, first = open_[-1]
            open_[-1] = (top, count + tail, first)
        total += tail
    return total, found


def _hint_positions(joined: str) -> list[int]:
    lowered = joined.lower()
    positions: list[int] = []
    for hint in _BOILERPLATE_HINTS:
        at = lowered.find(hint)
        while at != -1:
            positions.append(at)
            at = lowered.find(hint, at + 1)
    # "ad" only at the start of a word ("ad-slot", "ads", "topAd"), not in "header" or "read".
    at = lowered.find("ad")
    while at != -1:
        if at == 0 or not lowered[at - 1].isalpha() or joined[at] == "A":
            positions.append(at)
        at = lowered.find("ad", at + 1)
    return positions


def _hinted_elements(root: HtmlElement) -> list[HtmlElement]:
    """Elements whose class or id contains a boilerplate hint, in document order.

    Pages carry thousands of class/id values; testing them one by one in Python was the
    slowest step of the reader. Instead all values are joined into one string, searched
    with ``str.find``, and only the hits are mapped back to their elements.
    """
    values = root.xpath(_NAMED_XPATH)
    if not values:
        return []
    ends = list(itertools.accumulate(len(value) + 1 for value in values))
    found: dict[int, HtmlElement] = {}
    for start in _hint_positions("\n".join(values)):
        index = bisect.bisect_right(ends, start)
        if index not in found:
            found[index] = values[index].getparent()
    return [found[index] for index in sorted(found)]


def _is_panel(element: HtmlElement) -> bool:
    """Whether a hidden element is a closed tab or fold of the page's own content."""
    if element.get("role") == "tabpanel":
        return True
    words = _name_words(f"{element.get('class', '')} {element.get('id', '')}")
    return any(_PANEL_WORD.fullmatch(word) for word in words)


def _is_hidden(name: str, value: str) -> bool:
    if name == "hidden":
        return True
    return _HIDDEN_STYLE.search(value) is not None


def prune_chrome(root: HtmlElement, *, wrappers: bool = True) -> None:
    """Drop page chrome from a document tree, following the rules of the module docstring.

    Call :func:`drop_junk` first. Candidates are collected before anything is removed;
    removing one that sits inside an already removed subtree changes nothing.

    Args:
        root: The document root, changed in place.
        wrappers: Whether the rules for elements that may wrap the whole page run
            (``header``/``footer`` outside content, forms). Without them the rest of the
            chrome still goes: the reader's second try on a page that pruning emptied.
    """
    marked = [
        (str(value.attrname), str(value), value.getparent()) for value in root.xpath(_MARKED_XPATH)
    ]
    articles = list(root.iter("article", "main"))
    mains = [e for e in articles if e.tag == "main"]
    mains += [element for name, value, element in marked if name == "role" and value == "main"]
    # Sets of the elements that hold a <main> / any content element, built once, so each
    # guard below is a set lookup rather than a scan of the candidate's subtree.
    # Chrome landmarks often hold <article> teasers (related stories), so only a <main>
    # inside one saves it: that means the page marked its landmarks wrongly.
    holds_main = _with_ancestors(mains)
    holds_content = _with_ancestors(articles + mains)
    inside_content = _MarkedAbove(_is_content)
    doomed = [element for element in root.iter(*_CHROME_TAGS) if element not in holds_main]
    for name, value, element in marked:
        if element.tag in ("html", "body"):
            continue
        if name == "role":
            if value in _CHROME_ROLES and element not in holds_main:
                doomed.append(element)
        elif _is_hidden(name, value) and element not in holds_content and not _is_panel(element):
            doomed.append(element)
    for element in root.iter("header", "footer") if wrappers else ():
        if element not in holds_content and not inside_content(element):
            doomed.append(element)
    _drop_outermost(doomed)
    for element in list(root.iter("form")) if wrappers else ():
        if element in holds_content:
            continue
        paragraphs = itertools.islice(element.iter("p"), _MIN_FORM_PARAGRAPHS)
        if sum(1 for _ in paragraphs) < _MIN_FORM_PARAGRAPHS:
            _drop(element)  # a search box or a sign-up form, not an article
    candidates = [
        element
        for element in _hinted_elements(root)
        if element not in holds_content and _names_boilerplate(element, inside_content)
    ]
    if not candidates:
        return
    page_text, counts = _text_counts(root, candidates)
    page_text = max(page_text, 1)
    dropped_until = 0  # the last element number inside what was dropped so far
    for element in candidates:
        chars, first, last = counts[element]
        if first <= dropped_until:
            continue  # already gone with an ancestor
        if chars > _MAX_BOILERPLATE_SHARE * page_text:
            continue
        _drop(element)
        dropped_until = last


def _non_space(text: str | None) -> int:
    if not text:
        return 0
    return len(text) - text.count(" ") - text.count("\n") - text.count("\t") - text.count("\r")


def element_count(root: HtmlElement) -> int:
    """Count the elements of a tree, in libxml2."""
    result = root.xpath("count(//*)")
    return int(result) if isinstance(result, float) else 0


def trim_to_budget(root: HtmlElement, chars: int, elements: int) -> None:
    """Drop everything after the first ``chars`` non-blank characters or ``elements`` elements.

    A text of ``n`` characters holds at most ``n`` non-blank ones, so with ``chars`` well
    above the page budget the cut never reaches text the reader would have shown; it only
    spares rendering the rest of a long page (a 1 MB Wikipedia article) that would be cut
    away anyway. The element bound stops a page of 400,000 ``<br>`` from costing seconds
    of rendering; if it cuts text off, the caller's fallback reads the page unpruned.

    Args:
        root: The document root, changed in place.
        chars: How many non-blank characters of text to keep, in document order.
        elements: How many elements to keep, in document order.
    """
    seen = 0
    for index, element in enumerate(root.iter()):
        seen += _non_space(element.text) + _non_space(element.tail)
        if seen <= chars and index < elements:
            continue
        # Keep this element whole; drop what follows it and follows each of its ancestors.
        node: HtmlElement | None = element
        while node is not None:
            parent = node.getparent()
            following = node.getnext()
            while following is not None and parent is not None:
                after = following.getnext()
                parent.remove(following)
                following = after
            node = parent
        return
