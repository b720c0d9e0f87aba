"""Charset: BOM, then the HTTP header, then the page's own declaration, then UTF-8."""

from __future__ import annotations

import codecs

import pytest

from fetcher.html.charset import decode_body, find_encoding, lookup_encoding
from fetcher.html.extract import read_document

CAFE_LATIN1 = "café".encode("latin-1")
CAFE_UTF8 = "café".encode()


def _meta_page(meta: str, body: bytes) -> bytes:
    return b"<html><head>" + meta.encode() + b"</head><body><p>" + body + b"</p></body></html>"


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        pytest.param("utf-8", "utf-8", id="utf-8"),
        pytest.param(" UTF8 ", "utf-8", id="spaces-and-case"),
        pytest.param('"utf-8"', "utf-8", id="quoted"),
        pytest.param("iso-8859-1", "cp1252", id="latin1-is-windows-1252"),
        pytest.param("us-ascii", "cp1252", id="ascii-is-windows-1252"),
        pytest.param("Shift_JIS", "cp932", id="shift-jis-superset"),
        pytest.param("gb2312", "gb18030", id="gb2312-superset"),
        pytest.param("koi8-r", "koi8-r", id="koi8-r"),
        pytest.param("bogus-charset", None, id="unknown"),
        pytest.param("", None, id="empty"),
        pytest.param("x" * 100, None, id="too-long"),
        pytest.param("utf-8\x00", None, id="nul"),
        pytest.param("base64", None, id="not-a-text-encoding"),
        pytest.param("rot13", None, id="rot13"),
        pytest.param("punycode", None, id="punycode-refused"),
        pytest.param("unicode_escape", None, id="escape-codec-refused"),
        pytest.param("utf-7", None, id="utf-7-refused"),
        pytest.param("undefined", None, id="undefined-codec-refused"),
        pytest.param("ütf-8", None, id="non-ascii"),
    ],
)
def test_lookup_encoding(label: str, codec: str | None) -> None:
    assert lookup_encoding(label) == codec


def test_header_charset_wins_over_meta() -> None:
    page = _meta_page('<meta charset="utf-8">', CAFE_LATIN1)
    assert "café" in decode_body(page, "iso-8859-1", sniff_html=True)


def test_meta_charset_is_used_without_header() -> None:
    page = _meta_page('<meta charset="iso-8859-1">', CAFE_LATIN1)
    assert "café" in decode_body(page, None, sniff_html=True)


def test_meta_http_equiv_is_used_without_header() -> None:
    meta = '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'
    page = _meta_page(meta, "мир".encode("cp1251"))
    assert "мир" in decode_body(page, None, sniff_html=True)


def test_meta_in_a_comment_is_ignored() -> None:
    page = _meta_page('<!-- <meta charset="koi8-r"> -->', CAFE_UTF8)
    assert find_encoding(page, None, sniff_html=True) == ("utf-8", 0)


def test_meta_after_the_first_1024_bytes_is_ignored() -> None:
    page = b"<html><head>" + b" " * 1100 + b'<meta charset="koi8-r"></head></html>'
    assert find_encoding(page, None, sniff_html=True) == ("utf-8", 0)


def test_meta_declaring_utf16_means_utf8() -> None:
    page = _meta_page('<meta charset="utf-16">', CAFE_UTF8)
    assert find_encoding(page, None, sniff_html=True) == ("utf-8", 0)


def test_bogus_header_charset_falls_back_to_meta() -> None:
    page = _meta_page('<meta charset="iso-8859-1">', CAFE_LATIN1)
    assert "café" in decode_body(page, "no-such-charset", sniff_html=True)


def test_bogus_meta_charset_falls_back_to_utf8() -> None:
    page = _meta_page('<meta charset="no-such-charset">', CAFE_UTF8)
    assert "café" in decode_body(page, None, sniff_html=True)


@pytest.mark.parametrize(
    ("bom", "codec", "text"),
    [
        pytest.param(codecs.BOM_UTF8, "utf-8", "café", id="utf-8"),
        pytest.param(codecs.BOM_UTF16_LE, "utf-16-le", "café", id="utf-16-le"),
        pytest.param(codecs.BOM_UTF16_BE, "utf-16-be", "café", id="utf-16-be"),
    ],
)
def test_bom_wins_over_header_and_is_removed(bom: bytes, codec: str, text: str) -> None:
    body = bom + text.encode(codec)
    assert decode_body(body, "iso-8859-1", sniff_html=True) == text


def test_no_declaration_means_utf8_with_replacement() -> None:
    assert decode_body(b"caf\xe9 ok", None, sniff_html=True) == "caf\ufffd ok"


def test_plain_text_is_not_sniffed_for_meta() -> None:
    body = b'<meta charset="koi8-r"> ' + CAFE_UTF8
    assert decode_body(body, None, sniff_html=False).endswith("café")


def test_read_document_decodes_with_the_header_charset() -> None:
    doc = read_document(
        _meta_page("", "Ελληνικά".encode("iso-8859-7")),
        content_type="text/html",
        charset="iso-8859-7",
        url="https://example.gr/",
    )
    assert doc.text == "Ελληνικά"


def test_read_document_survives_a_bogus_header_charset() -> None:
    doc = read_document(
        _meta_page("", CAFE_UTF8),
        content_type="text/html",
        charset="x-bogus;;",
        url="https://example.com/",
    )
    assert doc.text == "café"
