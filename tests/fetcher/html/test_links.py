"""Same-site links: the Public Suffix List rules, address clean-up, ranking, cap and base."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lxml.html import HtmlElement, HTMLParser, document_fromstring

from fetcher.html.links import (
    MAX_LINKS,
    are_page_links,
    page_links,
    resolve_link,
    same_site_links,
    site_of,
)
from fetcher.net.urls import Address, parse

PAGE = "https://www.example.co.uk/news/story.html"


@pytest.mark.parametrize(
    ("host", "site"),
    [
        pytest.param("www.example.co.uk", "example.co.uk", id="co-uk-www"),
        pytest.param("news.example.co.uk", "example.co.uk", id="co-uk-subdomain"),
        pytest.param("example.co.uk", "example.co.uk", id="co-uk-registrable"),
        pytest.param("co.uk", "co.uk", id="public-suffix-is-own-site"),
        pytest.param("a.github.io", "a.github.io", id="github-io-private-suffix"),
        pytest.param("x.a.github.io", "a.github.io", id="github-io-deeper"),
        pytest.param("github.io", "github.io", id="github-io-itself"),
        pytest.param("WWW.Example.COM", "example.com", id="lower-cased"),
        pytest.param("www.example.com.", "example.com", id="trailing-dot"),
        pytest.param("bücher.example", "xn--bcher-kva.example", id="idna-label"),
        pytest.param("www.bücher.de", "xn--bcher-kva.de", id="idna-registrable"),
        pytest.param("203.0.113.7", "203.0.113.7", id="ipv4-own-site"),
        pytest.param("[2001:db8::1]", "2001:db8::1", id="ipv6-own-site"),
        pytest.param("2130706433", "127.0.0.1", id="ipv4-as-number-read-like-the-parser"),
        pytest.param("0x7f.1", "127.0.0.1", id="ipv4-hex-short-form-read-like-the-parser"),
        pytest.param("localhost", "localhost", id="single-label"),
    ],
)
def test_site_of(host: str, site: str) -> None:
    assert site_of(host) == site


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        pytest.param("a.github.io", "b.github.io", False, id="github-io-neighbours"),
        pytest.param("www.example.co.uk", "news.example.co.uk", True, id="co-uk-siblings"),
        pytest.param("example.co.uk", "other.co.uk", False, id="co-uk-strangers"),
        pytest.param("10.0.0.1", "10.0.0.2", False, id="ip-neighbours"),
        pytest.param("10.0.0.1", "10.0.0.1", True, id="ip-itself"),
        pytest.param("example.com", "example.com.evil.org", False, id="suffix-trick"),
        pytest.param("EXAMPLE.com", "www.example.COM", True, id="case-insensitive"),
    ],
)
def test_same_site_is_same_registrable_domain(first: str, second: str, same: bool) -> None:
    assert (site_of(first) == site_of(second)) is same


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        pytest.param("/a", "https://www.example.co.uk/a", id="root-relative"),
        pytest.param("b.html", "https://www.example.co.uk/news/b.html", id="relative"),
        pytest.param("../c", "https://www.example.co.uk/c", id="dot-segments"),
        pytest.param("http://www.example.co.uk/d", "https://www.example.co.uk/d", id="http-up"),
        pytest.param("/e#section", "https://www.example.co.uk/e", id="fragment-dropped"),
        pytest.param("#top", "https://www.example.co.uk/news/story.html", id="fragment-only"),
        pytest.param("//news.example.co.uk/f", "https://news.example.co.uk/f", id="scheme-rel"),
        pytest.param("https://WWW.Example.co.uk:443/g", "https://www.example.co.uk/g", id="443"),
        pytest.param("/h?q=1&r=2", "https://www.example.co.uk/h?q=1&r=2", id="query-kept"),
        pytest.param("/i j", "https://www.example.co.uk/i%20j", id="space-encoded"),
        pytest.param("  /k\n", "https://www.example.co.uk/k", id="whitespace-trimmed"),
        pytest.param("https://bücher.example/", "https://xn--bcher-kva.example/", id="idna"),
        pytest.param("https://example.org", "https://example.org/", id="empty-path"),
        pytest.param("http://www.example.co.uk:80/d", "https://www.example.co.uk/d", id="port-80"),
        pytest.param(
            "https://www.example.co.uk:/e", "https://www.example.co.uk/e", id="empty-port"
        ),
        pytest.param("https://2130706433/", "https://127.0.0.1/", id="numeric-host"),
        pytest.param("?q=2", "https://www.example.co.uk/news/story.html?q=2", id="query-only"),
        pytest.param("./a/../b", "https://www.example.co.uk/news/b", id="dot-segments-relative"),
        pytest.param("/files/report.PDF", "https://www.example.co.uk/files/report.PDF", id="pdf"),
    ],
)
def test_resolve_link_writes_absolute_https(href: str, expected: str) -> None:
    assert resolve_link(href, PAGE) == expected


@pytest.mark.parametrize(
    "href",
    [
        pytest.param("javascript:alert(1)", id="javascript"),
        pytest.param("JavaScript:void(0)", id="javascript-case"),
        pytest.param("mailto:a@example.co.uk", id="mailto"),
        pytest.param("data:text/html,<b>x</b>", id="data"),
        pytest.param("tel:+441234", id="tel"),
        pytest.param("ftp://www.example.co.uk/f", id="ftp"),
        pytest.param("https://user:pw@www.example.co.uk/", id="userinfo"),
        pytest.param("https://user@www.example.co.uk/", id="user-only"),
        pytest.param("https://www.example.co.uk:8443/", id="port-8443"),
        pytest.param("https://www.example.co.uk:99999/", id="port-out-of-range"),
        pytest.param("https://[::1/", id="broken-ipv6"),
        pytest.param("https://exa mple.co.uk/", id="space-in-host"),
        pytest.param("/photo.JPG", id="image"),
        pytest.param("/files/report.docx", id="office-document"),
        pytest.param("/archive.tar.gz", id="archive"),
        pytest.param("/" + "a" * 2048, id="longer-than-the-link-limit"),
        pytest.param("/" + "a" * 1_200_000, id="a-megabyte-long"),
        pytest.param("https://www.example.co.uk\\@evil.test/", id="backslash"),
    ],
)
def test_resolve_link_refuses_what_cannot_be_followed(href: str) -> None:
    assert resolve_link(href, PAGE) is None


def test_same_site_links_keep_only_the_start_site() -> None:
    hrefs = [
        "/a",
        "https://news.example.co.uk/b",
        "https://other.co.uk/c",
        "https://example.co.uk.evil.org/d",
        "https://203.0.113.7/e",
    ]
    assert same_site_links(hrefs, base=PAGE, site="example.co.uk") == (
        "https://www.example.co.uk/a",
        "https://news.example.co.uk/b",
    )


def test_same_site_links_on_github_io_stay_on_one_user_site() -> None:
    base = "https://alice.github.io/blog/"
    hrefs = ["post-1", "https://bob.github.io/", "https://github.io/", "/about"]
    assert same_site_links(hrefs, base=base, site="alice.github.io") == (
        "https://alice.github.io/blog/post-1",
        "https://alice.github.io/about",
    )


def test_same_site_links_accept_any_host_of_the_site_as_site() -> None:
    links = same_site_links(["/a"], base=PAGE, site="www.example.co.uk")
    assert links == ("https://www.example.co.uk/a",)


def test_same_site_links_on_an_ip_host_keep_that_ip_only() -> None:
    base = "https://203.0.113.7/index.html"
    hrefs = ["/a", "https://203.0.113.8/b", "https://203.0.113.7/c"]
    assert same_site_links(hrefs, base=base, site="203.0.113.7") == (
        "https://203.0.113.7/a",
        "https://203.0.113.7/c",
    )


def test_same_site_links_are_deduplicated_after_resolution() -> None:
    hrefs = ["/a", "/a#x", "http://www.example.co.uk/a", "https://WWW.EXAMPLE.CO.UK/a", "a"]
    links = same_site_links(hrefs, base=PAGE, site="example.co.uk")
    assert links == ("https://www.example.co.uk/a", "https://www.example.co.uk/news/a")


def test_same_site_links_leave_out_the_page_itself() -> None:
    links = same_site_links(["#top", "/x"], base=PAGE, site="example.co.uk", exclude=PAGE)
    assert links == ("https://www.example.co.uk/x",)


def test_same_site_links_stop_at_the_cap() -> None:
    hrefs = [f"/p{i}" for i in range(100)]
    links = same_site_links(hrefs, base=PAGE, site="example.co.uk")
    assert len(links) == MAX_LINKS == 24
    assert links[0].endswith("/p0")
    assert links[-1].endswith("/p23")


def _tree(body: str, head: str = "") -> HtmlElement:
    return document_fromstring(f"<html><head>{head}</head><body>{body}</body></html>")


def test_page_links_put_main_content_first_and_chrome_last() -> None:
    root = _tree(
        '<header><a href="/header">h</a></header>'
        '<nav><a href="/nav">n</a></nav>'
        '<div><a href="/body">b</a></div>'
        '<main><article><header><a href="/byline">by</a></header><p><a href="/main">m</a></p>'
        '<nav><a href="/toc">toc</a></nav></article></main>'
        '<aside><a href="/aside">a</a></aside>'
        '<div role="navigation"><a href="/rolenav">r</a></div>'
        '<footer><a href="/footer">f</a></footer>'
    )
    links = page_links(root, url="https://example.com/page")
    paths = [link.removeprefix("https://example.com") for link in links]
    assert paths[:3] == ["/byline", "/main", "/body"]
    assert set(paths[3:]) == {"/header", "/nav", "/toc", "/aside", "/rolenav", "/footer"}


def test_page_links_honour_base_href() -> None:
    root = _tree('<a href="x">x</a>', head='<base href="https://example.com/docs/">')
    links = page_links(root, url="https://example.com/page")
    assert links == ("https://example.com/docs/x",)


def test_page_links_ignore_a_javascript_base() -> None:
    root = _tree('<a href="x">x</a>', head='<base href="javascript:alert(1)//">')
    links = page_links(root, url="https://example.com/dir/page")
    assert links == ("https://example.com/dir/x",)


def test_page_links_use_the_site_given_not_the_page_host() -> None:
    root = _tree('<a href="https://b.example.net/1">1</a><a href="/2">2</a>')
    links = page_links(root, url="https://cdn.example.org/", site="example.net")
    assert links == ("https://b.example.net/1",)


def test_page_links_of_a_page_without_anchors_are_empty() -> None:
    assert page_links(_tree("<p>no links</p>"), url="https://example.com/") == ()


_HOSTISH = "aexmplcou.0127xX:[]@%\\/?#-①１ÉＥ"
link_strings = st.one_of(
    st.text(max_size=60),
    st.tuples(
        st.sampled_from(["https://", "http://", "//", "HTTPS://", "/", "", "https:"]),
        st.text(alphabet=_HOSTISH, max_size=30),
        st.sampled_from(["", "/", "/p", ".example.co.uk/p", ".co.uk", ":443/", ":80/x"]),
    ).map("".join),
)


@given(link_strings)
def test_same_site_decision_and_download_agree_on_the_host(href: str) -> None:
    """Item 4 of issue 15: the crawl judges the host that the download will connect to."""
    kept = same_site_links([href], base=PAGE, site="example.co.uk")
    for link in kept:
        address = parse(link)
        assert isinstance(address, Address), link
        assert address.url == link
        assert site_of(address.host) == "example.co.uk"
    # The other way round: an absolute link the download reads as on the site is kept.
    written = parse(href.strip())
    if (
        isinstance(written, Address)
        and href == href.strip()
        and site_of(written.host) == "example.co.uk"
        and written.url != PAGE
        and "." not in written.target.rpartition("/")[2]
    ):
        assert kept == (written.url,)


def test_links_inside_deeply_nested_landmarks_keep_their_rank() -> None:
    """The ranking walk (one pass, issue 15 item A) sees through 1,000 nested landmarks."""
    links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(30))
    markup = (
        "<html><body>"
        + "<nav>" * 1000
        + links
        + "</nav>" * 1000
        + '<main><a href="/m">m</a></main><p><a href="/b">b</a></p></body></html>'
    )
    root = document_fromstring(markup, parser=HTMLParser(huge_tree=True))
    ranked = page_links(root, url="https://example.com/")
    assert ranked[:3] == (
        "https://example.com/m",
        "https://example.com/b",
        "https://example.com/p0",
    )
    assert len(ranked) == MAX_LINKS


OWN = "https://www.example.co.uk/a"
ARE_PAGE_LINKS = [
    pytest.param([], PAGE, True, id="none"),
    pytest.param([OWN, "https://news.example.co.uk/b"], PAGE, True, id="same-site"),
    pytest.param([f"{OWN}{n}" for n in range(MAX_LINKS)], PAGE, True, id="at-the-cap"),
    pytest.param([f"{OWN}{n}" for n in range(MAX_LINKS + 1)], PAGE, False, id="past-the-cap"),
    pytest.param([OWN, OWN], PAGE, False, id="duplicate"),
    pytest.param(["https://other.co.uk/"], PAGE, False, id="other-site"),
    pytest.param(["https://co.uk/"], PAGE, False, id="public-suffix"),
    pytest.param(["https://10.0.0.1/"], PAGE, False, id="ip-address"),
    pytest.param(["http://www.example.co.uk/a"], PAGE, False, id="not-normalised-scheme"),
    pytest.param(["https://WWW.example.co.uk/a"], PAGE, False, id="not-normalised-host"),
    pytest.param(["https://www.example.co.uk:443/a"], PAGE, False, id="not-normalised-port"),
    pytest.param(["/a"], PAGE, False, id="relative"),
    pytest.param(["https://www.example.co.uk:8443/a"], PAGE, False, id="foreign-port"),
    pytest.param(
        ["https://www.example.co.uk:8443/a"],
        "https://www.example.co.uk:8443/",
        True,
        id="the-pages-own-port",
    ),
    pytest.param(["https://u@www.example.co.uk/a"], PAGE, False, id="userinfo"),
    pytest.param(["https://www.example.co.uk/a.png"], PAGE, False, id="unreadable-type"),
    pytest.param(["https://www.example.co.uk/" + "a" * 2022], PAGE, True, id="2048-long"),
    pytest.param(["https://www.example.co.uk/" + "a" * 2023], PAGE, False, id="2049-long"),
    pytest.param([OWN], "not an address", False, id="page-address-refused"),
    pytest.param([], "not an address", True, id="page-address-refused-no-links"),
]


@pytest.mark.parametrize(("links", "url", "expected"), ARE_PAGE_LINKS)
def test_are_page_links(links: list[str], url: str, expected: bool) -> None:
    """What a render worker may answer as a page's links (both sides of every bound)."""
    assert are_page_links(links, url=url, site="example.co.uk") is expected
