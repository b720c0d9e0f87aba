"""A product's description from the page's JSON-LD: which text is taken, when it is added,
and what hostile JSON-LD gets (nothing, at a bounded cost)."""

from __future__ import annotations

import json

import pytest
from lxml.html import HtmlElement, HTMLParser, document_fromstring

from fetcher.html.extract import read_document
from fetcher.html.structured import (
    MAX_SCRIPT,
    MAX_SCRIPTS,
    MAX_TEXT,
    MIN_TEXT,
    adds_to,
    product_description,
)

_PARSER = HTMLParser(huge_tree=True)
URL = "https://shop.example/products/arrival-t-shirt"
DESCRIPTION = (
    "REDEFINING YOUR POTENTIAL. The Arrival T-Shirt is your admission to a new, purposeful "
    "approach to training, with sweat-wicking technology and a lightweight material."
)


def _script(value: object) -> str:
    return f'<script type="application/ld+json">{json.dumps(value)}</script>'


def _page(head: str, body: str = "<p>Add to bag</p>") -> str:
    return f"<html><head>{head}</head><body>{body}</body></html>"


def _root(markup: str) -> HtmlElement:
    root: HtmlElement = document_fromstring(markup, parser=_PARSER)
    return root


def _description(head: str) -> str:
    return product_description(_root(_page(head)))


def _product(description: object = DESCRIPTION, kind: object = "Product") -> dict[str, object]:
    return {"@context": "https://schema.org", "@type": kind, "description": description}


def _words(count: int, start: int = 0) -> str:
    return " ".join(f"w{i}" for i in range(start, start + count))


# --- The decision: is the description missing from the reader's text? ---------------------

# A description of 50 words has 48 trigrams; under a fifth of them (9 of 48: 9.6) shared
# means missing. Words w0 ... w49 are each 2-3 characters: 50 words are over 100 characters.
_FIFTY = _words(50)


@pytest.mark.parametrize(
    ("description", "text", "added"),
    [
        pytest.param(_FIFTY, "", True, id="text-empty"),
        pytest.param(_FIFTY, _words(11), True, id="9-of-48-trigrams-shared"),
        pytest.param(_FIFTY, _words(12), False, id="10-of-48-trigrams-shared"),
        pytest.param(_FIFTY, _FIFTY, False, id="all-shared"),
        pytest.param(_FIFTY, _words(50, start=50), True, id="other-words"),
        pytest.param("x" * (MIN_TEXT - 1), "", False, id="under-min-text"),
        pytest.param("x " * (MIN_TEXT // 2), "", True, id="at-min-text"),
        pytest.param("y" * MIN_TEXT, "", False, id="one-word-no-trigram"),
        pytest.param(_FIFTY.upper(), _words(12), False, id="case-blind"),
    ],
)
def test_a_description_is_added_when_the_text_holds_under_a_fifth_of_its_trigrams(
    description: str, text: str, added: bool
) -> None:
    assert adds_to(description, text) is added


# --- Which JSON-LD text is the page's product description ----------------------------------


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        pytest.param(_script(_product()), DESCRIPTION, id="top-level-product"),
        pytest.param(_script([_product()]), DESCRIPTION, id="in-a-list"),
        pytest.param(
            _script({"@graph": [{"@type": "WebPage"}, _product()]}),
            DESCRIPTION,
            id="in-a-graph",
        ),
        pytest.param(_script(_product(kind=["Product", "Thing"])), DESCRIPTION, id="type-list"),
        pytest.param(_script(_product(kind="http://schema.org/Product")), DESCRIPTION, id="iri"),
        pytest.param(_script(_product(kind="ProductGroup")), DESCRIPTION, id="product-group"),
        pytest.param(
            _script(_product(f"<p><b>{DESCRIPTION}</b></p>".replace("'", "&apos;"))),
            DESCRIPTION,
            id="markup-and-entities",
        ),
        pytest.param(_script(_product()) + _script(_product()), DESCRIPTION, id="twice-once"),
        pytest.param(_script(_product(kind="NewsArticle")), "", id="an-article"),
        pytest.param(_script(_product(kind="Organization")), "", id="an-organisation"),
        pytest.param(
            _script({"@type": "ItemList", "itemListElement": [_product()]}), "", id="nested"
        ),
        pytest.param(_script(_product(DESCRIPTION[: MIN_TEXT - 1])), "", id="too-short"),
        pytest.param(_script(_product({"text": DESCRIPTION})), "", id="not-a-string"),
        pytest.param(_script(_product(kind=7)), "", id="type-not-a-string"),
        pytest.param(
            f'<script type="application/json">{json.dumps(_product())}</script>',
            "",
            id="not-json-ld",
        ),
        pytest.param(
            f'<script type=" Application/LD+JSON ">{json.dumps(_product())}</script>',
            DESCRIPTION,
            id="type-spelled-loosely",
        ),
    ],
)
def test_the_description_is_a_top_level_products(head: str, expected: str) -> None:
    assert _description(head) == expected


def test_two_products_give_both_descriptions_in_page_order() -> None:
    other = DESCRIPTION.replace("Arrival", "Departure")
    head = _script(_product()) + _script(_product(other))
    assert _description(head) == f"{DESCRIPTION}\n\n{other}"


# --- The reader puts a missing description first, and only a missing one ------------------


def test_a_product_shown_only_in_json_ld_is_read_first() -> None:
    page = _page(_script(_product()), "<nav><a href='/'>Home</a></nav><p>Add to bag</p>")
    text = read_document(page.encode(), content_type="text/html", charset=None, url=URL).text
    assert text.startswith(DESCRIPTION)
    assert "Add to bag" in text


def test_a_product_the_page_shows_is_not_read_twice() -> None:
    page = _page(_script(_product()), f"<main><h1>Arrival T-Shirt</h1><p>{DESCRIPTION}</p></main>")
    text = read_document(page.encode(), content_type="text/html", charset=None, url=URL).text
    assert text.count("sweat-wicking") == 1


# --- Hostile JSON-LD: skipped or capped, never raising -------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("{", id="unclosed"),
        pytest.param('{"@type": "Product", "description": "' + "x " * 80, id="unclosed-string"),
        pytest.param("[" * 100_000, id="deep-arrays"),
        pytest.param('{"a":' * 100_000, id="deep-objects"),
        pytest.param("NaN", id="a-bare-constant"),
        pytest.param('"' + "\\ud800" * 100 + '"', id="lone-surrogates"),
        pytest.param("", id="empty"),
    ],
)
def test_malformed_or_deep_json_ld_gives_nothing(source: str) -> None:
    head = f'<script type="application/ld+json">{source}</script>' + _script(_product())
    # The malformed script is skipped; the good one after it is still read.
    assert _description(head) == DESCRIPTION
    page = _page(f'<script type="application/ld+json">{source}</script>')
    document = read_document(page.encode(), content_type="text/html", charset=None, url=URL)
    assert "Add to bag" in document.text


def test_a_script_over_the_cap_is_not_parsed() -> None:
    padding = " " * (MAX_SCRIPT - len(json.dumps(_product())) + 1)
    head = f'<script type="application/ld+json">{json.dumps(_product())}{padding}</script>'
    assert _description(head) == ""
    assert _description(_script(_product()) + head) == DESCRIPTION


def test_scripts_past_the_page_cap_are_not_parsed() -> None:
    filler = f'<script type="application/ld+json">[{"0," * ((MAX_SCRIPT - 10) // 2)}0]</script>'
    count = MAX_SCRIPTS // MAX_SCRIPT + 1
    assert _description(filler * count + _script(_product())) == ""
    assert _description(filler * (count - 2) + _script(_product())) == DESCRIPTION


def test_descriptions_are_capped() -> None:
    long = "A long description of a product, with many words in it. " * 200
    scripts = "".join(_script(_product(f"{i} {long}")) for i in range(5))
    got = _description(scripts)
    assert MAX_TEXT - 100 < len(got) <= MAX_TEXT
    page = _page(scripts)
    text = read_document(page.encode(), content_type="text/html", charset=None, url=URL).text
    assert text.startswith("0 A long description")


def test_many_top_level_nodes_are_looked_at_up_to_a_cap() -> None:
    nodes = [{"@type": "Thing"}] * 1_000 + [_product()]
    assert _description(_script(nodes)) == ""
    assert _description(_script([_product(), *nodes])) == DESCRIPTION


def test_lone_surrogates_in_a_description_become_replacement_characters() -> None:
    source = json.dumps(_product(DESCRIPTION)).replace("REDEFINING", "\\ud800REDEFINING")
    head = f'<script type="application/ld+json">{source}</script>'
    got = _description(head)
    assert got == "\ufffd" + DESCRIPTION
    got.encode("utf-8")
