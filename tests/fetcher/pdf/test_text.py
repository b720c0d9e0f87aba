"""The PDF reader on hand-written PDFs: layout, repairs, and the failures it reports.

Each PDF is made by ``tests/fetcher/pdf/maker.py`` with exactly the content stream a test
needs, and read by PDFium in this process (the fetcher itself reads PDFs only in the
worker process: ``test_pdfworker.py``).
"""

from __future__ import annotations

import pytest

from fetcher.pdf.result import PdfFailure, PdfProblem, PdfText
from fetcher.pdf.text import clean_title, read_pdf
from tests.fetcher.pdf.maker import Text, end, make_pdf

BODY = [
    b"The committee met on Tuesday to discuss the budget for the coming",
    b"year and agreed on most of the items that were on the agenda for",
    b"the meeting, although a few questions remain open for later.",
]


def text_of(pdf: bytes) -> PdfText:
    result = read_pdf(pdf)
    assert isinstance(result, PdfText), result
    return result


def paragraph(y: float, lines: list[bytes], x: float = 72, size: float = 10) -> list[Text]:
    return [Text(x, y - 12 * i, line, size) for i, line in enumerate(lines)]


TOP = 700  # the first body line's baseline: a 92-point top margin


def test_title_comes_from_the_metadata() -> None:
    pdf = make_pdf([[Text(72, 700, b"Big Heading", 20), *paragraph(660, BODY)]], title="Meta")
    assert text_of(pdf).title == "Meta"


@pytest.mark.parametrize(
    "junk", ["untitled", "Document1", "Slide 1", "report.docx", "Microsoft Word - x.doc", ""]
)
def test_title_falls_back_to_the_first_heading(junk: str) -> None:
    pdf = make_pdf([[Text(72, 700, b"Big Heading", 20), *paragraph(660, BODY)]], title=junk)
    result = text_of(pdf)
    assert result.title == "Big Heading"
    assert result.text.startswith("# Big Heading\n")


def test_clean_title_strips_the_office_prefix() -> None:
    assert clean_title("Microsoft Word - Annual Review") == "Annual Review"


def test_lines_of_a_paragraph_join_into_one() -> None:
    pdf = make_pdf([[*paragraph(700, BODY), *paragraph(640, [b"A second paragraph."], x=84)]])
    assert text_of(pdf).text.split("\n") == [
        b" ".join(BODY).decode(),
        "A second paragraph.",
    ]


def report_pages(count: int) -> list[list[Text]]:
    pages = []
    for n in range(1, count + 1):
        pages.append(
            [
                Text(72, 760, b"Quarterly Report of the Committee", 8),
                *paragraph(700, [b"Body of page %d says something worth reading." % n, *BODY]),
                Text(280, 40, b"Page %d of %d" % (n, count), 8),
            ]
        )
    return pages


def test_running_header_and_page_numbers_are_removed() -> None:
    result = text_of(make_pdf(report_pages(3), title="Quarterly Report of the Committee"))
    body = " ".join(line.decode() for line in BODY)
    assert result.text.split("\n") == [
        line
        for n in (1, 2, 3)
        for line in (f"Body of page {n} says something worth reading.", body)
    ]


def test_a_bare_page_number_is_removed_on_a_single_page() -> None:
    pdf = make_pdf([[*paragraph(700, BODY), Text(300, 40, b"7")]])
    assert "7" not in text_of(pdf).text


@pytest.mark.parametrize(
    ("footer", "removed"),
    [
        pytest.param(b"- 12 -", True, id="dashed"),
        pytest.param(b"Page 3 of 9", True, id="page-of"),
        pytest.param(b"Seite 2 von 5", True, id="german"),
        pytest.param(b"xiv", True, id="roman"),
        pytest.param(b"Draft report, page 4", True, id="ends-with-page"),
        pytest.param(b"civil", False, id="roman-letters-not-a-numeral"),
        pytest.param(b"Thank you for reading", False, id="words"),
    ],
)
def test_a_footer_line_goes_only_when_it_is_a_page_number(footer: bytes, removed: bool) -> None:
    pdf = make_pdf([[*paragraph(700, BODY), Text(280, 40, footer, 8)]])
    assert (footer.decode() not in text_of(pdf).text) is removed


def test_a_number_in_the_text_area_is_kept() -> None:
    pdf = make_pdf([[*paragraph(700, BODY), Text(72, 400, b"7")]])
    assert text_of(pdf).text.endswith("\n7")


def test_a_browser_print_header_and_footer_are_removed() -> None:
    page = [
        Text(36, 775, b"8/8/24, 2:11 PM", 8),
        Text(250, 775, b"Some Page Title", 8),
        *paragraph(700, BODY),
        Text(36, 20, b"https://example.com/some/page.html", 8),
        Text(540, 20, b"1/1", 8),
    ]
    assert text_of(make_pdf([page])).text == " ".join(line.decode() for line in BODY)


def test_a_heading_that_starts_every_page_is_kept() -> None:
    pages = [
        [Text(72, 740, b"Entry %d" % n, 14), *paragraph(700, [b"Sentence %d." % n])]
        for n in (1, 2, 3)
    ]
    text = text_of(make_pdf(pages)).text
    assert [line for line in text.split("\n") if line.startswith("#")] == [
        "# Entry 1",
        "# Entry 2",
        "# Entry 3",
    ]


def test_a_rotated_margin_stamp_is_removed() -> None:
    page = [Text(30, 300, b"arXiv:2401.00001v1 [cs.CL] 1 Jan 2024", 16, angle=90)]
    page += paragraph(700, BODY)
    assert "arXiv" not in text_of(make_pdf([page])).text


def test_a_diagonal_watermark_is_removed() -> None:
    page = [*paragraph(700, BODY), Text(150, 300, b"CONFIDENTIAL DRAFT", 60, angle=45)]
    assert text_of(make_pdf([page])).text == " ".join(line.decode() for line in BODY)


def test_a_turned_line_inside_the_text_is_kept() -> None:
    page = [*paragraph(700, BODY), Text(200, 500, b"Turned table heading", 10, angle=90)]
    assert "Turned table heading" in text_of(make_pdf([page])).text


def test_a_footnote_moves_to_the_end_without_its_marker() -> None:
    lead = b"The first page refers to a note"
    first = [
        Text(72, 700, lead),
        Text(end(72, lead), 704, b"1", 6),
        Text(72, 688, b"and goes on until its end, without a full stop and"),
        Text(72, 90, b"1", 5),
        Text(75, 86, b"Originally published elsewhere.", 8),
    ]
    second = [Text(72, 700, b"continues on the next page.")]
    text = text_of(make_pdf([first, second])).text
    assert text.split("\n") == [
        "The first page refers to a note and goes on until its end, without a full stop "
        "and continues on the next page.",
        "Originally published elsewhere.",
    ]


def test_a_small_numbered_table_at_the_page_foot_is_not_a_footnote() -> None:
    page = [
        *paragraph(700, BODY),
        Text(72, 120, b"No. Item", 8),
        Text(72, 110, b"1 Apples and pears", 8),
        Text(72, 100, b"2 Oranges", 8),
    ]
    text = text_of(make_pdf([page])).text
    assert text.index("No. Item") < text.index("1 Apples") < text.index("2 Oranges")


def test_superscript_markers_go_and_subscripts_stay() -> None:
    runs = [(b"Water is H", 0, 10), (b"2", -3, 6), (b"O as everyone knows", 0, 10)]
    runs += [(b"12", 4, 6), (b", said the teacher.", 0, 10)]
    page = []
    x = 72.0
    for text, rise, size in runs:
        page.append(Text(x, 600 + rise, text, size))
        x = end(x, text, size)
    assert text_of(make_pdf([page])).text == "Water is H2O as everyone knows, said the teacher."


def test_loose_accents_join_the_letter_under_them() -> None:
    # "zac" and "ına" (dotless i), then an acute over the ı and a caron over the c drawn
    # last, after the word: where PDFium puts the accents TeX fonts draw apart.
    page = [
        Text(72, 600, b"zac\xf5na"),
        Text(90, 600, b"\xc2"),  # over the fourth glyph (x 90-96)
        Text(84, 600, b"\xcf"),  # over the third (x 84-90)
    ]
    assert text_of(make_pdf([page])).text == "začína"


def test_line_end_hyphens_join_words_and_keep_compounds() -> None:
    page = paragraph(
        700,
        [
            b"The committee met to discuss the extrac-",
            b"tion of facts, so-",
            b"many people came, and BPA-",
            b"free bottles were handed out to the pro-",
            b"Morales crowd.",
        ],
    )
    assert text_of(make_pdf([page])).text == (
        "The committee met to discuss the extraction of facts, so-many people came, and "
        "BPA-free bottles were handed out to the pro-Morales crowd."
    )


def column_block(x: float, top: float, word: bytes, first: int) -> list[Text]:
    return [
        Text(x, top - 12 * i, b"%s column line %d of text" % (word, first + i)) for i in range(4)
    ]


def test_columns_zigzagging_in_the_stream_are_read_column_by_column() -> None:
    page = []
    for block in range(3):
        top = 600 - 60 * block
        page += column_block(72, top, b"left", 4 * block) + column_block(
            330, top, b"right", 4 * block
        )
    text = text_of(make_pdf([page])).text
    assert text.index("left column line 11") < text.index("right column line 0")


def test_columns_in_stream_order_are_kept() -> None:
    page = []
    for word, x in ((b"left", 72), (b"right", 330)):
        for block in range(3):
            page += column_block(x, 600 - 60 * block, word, 4 * block)
    text = text_of(make_pdf([page])).text
    assert text.index("left column line 11") < text.index("right column line 0")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        pytest.param(b"", PdfProblem.DAMAGED, id="empty"),
        pytest.param(b"<html>not a pdf</html>", PdfProblem.DAMAGED, id="html"),
        pytest.param(make_pdf([paragraph(700, BODY)])[:300], PdfProblem.TRUNCATED, id="cut"),
        pytest.param(
            make_pdf([paragraph(700, BODY)], password_protected=True),
            PdfProblem.ENCRYPTED,
            id="password",
        ),
        pytest.param(make_pdf([[], []]), PdfProblem.NO_TEXT, id="no-text-layer"),
    ],
)
def test_unreadable_pdfs_say_why(data: bytes, problem: PdfProblem) -> None:
    result = read_pdf(data)
    assert isinstance(result, PdfFailure)
    assert result.problem is problem


def test_character_limit_stops_after_the_page_that_reaches_it() -> None:
    pages = [paragraph(700, BODY) for _ in range(5)]
    result = read_pdf(make_pdf(pages), char_limit=250)
    assert isinstance(result, PdfText)
    assert (result.pages, result.pages_read) == (5, 2)
