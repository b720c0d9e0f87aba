"""The page cache in the crawl, against the real HTTPS origin (SPEC 10)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator

import pytest

from fetcher.crawl import Crawler
from fetcher.isolation.workers import WorkerPool
from fetcher.journal import FetchLog, JsonLinesSink, cache_record, journal_fields
from fetcher.net.domains import DomainLists
from fetcher.net.download import Downloader
from fetcher.outcome import CacheRecord, HopRecord, TextRecord
from fetcher.pagecache import PageCache
from fetcher.reasons import Reason
from fetcher.report import PageRead, Report
from testkit.origin import Origin, Reply, Request, html
from tests.support.fixtures import DownloaderFactory

ALLOWED = ("origin.test",)
MIB = 1024 * 1024


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Gate:
    """A route that answers only once released: a download held open for as long as a
    test needs, with no timing."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.open = asyncio.Event()
        self.arrived = asyncio.Event()

    async def __call__(self, request: Request) -> Reply:
        self.arrived.set()
        await self.open.wait()
        return self.reply


def page(title: str, *links: str, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return html(
        f"<html><title>{title}</title><main><h1>{title}</h1><p>Text of {title}.</p>"
        f"{anchors}</main></html>",
        headers=headers,
    )


Records = list[HopRecord | TextRecord | CacheRecord]


@pytest.fixture
def records() -> Records:
    return []


@pytest.fixture
async def downloader(
    make_downloader: DownloaderFactory, records: Records
) -> AsyncIterator[Downloader]:
    async with make_downloader(observer=records.append) as instance:
        yield instance


def crawler_with(
    downloader: Downloader, pool: WorkerPool, records: Records, cache: PageCache
) -> Crawler:
    return Crawler(
        downloader=downloader,
        pool=pool,
        observer=records.append,
        cache=cache,
        cache_observer=records.append,
    )


def marks(records: Records) -> list[str]:
    return [r.cache for r in records if isinstance(r, CacheRecord)]


def first_page(report: Report) -> PageRead:
    assert report.pages, report.failures
    return report.pages[0]


async def test_fifty_reads_of_one_address_at_once_make_one_request(
    origin: Origin, downloader: Downloader, render_pool: WorkerPool, records: Records
) -> None:
    gate = Gate(page("Shared"))
    origin.routes["/"] = gate
    crawler = crawler_with(downloader, render_pool, records, PageCache(max_bytes=64 * MIB))
    reads = [
        asyncio.create_task(crawler(origin.url("/"), allowed_hosts=ALLOWED, page_limit=1))
        for _ in range(50)
    ]
    await gate.arrived.wait()
    for _ in range(20):
        await asyncio.sleep(0)  # every read has claimed the address by now
    gate.open.set()
    reports = await asyncio.gather(*reads)
    assert len(origin.requests) == 1
    assert {first_page(r).title for r in reports} == {"Shared"}
    assert {first_page(r).text for r in reports} == {first_page(reports[0]).text}
    assert sorted(marks(records)) == ["miss"] + ["shared"] * 49
    assert sum(isinstance(r, TextRecord) for r in records) == 1  # one render
    # Later reads are hits: still one request.
    again = await crawler(origin.url("/#frag"), allowed_hosts=("ORIGIN.test",), page_limit=1)
    assert first_page(again).title == "Shared"
    assert len(origin.requests) == 1
    assert marks(records)[-1] == "hit"


async def test_a_read_whose_hosts_do_not_allow_the_address_is_refused_during_the_download(
    origin: Origin, downloader: Downloader, render_pool: WorkerPool, records: Records
) -> None:
    gate = Gate(page("Held"))
    origin.routes["/"] = gate
    crawler = crawler_with(downloader, render_pool, records, PageCache(max_bytes=64 * MIB))
    allowed = asyncio.create_task(crawler(origin.url("/"), allowed_hosts=ALLOWED))
    await gate.arrived.wait()
    refused = await crawler(origin.url("/"), allowed_hosts=("other.test",))
    assert not allowed.done()  # the other read's download is still running
    assert refused.pages == ()
    assert [f.reason for f in refused.failures] == [Reason.NOT_IN_ANSWER]
    gate.open.set()
    assert first_page(await allowed).title == "Held"
    # And after it is kept: still refused for a read that does not allow it.
    refused_again = await crawler(origin.url("/"), allowed_hosts=("other.test",))
    assert [f.reason for f in refused_again.failures] == [Reason.NOT_IN_ANSWER]
    assert len(origin.requests) == 1


async def test_the_operators_lists_are_checked_before_a_kept_page(
    origin: Origin,
    make_downloader: DownloaderFactory,
    render_pool: WorkerPool,
    records: Records,
) -> None:
    origin.routes["/"] = page("Kept")
    cache = PageCache(max_bytes=64 * MIB)
    async with make_downloader() as open_downloader:
        crawler = crawler_with(open_downloader, render_pool, records, cache)
        assert first_page(await crawler(origin.url("/"), allowed_hosts=ALLOWED)).title == "Kept"
    denied = DomainLists(deny=("origin.test",))
    async with make_downloader(lists=denied) as strict:
        crawler = crawler_with(strict, render_pool, records, cache)
        report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    assert [f.reason for f in report.failures] == [Reason.DENIED]


async def test_nothing_about_the_request_is_kept(
    origin: Origin, downloader: Downloader, render_pool: WorkerPool, records: Records
) -> None:
    origin.routes["/"] = page("Start", "/a", "/b")
    origin.routes["/a"] = page("A", "/a1")
    origin.routes["/b"] = page("B")
    origin.routes["/a1"] = page("A1")
    crawler = crawler_with(downloader, render_pool, records, PageCache(max_bytes=64 * MIB))
    one = await crawler(origin.url("/"), allowed_hosts=ALLOWED, page_limit=1)
    assert [p.title for p in one.pages] == ["Start"]
    # A read with a larger page limit gets the kept start page and follows its links.
    full = await crawler(origin.url("/"), allowed_hosts=ALLOWED, page_limit=6)
    assert [p.title for p in full.pages] == ["Start", "A", "B", "A1"]
    # A read starting at /a keeps its own depths: /a1 is one hop from it now.
    from_a = await crawler(origin.url("/a"), allowed_hosts=ALLOWED)
    assert [(p.title, p.depth) for p in from_a.pages] == [("A", 0), ("A1", 1)]
    assert [r.target for r in origin.requests] == ["/", "/a", "/b", "/a1"]


@pytest.mark.parametrize("header", ["no-store", "private", "max-age=0, Private"])
async def test_a_page_sent_with_no_store_or_private_is_never_kept(
    origin: Origin,
    downloader: Downloader,
    render_pool: WorkerPool,
    records: Records,
    header: str,
) -> None:
    origin.routes["/"] = page("Private", headers=(("Cache-Control", header),))
    crawler = crawler_with(downloader, render_pool, records, PageCache(max_bytes=64 * MIB))
    for _ in range(2):
        assert first_page(await crawler(origin.url("/"), allowed_hosts=ALLOWED)).title == "Private"
    assert len(origin.requests) == 2
    assert marks(records) == ["miss", "miss"]


async def test_failures_are_kept_at_most_30_seconds(
    origin: Origin, downloader: Downloader, render_pool: WorkerPool, records: Records
) -> None:
    origin.routes["/"] = html("down", status=503)
    clock = Clock()
    cache = PageCache(max_bytes=64 * MIB, seconds=600, clock=clock)
    crawler = crawler_with(downloader, render_pool, records, cache)
    for _ in range(2):
        report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
        assert [f.reason for f in report.failures] == [Reason.HTTP_STATUS]
    assert len(origin.requests) == 1
    clock.now += 30
    origin.routes["/"] = page("Back")
    assert first_page(await crawler(origin.url("/"), allowed_hosts=ALLOWED)).title == "Back"
    assert len(origin.requests) == 2
    assert marks(records) == ["miss", "hit", "miss"]


async def test_a_read_that_leaves_hands_the_download_over(
    origin: Origin, downloader: Downloader, render_pool: WorkerPool, records: Records
) -> None:
    gate = Gate(page("Handed over"))
    origin.routes["/"] = gate
    crawler = crawler_with(downloader, render_pool, records, PageCache(max_bytes=64 * MIB))
    leader = asyncio.create_task(crawler(origin.url("/"), allowed_hosts=ALLOWED))
    await gate.arrived.wait()
    follower = asyncio.create_task(crawler(origin.url("/"), allowed_hosts=ALLOWED))
    for _ in range(5):
        await asyncio.sleep(0)
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    gate.open.set()
    assert first_page(await follower).title == "Handed over"
    assert len(origin.requests) == 2  # the follower led a download of its own
    assert marks(records) == ["miss"]


async def test_off_downloads_every_read_and_logs_no_marks(
    origin: Origin, downloader: Downloader, render_pool: WorkerPool, records: Records
) -> None:
    origin.routes["/"] = page("Plain")
    crawler = crawler_with(downloader, render_pool, records, PageCache(max_bytes=0))
    for _ in range(2):
        await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    assert len(origin.requests) == 2
    assert marks(records) == []


async def test_the_fetch_log_marks_each_page(
    origin: Origin,
    make_downloader: DownloaderFactory,
    render_pool: WorkerPool,
) -> None:
    origin.routes["/"] = page("Logged", "/a?token=secret")
    origin.routes["/a"] = page("A")
    stream = io.StringIO()
    log = FetchLog(JsonLinesSink(stream))

    def observe(record: HopRecord | TextRecord | CacheRecord) -> None:
        if isinstance(record, CacheRecord):
            log.cache(record)
        elif isinstance(record, HopRecord):
            log.hop(record)

    async with make_downloader(observer=observe) as downloader:
        crawler = Crawler(
            downloader=downloader,
            pool=render_pool,
            cache=PageCache(max_bytes=64 * MIB),
            cache_observer=observe,
        )
        await crawler(origin.url("/"), allowed_hosts=ALLOWED, request_id="r1")
        await crawler(origin.url("/"), allowed_hosts=ALLOWED, request_id="r2")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    cache_lines = [line for line in lines if line.get("stage") == "cache"]
    assert [(c["cache"], c["request_id"], c["outcome"]) for c in cache_lines] == [
        ("miss", "r1", "ok"),
        ("miss", "r1", "ok"),
        ("hit", "r2", "ok"),
        ("hit", "r2", "ok"),
    ]
    assert cache_lines[1]["url"] == origin.url("/a")  # the query is never logged
    assert "secret" not in stream.getvalue()
    assert "Logged" not in stream.getvalue()
    assert sum(1 for line in lines if line.get("stage") is None) == 2  # hops of r1 only


def test_a_cache_record_reads_as_one_journal_entry() -> None:
    record = cache_record(
        CacheRecord("https://origin.test/a?token=x", "shared", Reason.HTTP_STATUS, 0, 12, "r9"),
        now=0.0,
    )
    fields = journal_fields(record, identifier="fetcher")
    # Not "cache failed": the cache did its work; the page was not read, and its hop
    # records say so at their own level.
    assert fields["MESSAGE"] == (
        "cache shared https://origin.test/a 0B 12ms not read: reason=http_status"
    )
    assert fields["PRIORITY"] == "6"
    assert (fields["FETCH_STAGE"], fields["FETCH_CACHE"], fields["FETCH_REQUEST_ID"]) == (
        "cache",
        "shared",
        "r9",
    )
    assert "token" not in str(fields)
