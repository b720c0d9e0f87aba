"""The reader's rendering: the CSS profile fixes, heading markers, code fences, layout spaces."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inscriptis.model.canvas.block import Block
from inscriptis.model.canvas.prefix import Prefix

from fetcher.html import render as render_module
from fetcher.html.extract import read_document
from fetcher.html.render import drop_repeated_passages


def _text(body: str) -> str:
    html = f"<html><head><title>t</title></head><body>{body}</body></html>"
    return read_document(
        html.encode(), content_type="text/html", charset="utf-8", url="https://example.com/"
    ).text


def test_pre_code_keeps_newlines_and_indentation() -> None:
    text = _text(
        '<p>Example:</p><pre><code class="language-python"><span class="k">def</span> f(x):\n'
        "    if x:\n        return <em>x</em>\n    return 0</code></pre><p>after</p>"
    )
    assert "def f(x):\n    if x:\n        return x\n    return 0" in text


def test_code_blocks_are_fenced() -> None:
    text = _text("<p>Run:</p><pre>make test\nmake lint</pre><p>Done.</p>")
    assert text == "Run:\n\n```\nmake test\nmake lint\n```\nDone."


def test_unknown_elements_inside_pre_keep_whitespace() -> None:
    text = _text("<pre><x-token>a\n  b</x-token></pre>")
    assert "a\n  b" in text


def test_white_space_pre_style_keeps_newlines() -> None:
    text = _text('<div style="white-space: pre-wrap">one\ntwo</div>')
    assert "one\ntwo" in text


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        pytest.param("<h1>Top</h1>", "# Top", id="h1"),
        pytest.param("<h2>Hello <em>big</em> world</h2>", "## Hello big world", id="h2-inline"),
        pytest.param("<h3>Three</h3>", "### Three", id="h3"),
        pytest.param("<h6>Six</h6>", "###### Six", id="h6"),
        pytest.param("<h2><br>After break</h2>", "## After break", id="leading-break"),
    ],
)
def test_headings_are_marked_once(html: str, expected: str) -> None:
    text = _text(html + "<p>body</p>")
    assert text.splitlines()[0] == expected
    assert text.count("#") == expected.count("#")


def test_empty_heading_gets_no_marker() -> None:
    assert _text("<h2> </h2><p>body</p>") == "body"


def test_definition_lists_do_not_run_together() -> None:
    text = _text("<dl><dt>term</dt><dd>definition</dd><dt>other</dt><dd>more</dd></dl>")
    assert text.splitlines() == ["term", "definition", "other", "more"]


@pytest.mark.parametrize(
    "tag",
    ["section", "details", "summary", "fieldset", "legend", "center", "address", "figcaption"],
)
def test_block_elements_do_not_run_words_together(tag: str) -> None:
    text = _text(f"<{tag}>first</{tag}><{tag}>second</{tag}>")
    assert "firstsecond" not in text
    assert text.split() == ["first", "second"]


def test_nested_divs_are_not_indented() -> None:
    text = _text("<div><div><div><div><p>deep text</p></div></div></div></div><p>next</p>")
    assert text == "deep text\nnext"


def test_list_items_get_bullets_and_numbers() -> None:
    text = _text("<ul><li>one</li><li>two<ul><li>inner</li></ul></li></ul><ol><li>first</li></ol>")
    assert text.splitlines() == ["* one", "* two", "+ inner", "1. first"]


def test_tables_keep_rows_and_separate_cells() -> None:
    text = _text(
        "<table><tr><th>Name</th><th>Value</th></tr>"
        "<tr><td>alpha</td><td>1</td></tr><tr><td>b</td><td>22</td></tr></table>"
    )
    assert text.splitlines() == ["Name  Value", "alpha  1", "b  22"]


def test_layout_table_padding_is_squeezed() -> None:
    wide = "x" * 60
    text = _text(f"<table><tr><td>{wide}</td><td>a</td></tr><tr><td></td><td>b</td></tr></table>")
    assert text.splitlines() == [f"{wide}  a", "b"]


def test_inline_style_padding_cannot_spend_the_budget() -> None:
    text = _text('<div style="padding-left: 100000em; margin-top: 5000em">x</div>')
    assert text == "x"


def test_display_none_and_visibility_hidden_are_not_rendered() -> None:
    text = _text(
        '<p>shown</p><p style="display:none">gone</p><p style="visibility: hidden">hidden</p>'
    )
    assert text == "shown"


def test_spans_side_by_side_keep_their_spacing() -> None:
    text = _text("<p><span>Hello</span>, <span>world</span>!</p>")
    assert text == "Hello, world!"


def test_paragraphs_are_one_line_each_without_gaps_or_trailing_spaces() -> None:
    text = _text("<p>a   </p><br><br><br><br><p>b</p>")
    assert text == "a\nb"


def test_a_blank_line_stays_before_headings_and_code() -> None:
    text = _text("<p>intro</p><h2>Part</h2><p>text</p><pre>code\n\nmore</pre><p>end</p>")
    assert text == "intro\n\n## Part\ntext\n\n```\ncode\n\nmore\n```\nend"


def test_nbsp_zero_width_and_soft_hyphen_are_normalised() -> None:
    text = _text("<p>a&nbsp;b\u200bc\u00add\ufeffe</p>")
    assert text == "a bcde"


def test_text_is_nfc() -> None:
    text = _text("<p>cafe\u0301</p>")
    assert text == "caf\u00e9"


def test_entities_are_decoded_once() -> None:
    text = _text("<p>Write &amp;lt;b&amp;gt; for bold; a=1&amp;copy=2 &amp; AT&amp;T</p>")
    assert text == "Write &lt;b&gt; for bold; a=1&copy=2 & AT&T"


def test_ampersands_in_code_and_tails_survive() -> None:
    text = _text("<pre>if a &amp;&amp; b: x = '&amp;lt;'</pre><p><b>x</b> &amp;amp; y</p>")
    assert "if a && b: x = '&lt;'" in text
    assert text.endswith("x &amp; y")


# A repeated passage is read once (docs/reader.md): at least 3 lines and 200 characters
# that repeat, line for line, what follows an earlier occurrence of the first line.
_LONG = [f"Line {n} of a description that a responsive page renders twice over." for n in range(4)]
REPEATED_PASSAGES = [
    # (text, expected)
    pytest.param("\n".join([*_LONG, "Between", *_LONG]), "\n".join([*_LONG, "Between"]), id="copy"),
    pytest.param(
        "\n".join(_LONG + _LONG + ["After"]), "\n".join([*_LONG, "After"]), id="copy-at-once"
    ),
    pytest.param(
        "\n".join([*_LONG, "Between", *_LONG[:2]]),
        "\n".join([*_LONG, "Between", *_LONG[:2]]),
        id="two-lines-stay",
    ),
    pytest.param("Reply\nFirst post\nReply\nSecond post\nReply", None, id="short-lines-stay"),
    pytest.param(
        "\n".join(["A", "B", "C", "D", "A", "B", "C", "D"]), None, id="short-passage-stays"
    ),
    pytest.param("\n".join(["```", *_LONG, "```", "```", *_LONG, "```"]), None, id="code-stays"),
    pytest.param(
        "\n".join([*_LONG[:2], "x", *_LONG[2:], "y", *_LONG]),
        "\n".join([*_LONG[:2], "x", *_LONG[2:], "y", *_LONG]),
        id="lines-repeated-from-two-places-stay",
    ),
    pytest.param("", "", id="empty"),
]


@pytest.mark.parametrize(("text", "expected"), REPEATED_PASSAGES)
def test_a_repeated_passage_is_read_once(text: str, expected: str | None) -> None:
    assert drop_repeated_passages(text) == (text if expected is None else expected)


def test_a_page_not_calling_itself_an_article_reads_its_copies_once() -> None:
    # A specification table for desktops and the same again for phones.
    rows = "".join(
        f"<tr><td>Property {n}</td><td>A value long enough to count {n}</td></tr>" for n in range(6)
    )
    copy = f"<div><h2>Specifications</h2><table>{rows}</table></div>"
    assert _text(copy + copy).count("Property 3") == 1
    article = "<head><meta property='og:type' content='article'></head>"
    page = f"<html>{article}<body>{copy}{copy}</body></html>"
    text = read_document(
        page.encode(), content_type="text/html", charset="utf-8", url="https://example.com/"
    ).text
    assert text.count("Property 3") == 2


def test_a_table_cell_decodes_entities_once() -> None:
    # inscriptis decoded a table's text a third time when it placed the table.
    text = _text("<table><tr><td>a &amp;lt;b&amp;gt; c</td><td>AT&amp;T</td></tr></table>")
    assert text == "a &lt;b&gt; c  AT&T"


# The quick path writes to inscriptis' lines itself (fetcher/html/render.py, _QuickCopy): it
# rests on inscriptis' slots and on what Block.merge_normal_text / merge_pre_text do.


def test_the_quick_path_runs_on_the_installed_inscriptis() -> None:
    from importlib.metadata import version

    assert render_module.QUICK, (
        f"inscriptis {version('inscriptis')} changed the slots of its HtmlElement or Block: "
        "fetcher/html/render.py falls back to inscriptis' own (slower) code; check that "
        "_QuickCopy and _merge_normal still do what inscriptis does, then update the slots"
    )


def test_str_split_and_isspace_agree_on_every_character() -> None:
    # _merge_normal collapses white space with str.split where inscriptis tests isspace.
    for point in range(sys.maxunicode + 1):
        char = chr(point)
        assert (f"a{char}b".split() == ["a", "b"]) is char.isspace(), hex(point)


_PIECES = st.lists(
    st.text(alphabet=st.sampled_from("ab \t\n\u00a0\u2003\u3000xé"), max_size=12), max_size=8
)


def _lines(pieces: list[str], *, quick: bool, pre: bool) -> tuple[str, int, bool]:
    block = Block(0, Prefix())
    block.prefix.register_prefix(2, "* ")
    for piece in pieces:
        if quick:
            (render_module._merge_pre if pre else render_module._merge_normal)(block, piece)
        else:
            (block.merge_pre_text if pre else block.merge_normal_text)(piece)
    return block.content, block.idx, block.collapsable_whitespace


@given(_PIECES, st.booleans())
def test_the_quick_merge_writes_what_inscriptis_writes(pieces: list[str], pre: bool) -> None:
    # Without "&", inscriptis' second decoding changes nothing: the rest must be the same.
    assert _lines(pieces, quick=True, pre=pre) == _lines(pieces, quick=False, pre=pre)


_FALLBACK = """
import sys
from inscriptis.model.canvas.block import Block
Block.__slots__ = ("changed",) + Block.__slots__  # as a newer inscriptis might
from fetcher.html import render
from fetcher.html.extract import read_document
assert not render.QUICK
sys.stdout.write(read_document(sys.stdin.buffer.read(), content_type="text/html",
                               charset="utf-8", url="https://example.com/").text)
"""


def test_inscriptis_own_code_reads_the_same_when_the_slots_change() -> None:
    page = (
        "<html><body><h1>Title</h1><ul><li>one &amp;lt;b&amp;gt;</li><li>two</li></ul>"
        "<pre>if a &amp;&amp; b:\n    x = 1</pre><p>AT&amp;T  and\u2003more</p>"
        "<dl><dt>term</dt><dd>definition</dd></dl></body></html>"
    ).encode()
    fallback = subprocess.run(
        [sys.executable, "-c", _FALLBACK], input=page, capture_output=True, check=True
    ).stdout.decode()
    quick = read_document(
        page, content_type="text/html", charset="utf-8", url="https://example.com/"
    ).text
    assert fallback == quick
    assert "one &lt;b&gt;" in quick
    assert "if a && b:" in quick
