"""Finding the main content: which region is taken, when the finding is not sure, and its cost."""

from __future__ import annotations

import pytest
from lxml.html import HtmlElement, HTMLParser, document_fromstring

from fetcher.html.content import MainContent, MainContentVerdict, find_main_content, keep_only
from fetcher.html.prune import drop_junk, prune_chrome

_PARSER = HTMLParser(huge_tree=True)

LOREM = (
    "The council approved the new budget on Tuesday, after a debate that lasted, by most "
    "accounts, well into the night. "
)


def _paragraphs(label: str, count: int = 4) -> str:
    return "".join(f"<p>{label} {i}: {LOREM * 2}</p>" for i in range(count))


def _tree(body: str) -> HtmlElement:
    root: HtmlElement = document_fromstring(f"<html><body>{body}</body></html>", parser=_PARSER)
    drop_junk(root)
    prune_chrome(root)
    return root


def _find(body: str) -> MainContent:
    return find_main_content(_tree(body))


def _text(main: MainContent) -> str:
    return " ".join(" ".join(element.text_content().split()) for element in main.elements)


def test_article_is_found_among_teasers_and_link_lists() -> None:
    teasers = "".join(
        f'<div class="card"><h3><a href="/s/{i}">Story number {i} has a headline of some sixty '
        "characters</a></h3><div>A teaser of two lines about something else entirely, which "
        "the reader of this article does not need.</div></div>"
        for i in range(12)
    )
    main = _find(
        f'<div class="top"><a href="/">Home</a> <a href="/news">News</a></div>'
        f'<div class="layout"><div class="story-body">{_paragraphs("Article")}</div>'
        f'<div class="rail">{teasers}</div></div>'
    )
    assert main.verdict is MainContentVerdict.MAIN
    assert [element.get("class") for element in main.elements] == ["story-body"]


def test_article_split_over_sibling_containers_is_read_whole() -> None:
    chunks = "".join(
        f'<div class="companion"><div class="chunk">{_paragraphs(f"Part {n}", 3)}</div></div>'
        for n in range(4)
    )
    main = _find(f'<section class="story">{chunks}</section><div><a href="/">More</a></div>')
    assert main.sure
    text = _text(main)
    assert all(f"Part {n} 0:" in text for n in range(4))


def test_short_article_beats_a_long_comment_thread() -> None:
    comments = "".join(
        f'<li class="comment"><article class="comment-body"><p>Reader {i} says: {LOREM}</p>'
        "</article></li>"
        for i in range(30)
    )
    main = _find(
        f'<div class="post">{_paragraphs("Article", 3)}</div>'
        f'<div id="comments" class="comments-area"><ol>{comments}</ol></div>'
    )
    assert main.sure
    text = _text(main)
    assert "Article 2:" in text
    assert "Reader" not in text


def test_lead_paragraph_outside_the_body_container_is_kept() -> None:
    main = _find(
        '<div class="article"><p class="standfirst">The lead paragraph sits outside the body '
        "container, as on many news sites, and is part of the article, with commas, too.</p>"
        f'<div class="article-body">{_paragraphs("Body", 6)}</div></div>'
        '<div class="more"><a href="/a">Other story</a> <a href="/b">Another story</a></div>'
    )
    assert main.sure
    assert "lead paragraph" in _text(main)
    assert "Other story" not in _text(main)


def test_table_and_code_next_to_the_article_are_kept() -> None:
    rows = "".join(
        f"<tr><td>{month}</td><td>{i * 7.5}</td></tr>" for i, month in enumerate("JFMAMJ")
    )
    main = _find(
        f'<div class="intro">{_paragraphs("Intro", 2)}</div>'
        f'<div class="table-wrap"><table>{rows}</table></div>'
        '<div class="listing"><pre>make install\nmake test</pre></div>'
        '<div class="footer-links"><a href="/a">About</a> <a href="/b">Contact</a></div>'
    )
    assert main.sure
    kept = {element.get("class") for element in main.elements}
    assert {"intro", "table-wrap", "listing"} <= kept
    assert "footer-links" not in kept


def _posts(count: int) -> str:
    # Posts as deep as real templates make them: their common ancestor is the body.
    return "".join(
        f'<div class="post"><div class="inner"><div class="text">{_paragraphs(f"Post {i}", 2)}'
        "</div></div></div>"
        for i in range(count)
    )


@pytest.mark.parametrize(
    ("body", "verdict"),
    [
        pytest.param(
            "<div><a href='/a'>Home</a> <a href='/b'>About</a></div>",
            MainContentVerdict.NO_CONTENT,
            id="links-only",
        ),
        pytest.param("", MainContentVerdict.NO_CONTENT, id="empty"),
        pytest.param(
            _paragraphs("Body", 5), MainContentVerdict.WHOLE_PAGE, id="paragraphs-in-body"
        ),
        pytest.param(
            "<ul>" + "".join(f"<li><p>Result {i}: {LOREM}</p></li>" for i in range(20)) + "</ul>",
            MainContentVerdict.LISTING,
            id="list-of-results",
        ),
        pytest.param(_posts(6), MainContentVerdict.SCATTERED, id="many-equal-posts"),
        pytest.param(
            f'<div class="blurb"><p>{"One, two, three, " * 20}</p></div>'
            + "<ul>"
            + "".join(f"<li>{LOREM * 3}</li>" for i in range(30))
            + "</ul>",
            MainContentVerdict.PARTIAL,
            id="blurb-beside-most-of-the-text",
        ),
    ],
)
def test_unclear_pages_are_not_cut(body: str, verdict: MainContentVerdict) -> None:
    main = _find(body)
    assert main.verdict is verdict
    assert main.elements == ()
    assert not main.sure


def _link_list(label: str) -> str:
    return "<ul>" + "".join(f'<li><a href="/{i}">{label} {i} homes</a></li>' for i in range(12))


@pytest.mark.parametrize(
    ("after", "left_out"),
    [
        pytest.param(_link_list("Town") + "</ul>", ["Town 0 homes"], id="links-after"),
        pytest.param(
            f"<div><div>{_link_list('Town')}</ul></div></div>", ["Town 0 homes"], id="deep-links"
        ),
        pytest.param(f"<div><p>Closing words: {LOREM}</p></div>", [], id="text-after-stays"),
        pytest.param(
            f'<div><p>{LOREM * 2}</p> <a href="/x">{LOREM}</a></div>', [], id="some-links-stay"
        ),
    ],
)
def test_a_scattered_page_leaves_out_the_link_lists_after_its_last_post(
    after: str, left_out: list[str]
) -> None:
    # The whole page is read (the posts are rivals), less the mostly-link blocks that come
    # after the last of them: a listing's "more to explore" lists, a site footer.
    main = _find(_link_list("Before") + "</ul>" + _posts(6) + after)
    assert main.verdict is MainContentVerdict.SCATTERED
    assert main.elements == ()
    tail = " ".join(" ".join(element.text_content().split()) for element in main.tail)
    assert all(text in tail for text in left_out)
    assert "Post" not in tail
    assert "Before" not in tail
    assert bool(main.tail) == bool(left_out)


def test_posts_of_one_thread_are_read_together() -> None:
    main = _find(
        f'<div class="thread"><h1>Thread</h1>{_posts(6)}</div><div><a href="/">Index</a></div>'
    )
    assert main.sure
    text = _text(main)
    assert all(f"Post {i} 1:" in text for i in range(6))


def test_boilerplate_name_holding_most_of_the_page_is_still_read() -> None:
    # A layout wrapper named after its sidebar must not demote the article it holds.
    main = _find(
        f'<div class="with-sidebar"><div class="entry">{_paragraphs("Entry", 6)}</div></div>'
    )
    assert main.sure
    assert "Entry 5:" in _text(main)


def test_comments_and_processing_instructions_carry_no_text() -> None:
    html = (
        "<html><body><div class='a'>"
        + "<!-- " + "hidden words, " * 200 + " -->"
        + _paragraphs("Visible", 3)
        + "</div><div class='b'><p>"
        + "short, " * 3
        + "</p></div></body></html>"
    )  # fmt: skip
    root = document_fromstring(html, parser=HTMLParser(remove_comments=False))
    main = find_main_content(root)
    assert main.sure
    assert [element.get("class") for element in main.elements] == ["a"]


def test_keep_only_leaves_the_region_and_its_ancestors() -> None:
    root = _tree(
        "<div id='wrap'>before<header><p>Header</p></header><div id='a'>A</div>tail a"
        "<div id='b'>B</div><div id='c'>C</div>tail c<footer>Footer</footer></div>after"
    )
    keep_only(root, tuple(root.xpath("//div[@id='a' or @id='c']")))
    assert [text.strip() for text in root.xpath("//text()") if text.strip()] == ["A", "C"]
    assert [element.get("id") for element in root.iter("div")] == ["wrap", "a", "c"]


def _block(text: int, links: int) -> str:
    anchors = "".join(f"<a href=/{i}>x</a>" for i in range(links))
    return f"<div><p>{LOREM * text}</p><p>{anchors}</p>"


def _flat_page(blocks: int, text: int, links: int) -> str:
    return "<html><body>" + (_block(text, links) + "</div>") * blocks + "</body></html>"


def _nested_page(blocks: int, text: int, links: int) -> str:
    return "<html><body>" + _block(text, links) * blocks + "</div>" * blocks + "</body></html>"


@pytest.mark.parametrize(
    ("text", "links"),
    [pytest.param(9, 0, id="text"), pytest.param(1, 55, id="110k-links")],
)
def test_work_on_a_deeply_nested_page_is_that_of_a_flat_one(text: int, links: int) -> None:
    # 2,000 elements deep, 2 MiB: the shape of hostile pages seen in the wild.
    blocks = 2_000
    flat_html, nested_html = _flat_page(blocks, text, links), _nested_page(blocks, text, links)
    assert len(flat_html) == len(nested_html)
    assert len(nested_html) > 1_900_000
    flat = find_main_content(document_fromstring(flat_html, parser=_PARSER))
    nested_root = document_fromstring(nested_html, parser=_PARSER)
    assert sum(1 for _ in nested_root.iter("div")) == blocks  # libxml2 kept the whole depth
    nested = find_main_content(nested_root)
    # Each paragraph's score reaches five ancestors at most, where a flat page has two: a
    # constant, never the depth (a walk of each subtree would be 2,000 times the flat cost).
    elements = blocks * (3 + links)
    assert flat.work <= 4 * elements
    # A page read whole climbs its last strong element's chain of ancestors once more (its
    # trailing link lists): the depth, once.
    assert nested.work <= 1.5 * flat.work + blocks


BRIDGE = "The bridge on Mill Road reopens on Monday, after three weeks of repairs to its deck."


def _cards(count: int) -> str:
    # Listing cards whose text is all inside their links, as on category and search pages.
    return "".join(
        f'<li class="card"><a href="/item/{i}"><h3>Item {i}: a solid oak shelf unit</h3>'
        f"<div>Holds books, boxes and records; two sizes, three finishes, flat-packed.</div>"
        "</a></li>"
        for i in range(count)
    )


def test_a_blurb_above_a_grid_of_cards_widens_to_the_listing() -> None:
    blurb = "<p>Shelving for every room, in oak, in birch, in white, and in black, too.</p>"
    main = _find(
        '<div class="menu"><a href="/">Home</a> <a href="/shop">Shop</a></div>'
        f'<div class="category"><div class="intro">{blurb}</div><ul>{_cards(20)}</ul></div>'
    )
    assert main.sure
    assert [element.get("class") for element in main.elements] == ["category"]
    assert "Item 19:" in _text(main)


def test_a_blurb_whose_listing_is_the_whole_page_reads_the_page() -> None:
    blurb = "<p>Shelving for every room, in oak, in birch, in white, and in black, too.</p>"
    main = _find(f'<div class="intro">{blurb}</div><ul>{_cards(20)}</ul>')
    assert main.verdict is MainContentVerdict.PARTIAL
    assert main.elements == ()


@pytest.mark.parametrize(
    ("article", "cards"),
    [
        pytest.param(f"<p>{LOREM}</p><p>{LOREM}</p>", 2, id="short-article-on-a-short-page"),
        pytest.param(_paragraphs("Article", 4), 40, id="article-of-600-characters-or-more"),
    ],
)
def test_an_article_is_no_scrap(article: str, cards: int) -> None:
    main = _find(f'<div class="story">{article}</div><ul>{_cards(cards)}</ul>')
    assert main.sure
    assert [element.get("class") for element in main.elements] == ["story"]


@pytest.mark.parametrize(
    ("kind", "region", "sure"),
    [
        pytest.param("article", f"<p>{LOREM * 3}</p>", True, id="article"),
        pytest.param("Article", f"<p>{LOREM * 3}</p>", True, id="article-capitalised"),
        pytest.param("article", f"<h1>Brief</h1><p>{BRIDGE}</p>", True, id="titled"),
        pytest.param("article", f"<p>{BRIDGE}</p>", False, id="untitled-scrap"),
        pytest.param("website", f"<p>{LOREM * 3}</p>", False, id="website"),
    ],
)
def test_a_short_region_is_an_article_when_the_page_says_so(
    kind: str, region: str, sure: bool
) -> None:
    root: HtmlElement = document_fromstring(
        f"<html><head><meta property='og:type' content='{kind}'></head><body>"
        f"<div class='story'>{region}</div><ul>{_cards(20)}</ul></body></html>",
        parser=_PARSER,
    )
    drop_junk(root)
    prune_chrome(root)
    main = find_main_content(root)
    assert main.sure is sure
    if sure:
        assert [element.get("class") for element in main.elements] == ["story"]


def _thread(first: str, replies: str, head: str = "") -> HtmlElement:
    """A thread whose first post scores best and whose replies sit deep, far from it."""
    root: HtmlElement = document_fromstring(
        f"<html><head>{head}</head><body><div class='thread'>"
        f"<div class='first'><div class='a'><div class='b'><div class='message'>{first}</div>"
        f"</div></div></div><div class='replies'>{replies}</div></div></body></html>",
        parser=_PARSER,
    )
    drop_junk(root)
    prune_chrome(root)
    return root


def _replies(body: str) -> str:
    return "".join(
        f"<div class='reply'><div class='who'>Member {i}</div><div><div><div><div>{body}"
        "</div></div></div></div></div>"
        for i in range(16)
    )


_REPLY = f"<p>Same here, it worked for me after the update last week.</p><p>{BRIDGE}</p>"
_TEASER = f"<p><a href='/t/1'>{BRIDGE} Another thread, and another.</a></p>"


@pytest.mark.parametrize(
    ("first", "replies", "head", "widened"),
    [
        pytest.param(LOREM * 8, _replies(_REPLY), "", True, id="first-post-of-a-thread"),
        pytest.param(
            f"<h1>The question</h1>{LOREM * 8}", _replies(_REPLY), "", False, id="holds-the-h1"
        ),
        pytest.param(LOREM * 8, _replies(_TEASER), "", False, id="the-rest-is-links"),
        pytest.param(
            LOREM * 8,
            _replies(_REPLY),
            "<meta property='og:type' content='article'>",
            False,
            id="the-page-says-article",
        ),
        pytest.param(LOREM * 30, _replies(_REPLY), "", False, id="most-of-the-page"),
    ],
)
def test_one_part_of_a_page_of_many_widens_to_them(
    first: str, replies: str, head: str, widened: bool
) -> None:
    main = find_main_content(_thread(first, replies, head))
    assert main.sure
    assert ("Member 15" in _text(main)) is widened
    assert "council approved" in _text(main)
