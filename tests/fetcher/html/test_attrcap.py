"""The attribute cap before libxml2 (issue 22, finding 11): tables of tags on both sides of
the cap, the reader's attributes kept, and the reader's output on a crowded page."""

from __future__ import annotations

import pytest

from fetcher.html.attrcap import MAX_ATTRIBUTES, READER_ATTRIBUTES, cap_attributes
from fetcher.html.extract import read_document


def attributes(count: int, *, start: int = 0) -> str:
    return " ".join(f"data-a{i}=x" for i in range(start, start + count))


KEPT = attributes(MAX_ATTRIBUTES)


@pytest.mark.parametrize(
    "markup",
    [
        "",
        "plain text, no tag",
        "<p>a < b and c<d</p>",
        f"<div {attributes(MAX_ATTRIBUTES)}>at the cap</div>",
        f"<div {attributes(MAX_ATTRIBUTES - 1)} class=x>at the cap with a class</div>",
        f'<div {attributes(MAX_ATTRIBUTES)}/><img src="a.png">',
        f"<!-- <div {attributes(MAX_ATTRIBUTES + 1)}> -->",
        f"<script>var s = '<path {attributes(MAX_ATTRIBUTES + 1)}>';</script>",
        f"<STYLE>/* <p {attributes(MAX_ATTRIBUTES + 1)}> */</STYLE>",
        f'<img src="data:image/svg+xml,<path {attributes(MAX_ATTRIBUTES + 1)}>">',
        f"<title>{attributes(MAX_ATTRIBUTES + 1)}</title>",
        f"<p>a <!-- never closed <div {attributes(MAX_ATTRIBUTES + 1)}>",
        "<svg viewBox='0 0 10 10'><path d='M0 0L10 10' stroke='red' fill=none /></svg>",
    ],
    ids=[
        "empty",
        "text",
        "less-than",
        "at-cap",
        "at-cap-class",
        "self-closing",
        "comment",
        "script",
        "style",
        "quoted-markup",
        "text-of-words",
        "open-comment",
        "svg",
    ],
)
def test_at_or_under_the_cap_the_markup_is_the_same_object(markup: str) -> None:
    assert cap_attributes(markup) is markup


@pytest.mark.parametrize(
    ("markup", "capped"),
    [
        (
            f"<div {attributes(MAX_ATTRIBUTES + 1)}>x</div>",
            f"<div {KEPT}>x</div>",
        ),
        (
            f"<div {attributes(MAX_ATTRIBUTES + 500)} id=main>x</div>",
            f"<div {KEPT} id=main>x</div>",
        ),
        (
            # Every reader attribute past the cap is kept, the first of each only.
            f'<a {attributes(MAX_ATTRIBUTES + 5)} href="/next" class=a class=b role=main '
            'style="display:none" hidden aria-hidden=true id=x href=/other>n</a>',
            f'<a {KEPT} href="/next" class=a role=main style="display:none" hidden '
            "aria-hidden=true id=x>n</a>",
        ),
        (
            # A name the reader uses inside the first MAX_ATTRIBUTES is not kept twice.
            f"<p class=first {attributes(MAX_ATTRIBUTES + 3)} class=second>t</p>",
            f"<p class=first {attributes(MAX_ATTRIBUTES - 1)}>t</p>",
        ),
        (
            # Quoted values may hold '>' and spaces; upper-case names are the same names.
            f"<DIV {attributes(MAX_ATTRIBUTES + 1)} title='a > b' ID=\"x y\">x</DIV>",
            f'<DIV {KEPT} ID="x y">x</DIV>',
        ),
        (
            # Attributes glued together, or split by '/', are attributes all the same.
            "<i " + "/".join(f'a{i}="v"' for i in range(MAX_ATTRIBUTES + 2)) + ">i</i>",
            "<i " + " ".join(f'a{i}="v"' for i in range(MAX_ATTRIBUTES)) + ">i</i>",
        ),
        (
            # The text around a crowded tag and the tags after it are untouched.
            f"<b>a</b><div {attributes(MAX_ATTRIBUTES + 1)} /><u x=1>b</u>",
            f"<b>a</b><div {KEPT} /><u x=1>b</u>",
        ),
        (
            # What libxml2 skips as bogus attributes counts too: it cannot hide the rest.
            "<div " + '"x" ' * (MAX_ATTRIBUTES + 1) + "id=a>x</div>",
            "<div " + " ".join(['"x"'] * MAX_ATTRIBUTES) + " id=a>x</div>",
        ),
        (
            # A crowded script tag is capped; its text is left as it is.
            f"<script {attributes(MAX_ATTRIBUTES + 1)}>a <b {attributes(200)}></script><p>",
            f"<script {KEPT}>a <b {attributes(200)}></script><p>",
        ),
        (
            # A crowded tag the document never closes.
            f"<div {attributes(MAX_ATTRIBUTES + 1)}",
            f"<div {KEPT}",
        ),
    ],
    ids=[
        "one-over",
        "many-over-id",
        "reader-attributes",
        "reader-attribute-early",
        "quoted",
        "glued",
        "surroundings",
        "bogus",
        "script-tag",
        "unclosed",
    ],
)
def test_over_the_cap_a_tag_keeps_the_first_and_the_readers(markup: str, capped: str) -> None:
    assert cap_attributes(markup) == capped


def test_the_reader_attributes_are_the_ones_the_reader_reads() -> None:
    # prune.py and content.py (role, hidden, aria-hidden, style, class, id), links.py
    # (href, role), render.py (style).
    assert {"href", "role", "hidden", "aria-hidden", "style", "class", "id"} == READER_ATTRIBUTES


def crowded_page(count: int) -> bytes:
    names = " ".join(f"a{i}=x" for i in range(count))
    return (
        "<html><head><title>Crowded</title></head><body>"
        f'<nav {names} class="menu"><a href="/menu">Menu</a></nav>'
        f'<main><p {names} id="lead">The article text.</p>'
        f'<a {names} href="/next">Next</a></main></body></html>'
    ).encode()


def test_a_page_of_crowded_elements_reads_as_without_the_crowd() -> None:
    url, site = "https://example.org/", "example.org"
    crowded = read_document(
        crowded_page(60_000), content_type="text/html", charset=None, url=url, site=site
    )
    plain = read_document(
        crowded_page(0), content_type="text/html", charset=None, url=url, site=site
    )
    assert crowded == plain
    assert "The article text." in crowded.text
    assert "Menu" not in crowded.text  # the nav was still pruned
    assert crowded.links == ("https://example.org/next", "https://example.org/menu")
