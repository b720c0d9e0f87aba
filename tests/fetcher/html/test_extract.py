"""read_document and cut: titles, content types, limits, fallbacks, and never raising."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fetcher.html.extract import (
    PAGE_TEXT_LIMIT,
    REPORT_TEXT_LIMIT,
    Document,
    cut,
    document_from_wire,
    read_document,
)

URL = "https://www.example.com/dir/page.html"


def _read(html: str | bytes, content_type: str = "text/html", url: str = URL) -> Document:
    body = html.encode() if isinstance(html, str) else html
    return read_document(body, content_type=content_type, charset=None, url=url)


def test_limits_are_the_specified_ones() -> None:
    assert (PAGE_TEXT_LIMIT, REPORT_TEXT_LIMIT) == (12_000, 24_000)


def test_html_page_gives_title_text_and_links() -> None:
    doc = _read(
        "<html><head><title>  The\n  Title </title><script>x()</script></head><body>"
        "<nav><a href='/home'>Home</a></nav><main><h1>Head</h1><p>Body <a href='/next'>next</a>"
        "</p></main></body></html>"
    )
    assert doc == Document(
        title="The Title",
        text="# Head\nBody next",
        links=("https://www.example.com/next", "https://www.example.com/home"),
    )


def test_title_falls_back_to_first_h1() -> None:
    assert _read("<body><h1>First <b>heading</b></h1><h1>Second</h1></body>").title == (
        "First heading"
    )


def test_svg_title_is_not_the_page_title() -> None:
    doc = _read("<body><svg><title>icon</title></svg><h1>Real</h1></body>")
    assert doc.title == "Real"


def test_very_long_title_is_cut() -> None:
    assert len(_read(f"<title>{'word ' * 500}</title><p>x</p>").title) <= 300


@pytest.mark.parametrize("content_type", ["text/plain", "TEXT/PLAIN; charset=utf-8"])
def test_plain_text_passes_through_normalised(content_type: str) -> None:
    doc = _read(b"line one  \r\n\r\n\r\n\r\nline\xc2\xa0two\n<b>not html</b>\n", content_type)
    assert doc == Document(title="", text="line one\n\nline two\n<b>not html</b>", links=())


@pytest.mark.parametrize(
    ("markdown", "title"),
    [
        pytest.param("intro\n\n# Title #\n\ntext", "Title", id="atx"),
        pytest.param("## Second level\ntext", "Second level", id="atx-h2"),
        pytest.param("Setext Title\n===\n\ntext", "Setext Title", id="setext"),
        pytest.param("```\n# comment in code\n```\n# Real", "Real", id="not-in-code"),
        pytest.param("#hashtag\ntext", "", id="no-space-no-heading"),
        pytest.param("just text", "", id="none"),
    ],
)
def test_markdown_title_is_its_first_heading(markdown: str, title: str) -> None:
    doc = _read(markdown, "text/markdown")
    assert doc.title == title
    assert doc.text == markdown
    assert doc.links == ()


def test_page_text_is_cut_to_the_page_limit_at_a_line() -> None:
    html = "".join(f"<p>Paragraph {i} {'word ' * 30}</p>" for i in range(400))
    text = _read(html).text
    assert len(text) <= PAGE_TEXT_LIMIT
    assert len(text) > PAGE_TEXT_LIMIT - 400
    assert text.endswith("word")


def test_deeply_nested_page_falls_back_to_plain_text() -> None:
    # Deeper than inscriptis' recursion can go: the reader must still return the text.
    html = "<body>" + "<div>" * 1500 + "deep words" + "</div>" * 1500 + "<p>end</p></body>"
    text = _read(html).text
    assert "deep words" in text
    assert "end" in text


def test_page_wrapped_in_chrome_is_read_unpruned() -> None:
    sentence = "This page keeps everything in its header element. "
    html = f"<body><header><p>{sentence * 60}</p></header></body>"
    assert _read(html).text.startswith(sentence.strip())


# A page whose <header> (or <form>, or <footer>) wraps the whole page loses it all to the
# pruning; the second reading skips those rules only, so the rest of its chrome still goes
# and its main content is still found (docs/reader.md, "wrapped pages keep their pruning").
ARTICLE = "<p>" + "The wrapped page holds its article in the header, sentence after sentence. " * 40
WRAPPED_PAGES = [
    # (page, what the reading holds, what it leaves out)
    (f"<body><header>{ARTICLE}</p></header></body>", "The wrapped page holds", None),
    (
        "<body><header><div class='menu'><ul>"
        + "".join(f"<li><a href='/{i}'>Menu entry {i}</a></li>" for i in range(30))
        + f"</ul></div><div class='text'>{ARTICLE}</p></div></header></body>",
        "The wrapped page holds",
        "Menu entry",
    ),
    (
        f"<body><footer><nav><a href='/a'>Site map link</a></nav>{ARTICLE}</p>"
        "<div class='cookie-consent'>We use cookies to improve the site.</div></footer></body>",
        "The wrapped page holds",
        "cookies",
    ),
]


@pytest.mark.parametrize(("html", "held", "left_out"), WRAPPED_PAGES)
def test_page_wrapped_in_chrome_keeps_the_rest_of_its_pruning(
    html: str, held: str, left_out: str | None
) -> None:
    text = _read(html).text
    assert held in text
    assert left_out is None or left_out not in text


def test_main_content_is_read_without_the_rest_of_the_page() -> None:
    teasers = "".join(
        f"<li><a href='/t/{i}'>Another story with a long enough headline, number {i}</a></li>"
        for i in range(40)
    )
    # The page says it is an article and the region holds its title: however short, the
    # region is the article, not the intro of a listing (fetcher/html/content.py, scraps).
    html = (
        "<head><meta property='og:type' content='article'></head>"
        "<body><div class='page'><div class='article'><h1>Brief</h1><p>The bridge on Mill Road "
        "reopens on Monday, after three weeks of repairs to its deck, the council said.</p></div>"
        f"<div class='more'><ul>{teasers}</ul></div></div></body>"
    )
    # A short article on a long page is no failed render: the rest is not read back in.
    assert _read(html).text == (
        "# Brief\nThe bridge on Mill Road reopens on Monday, after three weeks of repairs to its "
        "deck, the council said."
    )


def test_a_page_read_whole_leaves_out_the_link_lists_after_its_last_post() -> None:
    # Six equal posts: no one region is the page's (scattered), so all of it is read, but
    # not the mostly-link lists after the last post (fetcher/html/content.py).
    post = "The council approved the new budget on Tuesday, after a long and heated debate. "
    posts = "".join(
        f"<div class='post'><div class='inner'><p>Post {i}: {post * 3}</p><p>{post * 3}</p>"
        "</div></div>"
        for i in range(6)
    )
    towns = "".join(f"<li><a href='/t/{i}'>Town {i} homes for sale</a></li>" for i in range(12))
    text = _read(f"<body>{posts}<div class='explore'><ul>{towns}</ul></div></body>").text
    assert all(f"Post {i}:" in text for i in range(6))
    assert "Town" not in text


def test_page_of_only_navigation_is_not_empty() -> None:
    assert _read("<body><nav><a href='/a'>Only a menu</a></nav></body>").text == "Only a menu"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"   \n", id="blank"),
        pytest.param(b"<!-- only a comment -->", id="comment-only"),
        pytest.param(b"\x00\x01\x02", id="control-bytes"),
        pytest.param(b"<?xml version='1.0' encoding='utf-8'?><html><p>x</p></html>", id="xml-decl"),
        pytest.param(b"\xff\xfe<\x00p\x00>\x00", id="utf16-bom"),
        pytest.param(b"<p>" + b"<b>" * 5000 + b"bold", id="unclosed-deep"),
        pytest.param(b"<table>" + b"<tr><td>" * 300, id="broken-table"),
    ],
)
def test_hostile_bodies_never_raise(body: bytes) -> None:
    for content_type in ("text/html", "text/plain", "text/markdown", "application/octet-stream"):
        doc = read_document(body, content_type=content_type, charset=None, url=URL)
        assert isinstance(doc, Document)
        assert len(doc.text) <= PAGE_TEXT_LIMIT


def test_xml_declaration_does_not_stop_parsing() -> None:
    assert _read("<?xml version='1.0' encoding='utf-8'?><html><p>x</p></html>").text == "x"


def test_nul_bytes_do_not_truncate_the_text() -> None:
    assert _read(b"<p>a\x00b</p><p>c</p>").text == "a\ufffdb\nc"


@given(st.binary(max_size=2_000))
def test_any_bytes_read_without_raising(body: bytes) -> None:
    doc = read_document(body, content_type="text/html", charset=None, url=URL)
    assert len(doc.text) <= PAGE_TEXT_LIMIT


@given(st.text(max_size=3_000))
def test_any_text_with_words_reads_non_empty(text: str) -> None:
    doc = read_document(
        f"<html><body><p>{text}</p><p>anchor</p></body></html>".encode("utf-8", "surrogatepass"),
        content_type="text/html",
        charset="utf-8",
        url=URL,
    )
    assert doc.text


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        pytest.param("short", 10, "short", id="fits"),
        pytest.param("exactly10!", 10, "exactly10!", id="exactly"),
        pytest.param("alpha beta gamma", 12, "alpha beta", id="word"),
        pytest.param("line one\nline two", 12, "line one", id="line"),
        pytest.param("abcdefghijkl", 5, "abcde", id="no-boundary"),
        pytest.param("anything", 0, "", id="zero"),
        pytest.param("anything", -3, "", id="negative"),
        pytest.param("word " * 10, 10, "word word", id="trailing-space-stripped"),
    ],
)
def test_cut(text: str, limit: int, expected: str) -> None:
    assert cut(text, limit) == expected


def test_cut_prefers_a_line_close_to_the_limit_over_an_early_one() -> None:
    text = "head\n" + "word " * 5_000
    result = cut(text, 12_000)
    assert 11_000 < len(result) <= 12_000
    assert result.endswith("word")


def test_cut_takes_a_line_break_near_the_limit() -> None:
    text = ("x" * 99 + "\n") * 300
    result = cut(text, 12_000)
    assert len(result) == 11_999
    assert result.endswith("x")


def test_cut_of_a_report_uses_the_report_limit() -> None:
    report = "\n\n".join(["para " * 100] * 100)
    assert len(cut(report, REPORT_TEXT_LIMIT)) <= REPORT_TEXT_LIMIT


@given(st.text(max_size=500), st.integers(min_value=0, max_value=600))
def test_cut_never_exceeds_the_limit_and_keeps_a_prefix(text: str, limit: int) -> None:
    result = cut(text, limit)
    assert len(result) <= limit
    assert text.startswith(result)


def test_concurrent_reads_in_threads_match_sequential_reads() -> None:
    # inscriptis attaches its canvas to the profile's body element; each read must use its own.
    pages = [
        (
            f"<html><head><title>Page {i}</title></head><body><h2>Part {i}</h2>"
            + "".join(
                f"<p>Page {i} paragraph {j} <a href='/p{i}/{j}'>link</a></p>" for j in range(40)
            )
            + "<table><tr><td>a</td><td>b</td></tr></table>"
            + "<pre>code\n  indented</pre></body></html>"
        ).encode()
        for i in range(24)
    ]

    def read(body: bytes) -> Document:
        return read_document(body, content_type="text/html", charset=None, url=URL)

    sequential = [read(body) for body in pages]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(3):
            assert list(pool.map(read, pages)) == sequential


def _answer(**changes: object) -> dict[str, object]:
    return {"title": "T", "text": "x", "links": ["https://www.example.com/a"]} | changes


WIRE_ANSWERS = [
    pytest.param(_answer(), True, id="a-document"),
    pytest.param(_answer(title="t" * 300), True, id="title-300"),
    pytest.param(_answer(title="t" * 301), False, id="title-301"),
    pytest.param(_answer(text="x" * PAGE_TEXT_LIMIT), True, id="text-at-the-limit"),
    pytest.param(_answer(text="x" * (PAGE_TEXT_LIMIT + 1)), False, id="text-past-the-limit"),
    pytest.param(_answer(links=["https://evil.test/"]), False, id="link-to-another-site"),
    pytest.param(_answer(links=[7]), False, id="link-not-text"),
    pytest.param(_answer(links="https://www.example.com/a"), False, id="links-not-a-list"),
    pytest.param(_answer(title=None), False, id="title-not-text"),
    pytest.param(_answer(text=["x"]), False, id="text-not-text"),
    pytest.param(_answer(extra=1), False, id="unknown-field"),
    pytest.param({"title": "T", "text": "x"}, False, id="missing-field"),
    pytest.param(["T", "x", []], False, id="not-an-object"),
]


@pytest.mark.parametrize(("answer", "accepted"), WIRE_ANSWERS)
def test_a_worker_answer_outside_the_contract_is_refused(answer: object, accepted: bool) -> None:
    if accepted:
        document = document_from_wire(answer, url=URL, site="example.com")
        assert document.to_wire() == answer
    else:
        with pytest.raises(ValueError, match="render worker"):
            document_from_wire(answer, url=URL, site="example.com")


def test_a_document_survives_its_round_trip_through_json() -> None:
    document = _read("<title>T</title><main><p>Body <a href='/next'>next</a></p></main>")
    wire = json.loads(json.dumps(document.to_wire()))
    assert document_from_wire(wire, url=URL, site="example.com") == document
