"""PDFs in the crawl: read like pages in their own worker, no links followed out of them,
and what happens to a PDF without readable text. Against the real local HTTPS site."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fetcher.crawl import Crawler
from fetcher.html.extract import PAGE_TEXT_LIMIT
from fetcher.isolation.workers import WorkerPool
from fetcher.net.download import Downloader, Limits
from fetcher.outcome import TextRecord
from fetcher.pdf.reader import PdfReader
from fetcher.pdf.result import MIB, PdfLimits
from fetcher.reasons import Reason
from testkit.origin import Origin, Reply, html
from tests.fetcher.pdf.maker import Text, bomb_pdf, make_pdf
from tests.support.fixtures import DownloaderFactory

ALLOWED = ("origin.test",)
PDF = (("Content-Type", "application/pdf"),)


def pdf(data: bytes) -> Reply:
    return Reply(headers=PDF, body=data)


def paper(title: str, *lines: bytes) -> bytes:
    return make_pdf([[Text(72, 700 - 14 * n, line) for n, line in enumerate(lines)]], title=title)


def start_page(*links: str) -> Reply:
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    return html(
        "<html><head><title>Start</title></head><body><main><h1>Start</h1>"
        f"<p>Papers of this site.</p><ul>{anchors}</ul></main></body></html>"
    )


@pytest.fixture
def texts() -> list[TextRecord]:
    """What the crawl tells its observer about each page given to a reader."""
    return []


@pytest.fixture
def crawl(downloader: Downloader, render_pool: WorkerPool, texts: list[TextRecord]) -> Crawler:
    return Crawler(downloader=downloader, pool=render_pool, observer=texts.append)


async def test_a_pdf_is_read_like_a_page_and_links_in_it_are_not_followed(
    origin: Origin, crawl: Crawler, texts: list[TextRecord]
) -> None:
    origin.routes["/paper.pdf"] = pdf(
        paper("A Paper", b"Findings of the paper.", origin.url("/next").encode())
    )
    origin.routes["/next"] = start_page()
    report = await crawl(origin.url("/paper.pdf"), allowed_hosts=ALLOWED)
    (read,) = report.pages
    assert (read.title, read.final_url, read.status, read.depth) == (
        "A Paper",
        origin.url("/paper.pdf"),
        200,
        0,
    )
    assert "Findings of the paper." in read.text
    assert read.bytes == len(origin.routes["/paper.pdf"].body)  # type: ignore[union-attr,arg-type]
    assert report.failures == ()
    assert [request.target for request in origin.requests] == ["/paper.pdf"]
    assert [(t.reader, t.reason) for t in texts] == [("pdf", None)]


async def test_a_pdf_a_page_links_to_is_read_at_the_next_hop(
    origin: Origin, crawl: Crawler, texts: list[TextRecord]
) -> None:
    origin.routes["/"] = start_page("/paper.pdf")
    origin.routes["/paper.pdf"] = pdf(paper("Linked Paper", b"Read one hop away."))
    report = await crawl(origin.url("/"), allowed_hosts=ALLOWED)
    assert [(page.title, page.depth) for page in report.pages] == [
        ("Start", 0),
        ("Linked Paper", 1),
    ]
    assert sorted(t.reader for t in texts) == ["html", "pdf"]


async def test_a_pdf_without_a_text_layer_is_unreadable_and_says_why(
    origin: Origin, crawl: Crawler, texts: list[TextRecord]
) -> None:
    origin.routes["/scan.pdf"] = pdf(make_pdf([[]]))
    report = await crawl(origin.url("/scan.pdf"), allowed_hosts=ALLOWED, request_id="r-1")
    assert report.first_page_failed
    (failure,) = report.failures
    assert (failure.url, failure.reason, failure.depth) == (
        origin.url("/scan.pdf"),
        Reason.UNREADABLE,
        0,
    )
    assert failure.detail.startswith("no_text: ")
    (record,) = texts
    assert (record.url, record.reader, record.reason, record.request_id) == (
        origin.url("/scan.pdf"),
        "pdf",
        Reason.UNREADABLE,
        "r-1",
    )
    assert record.bytes == len(origin.routes["/scan.pdf"].body)  # type: ignore[union-attr,arg-type]


@pytest.mark.parametrize(
    ("data", "limits", "reason"),
    [
        pytest.param(b"%PDF-1.7\n1 0 obj\n<<", PdfLimits(), Reason.UNREADABLE, id="truncated"),
        pytest.param(
            make_pdf([[Text(72, 600, b"Secret")]], password_protected=True),
            PdfLimits(),
            Reason.UNREADABLE,
            id="password",
        ),
        pytest.param(
            bomb_pdf(192 * MIB), PdfLimits(memory_bytes=128 * MIB), Reason.TOO_LARGE, id="bomb"
        ),
        pytest.param(paper("Slow", b"x"), PdfLimits(wall_seconds=0.001), Reason.TIMEOUT, id="wall"),
    ],
)
async def test_a_pdf_its_reader_cannot_read_fails_with_the_pages_words(
    origin: Origin,
    downloader: Downloader,
    render_pool: WorkerPool,
    data: bytes,
    limits: PdfLimits,
    reason: Reason,
) -> None:
    origin.routes["/"] = start_page("/bad.pdf", "/fine")
    origin.routes["/bad.pdf"] = pdf(data)
    origin.routes["/fine"] = start_page()
    crawl = Crawler(downloader=downloader, pool=render_pool, pdfs=PdfReader(limits=limits))
    report = await crawl(origin.url("/"), allowed_hosts=ALLOWED)
    assert [page.requested_url for page in report.pages] == [origin.url("/"), origin.url("/fine")]
    assert [(f.url, f.reason) for f in report.failures] == [(origin.url("/bad.pdf"), reason)]


async def test_a_long_pdf_is_cut_to_the_page_budget(origin: Origin, crawl: Crawler) -> None:
    line = b"Every line of this long report says the same thing again and again."
    origin.routes["/long.pdf"] = pdf(
        make_pdf([[Text(72, 760 - 14 * n, line) for n in range(50)] for _ in range(20)])
    )
    report = await crawl(origin.url("/long.pdf"), allowed_hosts=ALLOWED)
    (read,) = report.pages
    assert PAGE_TEXT_LIMIT - 200 < len(read.text) <= PAGE_TEXT_LIMIT


@pytest.fixture
async def one_pdf_room(make_downloader: DownloaderFactory) -> AsyncIterator[Downloader]:
    async with make_downloader(limits=Limits(page_timeout=30.0, pdfs_held=1)) as downloader:
        yield downloader


async def test_each_pdf_gives_its_room_back_once_read(
    origin: Origin, one_pdf_room: Downloader, render_pool: WorkerPool
) -> None:
    # One room for PDF bodies and three PDFs downloaded at once: each waits for the one
    # before it to be read. A crawl that kept a room would time the others out.
    names = ("/a.pdf", "/b.pdf", "/c.pdf")
    origin.routes["/"] = start_page(*names)
    for name in names:
        origin.routes[name] = pdf(paper(f"Paper {name[1]}", b"Body of " + name.encode()))
    crawl = Crawler(downloader=one_pdf_room, pool=render_pool)
    report = await crawl(origin.url("/"), allowed_hosts=ALLOWED)
    assert report.failures == ()
    assert sorted(page.title for page in report.pages) == ["Paper a", "Paper b", "Paper c", "Start"]
