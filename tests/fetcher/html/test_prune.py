"""Pruning page chrome: each rule, and the guards that keep the article."""

from __future__ import annotations

import pytest
from lxml.html import HtmlElement, document_fromstring

from fetcher.html.prune import drop_junk, prune_chrome, trim_to_budget


def _pruned(body: str, *, wrappers: bool = True) -> str:
    root: HtmlElement = document_fromstring(f"<html><body>{body}</body></html>")
    drop_junk(root)
    prune_chrome(root, wrappers=wrappers)
    return " ".join(root.text_content().split())


ARTICLE = "<p>" + "Article words here. " * 20 + "</p>"


@pytest.mark.parametrize(
    "junk",
    [
        pytest.param("<script>var x = 1;</script>", id="script"),
        pytest.param("<style>p { color: red }</style>", id="style"),
        pytest.param("<noscript>enable js</noscript>", id="noscript"),
        pytest.param("<template><p>tpl</p></template>", id="template"),
        pytest.param("<svg><text>icon</text></svg>", id="svg"),
        pytest.param("<iframe>frame</iframe>", id="iframe"),
        pytest.param("<button>Click</button>", id="button"),
        pytest.param("<select><option>One</option></select>", id="select"),
        pytest.param("<textarea>type</textarea>", id="textarea"),
        pytest.param("<dialog>modal</dialog>", id="dialog"),
        pytest.param("<nav>Home About</nav>", id="nav"),
        pytest.param("<aside>Sidebar</aside>", id="aside"),
        pytest.param("<menu><li>item</li></menu>", id="menu"),
        pytest.param('<div role="navigation">links</div>', id="role-navigation"),
        pytest.param('<div role="banner">banner</div>', id="role-banner"),
        pytest.param('<div role="contentinfo">legal</div>', id="role-contentinfo"),
        pytest.param('<div role="complementary">more</div>', id="role-complementary"),
        pytest.param('<div role="search">search</div>', id="role-search"),
        pytest.param('<div role="dialog">dialog</div>', id="role-dialog"),
        pytest.param('<div hidden="">hidden</div>', id="hidden-attribute"),
        pytest.param('<div style="display: none">none</div>', id="display-none"),
        pytest.param('<div style="VISIBILITY:hidden">invisible</div>', id="visibility-hidden"),
        pytest.param('<div class="table" style="display:none">x</div>', id="hidden-not-a-tab"),
        pytest.param("<header>Site header</header>", id="page-header"),
        pytest.param("<footer>Site footer</footer>", id="page-footer"),
        pytest.param("<form><input><p>Subscribe</p></form>", id="small-form"),
        pytest.param('<div class="cookie-banner">We use cookies</div>', id="class-cookie"),
        pytest.param('<div id="newsletter">Sign up</div>', id="id-newsletter"),
        pytest.param('<div class="share-buttons">Share</div>', id="class-share"),
        pytest.param('<ul class="relatedLinks"><li>Other</li></ul>', id="camel-related"),
        pytest.param('<div class="ad-slot">Ad</div>', id="class-ad"),
        pytest.param('<div class="topAd">Ad</div>', id="camel-ad"),
        pytest.param('<div id="comments">Reader comments</div>', id="id-comments"),
        pytest.param('<div class="taboola-feed">Sponsored</div>', id="class-taboola"),
        pytest.param('<div class="site-nav">Menu</div>', id="class-nav"),
        pytest.param('<div id="footer">Legal</div>', id="id-footer"),
        pytest.param('<section class="widget">Popular</section>', id="class-widget"),
        pytest.param('<div class="ad-1 x9">Ad</div>', id="word-beside-a-number"),
        pytest.param('<div class="sc-3f2 share">Share</div>', id="word-beside-a-hash"),
        # A forum post's signature and its author's card are not the thread (docs/reader.md).
        pytest.param('<div class="message-signature">My rig</div>', id="class-signature"),
        pytest.param('<div class="user-signatures">Sig</div>', id="signatures"),
        pytest.param('<span class="avatar-initials">JD</span>', id="class-avatar"),
        pytest.param('<div class="usercard">Joined 2019</div>', id="class-usercard"),
        pytest.param('<div class="user-info">asked Mar 26</div>', id="class-user-info"),
        pytest.param('<div class="messageUserInfo">Messages: 3</div>', id="camel-user-info"),
        pytest.param('<div class="message-userExtras">Joined</div>', id="user-extras"),
        pytest.param('<h5 class="userTitle">Member</h5>', id="user-title"),
        # Each class name is judged alone: a content word in another name does not save
        # a footer or a comment box that also wears a layout class (docs/reader.md).
        pytest.param(
            '<div class="SiteFooter main-content">Legal</div>', id="footer-beside-content"
        ),
        pytest.param('<div class="comments content">Said</div>', id="comments-beside-content"),
        pytest.param('<div class="text" id="related">Other</div>', id="id-beside-content-class"),
    ],
)
def test_chrome_is_dropped_and_the_article_kept(junk: str) -> None:
    text = _pruned(f"{junk}<article>{ARTICLE}</article>")
    assert text == " ".join(("Article words here. " * 20).split())


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            "<article><header><h1>Title</h1></header><p>x</p></article>", id="header-in-article"
        ),
        pytest.param("<main><p>x</p><footer><p>Byline</p></footer></main>", id="footer-in-main"),
        pytest.param('<div role="main"><header><p>By</p></header></div>', id="header-in-role-main"),
        pytest.param('<div class="header">Words</div>', id="ad-inside-a-word"),
        pytest.param('<div class="badge shadow">Words</div>', id="ad-inside-words"),
        pytest.param('<div class="article-share">Words</div>', id="content-word-guard"),
        pytest.param('<div class="post-comments-count">Words</div>', id="post-guard"),
        pytest.param('<div class="social-media-embed">Tweet</div>', id="embed-guard"),
        pytest.param(
            '<div class="related"><article><p>Story</p></article></div>', id="holds-article"
        ),
        pytest.param('<div class="commentary">Opinion</div>', id="commentary-not-comment"),
        pytest.param('<div class="post-signature">Asked by</div>', id="post-signature-guard"),
        pytest.param('<div class="user-content">Words</div>', id="user-content-guard"),
        pytest.param('<div class="username">Words</div>', id="username-not-a-card"),
        pytest.param('<div class="info-user">Words</div>', id="info-before-user"),
        pytest.param('<div class="entry-footer">Tags</div>', id="entry-footer-guard"),
        pytest.param(
            '<article><p>x</p><div class="footer">Notes</div></article>', id="footer-in-article"
        ),
        pytest.param('<div class="canvas-unavailable">Words</div>', id="nav-inside-words"),
        pytest.param('<div style="color: red">Styled</div>', id="style-not-hidden"),
        pytest.param('<article aria-hidden="false"><p>x</p></article>', id="aria-hidden-false"),
        # aria-hidden hides from screen readers only; cards and carousels wear it on text
        # the page shows (wcxb-dev listings and collections, docs/reader.md).
        pytest.param('<a aria-hidden="true" href="/p">Card text</a>', id="aria-hidden-shown"),
        # Generated class names are not words: "jXK9ad" holds no "ad", "h.ad4f0c" neither.
        pytest.param('<div class="jXK9ad-SmKAyb">Words</div>', id="generated-ad"),
        pytest.param('<div id="h.adfd8bb8ef21486_41">Words</div>', id="generated-id-ad"),
        pytest.param('<div class="navQ2x">Words</div>', id="generated-nav"),
        # Closed tabs and folds hold the page's own content (a specification table).
        pytest.param('<div class="tab-pane" style="display:none">Specs</div>', id="tab-pane"),
        pytest.param('<div role="tabpanel" hidden>Details</div>', id="role-tabpanel"),
        pytest.param('<div class="faq__answer" style="display: none">Yes</div>', id="faq"),
        pytest.param('<div id="accordion-body-3" hidden>Fold</div>', id="accordion"),
    ],
)
def test_guards_keep_content(body: str) -> None:
    visible = " ".join(document_fromstring(body + ARTICLE).text_content().split())
    assert _pruned(body + ARTICLE) == visible


# The second reading of a page that pruning emptied: the rules for elements that may wrap the
# whole page are off, every other rule still runs (docs/reader.md).
WITHOUT_WRAPPER_RULES = [
    # (body, what stays, what goes)
    ("<header><p>Page in a header</p><nav>Menu</nav></header>", "Page in a header", "Menu"),
    ("<footer><p>Page in a footer</p><aside>Rail</aside></footer>", "Page in a footer", "Rail"),
    (
        "<form><p>Page in a form, long enough to outweigh its share box</p>"
        "<div class='share'>Share</div></form>",
        "Page in a form",
        "Share",
    ),
    ("<header><p>Words</p><div hidden>Hidden words</div></header>", "Words", "Hidden"),
]


@pytest.mark.parametrize(("body", "stays", "goes"), WITHOUT_WRAPPER_RULES)
def test_without_the_wrapper_rules_the_rest_of_the_chrome_goes(
    body: str, stays: str, goes: str
) -> None:
    assert stays not in _pruned(body)
    text = _pruned(body, wrappers=False)
    assert stays in text
    assert goes not in text


def test_form_wrapping_the_whole_page_is_kept() -> None:
    body = "<form><h1>Title</h1>" + "<p>Paragraph text.</p>" * 5 + "</form>"
    assert "Paragraph text." in _pruned(body)


def test_form_holding_an_article_is_kept() -> None:
    assert "Article words" in _pruned(f"<form><article>{ARTICLE}</article></form>")


def test_boilerplate_class_holding_most_of_the_page_is_kept() -> None:
    # A page whose one big wrapper is named "sidebar-layout" must not lose everything.
    body = f'<div class="sidebar-layout">{ARTICLE}</div><p>tail</p>'
    assert "Article words" in _pruned(body)


def test_nav_holding_main_is_kept() -> None:
    assert "Article words" in _pruned(f"<nav><main>{ARTICLE}</main></nav>")


def test_tail_text_of_a_dropped_element_stays() -> None:
    assert _pruned("<p>before <button>x</button> after</p>") == "before after"


def test_trim_to_budget_keeps_the_head_of_a_long_page() -> None:
    root: HtmlElement = document_fromstring(
        "<html><body>"
        + "".join(f"<p>p{i:04d} {'x' * 95}</p>" for i in range(500))
        + "</body></html>"
    )
    trim_to_budget(root, 10_000, 50_000)
    paragraphs = root.findall(".//p")
    assert 95 <= len(paragraphs) <= 110
    assert paragraphs[0].text is not None
    assert paragraphs[0].text.startswith("p0000")


def test_trim_to_budget_bounds_the_elements_too() -> None:
    root: HtmlElement = document_fromstring("<html><body>" + "<br>" * 1000 + "</body></html>")
    trim_to_budget(root, 10_000, 100)
    assert 95 <= len(root.findall(".//br")) <= 100
