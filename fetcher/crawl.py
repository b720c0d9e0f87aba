"""The two-hop, same-site crawl (SPEC 7 steps 8-10).

Breadth first from the start address: the start page (depth 0), then its same-site links
(depth 1), then theirs (depth 2), at most ``page_limit`` pages (6, or what is left of the
answer's page budget). Pages of one depth are downloaded concurrently, a few at a time,
each through the full safe download (every rule, every hop). No address is read twice in
one crawl. One deadline bounds the whole crawl; pages not finished by then are reported
as ``timeout``. Page texts are cut to 12,000 characters each and 24,000 in all.

Each page is turned into text in a render worker (``fetcher.isolation.workers``): a bounded pool of
processes where a page gets a few seconds of CPU and a few hundred megabytes, and is
stopped there (``timeout`` or ``too_large``), so a hostile page costs its own read only.
A PDF (``application/pdf``) is read instead by the PDF reader (``fetcher.pdf.reader``),
in a worker process of its own with the same kinds of limits and the same confinement
(``fetcher.isolation.zygote``); it gives a title and text like a page, no links (a crawl never
follows links out of a PDF), and a PDF without readable text (no text layer, a password,
truncated, damaged) is ``unreadable``. The PDF's body keeps its room in the downloader
until it has been read. One read turns one page into text at a time, so reads take turns
at the workers.

Rule 1 applies to the start address. Pages reached by following links are on the start
page's site by construction (``fetcher.html.links``), so each is allowed as its own host; a
redirect may still leave the site (the cited site chose it), but links are only ever
followed on the start page's site.

Every page goes through the page cache (``fetcher.pagecache``, SPEC 10) once rule 1 and
the operator's lists have admitted it for this read (``Downloader.check_start``): a page
kept from an earlier read (``hit``), another read's download of it under way
(``shared``), or this read's own download and render (``miss``), whose outcome is kept for
the reads after it. What is kept is the page's outcome alone; depth, links followed and
the report's limits stay this crawl's. Off (``cache_bytes = 0``), every page is a miss.

An unexpected exception on one page is a bug: it is logged once with its traceback, the
page is reported as ``internal`` (never as a network failure), the report counts it for
the metrics, and the rest of the crawl goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Collection

from fetcher.html.extract import (
    PAGE_TEXT_LIMIT,
    REPORT_TEXT_LIMIT,
    Document,
    cut,
    document_from_wire,
)
from fetcher.html.links import site_of
from fetcher.isolation.workers import Stopped, WorkerPool
from fetcher.net.download import PDF_TYPE, Downloader
from fetcher.net.urls import Address, parse
from fetcher.outcome import CacheRecord, Downloaded, Failed, TextRecord
from fetcher.pagecache import (
    CacheResult,
    Hit,
    Kept,
    KeptFailure,
    KeptPage,
    Lead,
    PageCache,
    Wait,
    may_keep,
)
from fetcher.pdf.reader import PdfReader
from fetcher.pdf.result import PdfFailure, PdfProblem
from fetcher.reasons import Reason
from fetcher.report import PageFailed, PageRead, Report
from fetcher.worktasks import Page, read_page

logger = logging.getLogger(__name__)

MAX_PAGES = 6
MAX_DEPTH = 2
DEFAULT_DEADLINE = 30.0
DEFAULT_CONCURRENCY = 4
#: Modules the render workers need, imported once by their zygote.
WORKER_PRELOAD = ("fetcher.prewarm",)
#: What a render worker forked ahead of its task runs once confined: a small page of ours.
WORKER_WARM_UP = "fetcher.prewarm:warm"

PageEvent = PageRead | PageFailed
OnPage = Callable[[PageEvent], None]

_STOPPED_REASONS = {
    "cpu": Reason.TIMEOUT,
    "wall": Reason.TIMEOUT,
    "memory": Reason.TOO_LARGE,
    "crashed": Reason.INTERNAL,
    # Killed by its seccomp filter: a subverted worker or a bug of ours, never the web's.
    "confined": Reason.INTERNAL,
}
#: A PDF's problem as a reason word: its limits are the pages' own words; everything the
#: document itself is to blame for is ``unreadable``, the detail says which.
_PDF_REASONS = {
    PdfProblem.NO_TEXT: Reason.UNREADABLE,
    PdfProblem.ENCRYPTED: Reason.UNREADABLE,
    PdfProblem.TRUNCATED: Reason.UNREADABLE,
    PdfProblem.DAMAGED: Reason.UNREADABLE,
    PdfProblem.CRASHED: Reason.UNREADABLE,
    PdfProblem.TOO_LARGE: Reason.TOO_LARGE,
    PdfProblem.TIMEOUT: Reason.TIMEOUT,
    PdfProblem.CONFINED: Reason.INTERNAL,
}
#: Why a body gave no text: the reason, a line for people, and why its worker was stopped
#: (``fetcher.isolation.zygote.Stopped.why``), if it was.
_NoText = tuple[Reason, str, str | None]


@dataclasses.dataclass(slots=True)
class _Found:
    """A page the crawl decided to read, with what came of it."""

    url: str
    depth: int
    result: PageEvent | None = None
    links: tuple[str, ...] = ()
    # True once the page needs nothing more: read, failed, or a redirect that landed on a
    # page this crawl had already read (reported once, under the first address).
    finished: bool = False


class _Crawl:
    def __init__(
        self,
        *,
        crawler: Crawler,
        allowed_hosts: Collection[str],
        page_limit: int,
        request_id: str,
        on_page: OnPage | None,
    ) -> None:
        self.crawler = crawler
        self.allowed_hosts = allowed_hosts
        self.page_limit = page_limit
        self.downloads = asyncio.Semaphore(crawler.concurrency)
        # One render at a time per read: reads take turns at the shared worker pool.
        self.renders = asyncio.Semaphore(1)
        self.request_id = request_id
        self.on_page = on_page
        self.found: list[_Found] = []
        self.seen: set[str] = set()
        self.read_finals: set[str] = set()
        self.site = ""
        self.internal_errors = 0

    def key(self, url: str) -> str:
        address = parse(url, ports=self.crawler.downloader.policy.ports)
        return address.url if isinstance(address, Address) else url

    def host_of(self, url: str) -> tuple[str, ...]:
        address = parse(url, ports=self.crawler.downloader.policy.ports)
        return (address.host,) if isinstance(address, Address) else ()

    def text_full(self) -> bool:
        used = sum(len(p.result.text) for p in self.found if isinstance(p.result, PageRead))
        return used >= REPORT_TEXT_LIMIT

    def finish(self, page: _Found, result: PageEvent | None) -> None:
        page.result = result
        page.finished = True
        if result is not None and self.on_page is not None:
            self.on_page(result)

    async def read(self, page: _Found, *, allowed: Collection[str]) -> None:
        try:
            self.finish(page, await self._read(page, allowed=allowed))
        except Exception:
            # A bug must not cost the pages already read, nor pass for what the web did.
            logger.exception("bug while reading a page of the crawl (request %s)", self.request_id)
            self.internal_errors += 1
            detail = "the fetcher failed on this page; see its log"
            self.finish(page, PageFailed(page.url, Reason.INTERNAL, detail, page.depth))

    async def _read(self, page: _Found, *, allowed: Collection[str]) -> PageEvent | None:
        """One page: rule 1 and the operator's lists for this read, then the page cache
        (``fetcher.pagecache``): a kept outcome, another read's, or this read's own."""
        started = time.monotonic()
        checked = self.crawler.downloader.check_start(
            page.url, allowed_hosts=allowed, request_id=self.request_id
        )
        if isinstance(checked, Failed):
            return PageFailed(checked.url, checked.reason, checked.detail, page.depth)
        cache = self.crawler.cache
        elapsed_ms: int | None
        while True:
            claim = cache.claim(checked.url)
            if isinstance(claim, Hit):
                kept, how, elapsed_ms = claim.kept, CacheResult.HIT, None
                break
            if isinstance(claim, Wait):
                # shield: a read that leaves must not cancel the flight the others share.
                shared = await asyncio.shield(claim.flight)
                if shared is None:
                    continue  # the read that led gave up: lead, or wait for the next one
                kept, how, elapsed_ms = shared, CacheResult.SHARED, None
                break
            kept, elapsed_ms = await self._lead(page, claim, allowed=allowed)
            how = CacheResult.MISS
            break
        if elapsed_ms is None:
            elapsed_ms = round((time.monotonic() - started) * 1000)
        if cache.enabled:
            self.crawler.observe_cache(
                CacheRecord(
                    url=checked.url,
                    cache=how,
                    reason=kept.reason if isinstance(kept, KeptFailure) else None,
                    bytes=kept.bytes if isinstance(kept, KeptPage) else 0,
                    elapsed_ms=elapsed_ms,
                    request_id=self.request_id,
                )
            )
        if isinstance(kept, KeptFailure):
            return PageFailed(kept.url, kept.reason, kept.detail, page.depth)
        final = self.key(kept.final_url)
        self.seen.add(final)
        if final in self.read_finals:
            return None  # a redirect to a page already read: reported once, already
        self.read_finals.add(final)
        page.links = kept.links if page.depth < MAX_DEPTH else ()
        return PageRead(
            requested_url=page.url,
            final_url=kept.final_url,
            title=kept.title,
            text=kept.text,
            status=kept.status,
            bytes=kept.bytes,
            elapsed_ms=elapsed_ms,
            depth=page.depth,
        )

    async def _lead(
        self, page: _Found, lead: Lead, *, allowed: Collection[str]
    ) -> tuple[Kept, int]:
        """Downloads and reads the page for every read waiting on it; the outcome is kept
        unless the page forbids it. Returns it with the download's milliseconds."""
        try:
            kept, keep, elapsed_ms = await self._load(page, allowed=allowed)
        except BaseException:
            self.crawler.cache.abandon(lead)
            raise
        self.crawler.cache.settle(lead, kept, keep=keep)
        return kept, elapsed_ms

    async def _load(self, page: _Found, *, allowed: Collection[str]) -> tuple[Kept, bool, int]:
        """The page's download and text, as the cache keeps them; nothing of this read's
        own (its allowed hosts stay with the download's rule 1 check, its depth and page
        limit with the crawl)."""
        # A PDF's room in the downloader is held until it has been read (``hold``).
        async with contextlib.AsyncExitStack() as hold:
            async with self.downloads:
                outcome = await self.crawler.downloader.download(
                    page.url, allowed_hosts=allowed, request_id=self.request_id, hold=hold
                )
            if not isinstance(outcome, Downloaded):
                failed = KeptFailure(outcome.url, outcome.reason, outcome.detail)
                return failed, True, outcome.elapsed_ms
            reader = "pdf" if outcome.content_type == PDF_TYPE else "html"
            started = time.monotonic()
            async with self.renders:
                if reader == "pdf":
                    document = await self._read_pdf(outcome)
                else:
                    document = await self._render(outcome)
        self.crawler.observe(
            TextRecord(
                url=outcome.final_url,
                reader=reader,
                bytes=len(outcome.body),
                elapsed_ms=round((time.monotonic() - started) * 1000),
                reason=None if isinstance(document, Document) else document[0],
                request_id=self.request_id,
                stopped=None if isinstance(document, Document) else document[2],
            )
        )
        keep = may_keep(outcome.cache_control)
        if not isinstance(document, Document):
            reason, detail, _ = document
            return KeptFailure(outcome.final_url, reason, detail), keep, outcome.elapsed_ms
        kept = KeptPage(
            final_url=outcome.final_url,
            title=document.title,
            text=document.text,
            links=document.links,
            status=outcome.status,
            bytes=len(outcome.body),
        )
        return kept, keep, outcome.elapsed_ms

    async def _render(self, outcome: Downloaded) -> Document | _NoText:
        """A page of a text type, turned into text in the render pool."""
        work = Page(
            outcome.body, outcome.content_type, outcome.charset, outcome.final_url, self.site
        )
        answer = await self.crawler.pool.run(read_page, work)
        if isinstance(answer, Stopped):
            reason = _STOPPED_REASONS[answer.why]
            return reason, f"reading the page stopped: {answer.detail}", answer.why
        # The worker read hostile bytes: its answer is checked, and breaking the contract
        # is a bug of ours or a subverted worker, reported as ``internal`` (see read()).
        return document_from_wire(answer, url=outcome.final_url, site=self.site)

    async def _read_pdf(self, outcome: Downloaded) -> Document | _NoText:
        """A PDF, read by the PDF reader: title and text, never links."""
        result = await self.crawler.pdfs.read(outcome.body)
        if isinstance(result, PdfFailure):
            stopped = "confined" if result.problem is PdfProblem.CONFINED else None
            return _PDF_REASONS[result.problem], f"{result.problem}: {result.detail}", stopped
        return Document(title=result.title, text=cut(result.text, PAGE_TEXT_LIMIT), links=())

    def next_depth(self, parents: list[_Found]) -> list[_Found]:
        batch: list[_Found] = []
        for parent in parents:
            for link in parent.links:
                if len(self.found) + len(batch) >= self.page_limit:
                    return batch
                key = self.key(link)
                if key in self.seen:
                    continue
                self.seen.add(key)
                batch.append(_Found(link, parent.depth + 1))
        return batch

    async def run_depth(self, batch: list[_Found], *, start: bool) -> None:
        self.found += batch
        tasks = [
            asyncio.create_task(
                self.read(page, allowed=self.allowed_hosts if start else self.host_of(page.url))
            )
            for page in batch
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def pages(self) -> tuple[PageRead, ...]:
        """The pages read, in the order found, cut to fit the report's text limit."""
        pages: list[PageRead] = []
        left = REPORT_TEXT_LIMIT
        for page in self.found:
            if isinstance(page.result, PageRead):
                text = cut(page.result.text, min(PAGE_TEXT_LIMIT, left))
                left -= len(text)
                pages.append(dataclasses.replace(page.result, text=text))
        return tuple(pages)


class Crawler:
    """Reads an address and up to two hops of its same-site links: the service's reader.

    One per process: it holds the downloader, the render worker pool and the PDF reader
    every read shares.
    """

    def __init__(
        self,
        *,
        downloader: Downloader,
        pool: WorkerPool,
        pdfs: PdfReader | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        observer: Callable[[TextRecord], None] | None = None,
        cache: PageCache | None = None,
        cache_observer: Callable[[CacheRecord], None] | None = None,
    ) -> None:
        """Builds the crawler.

        Args:
            downloader: Does each page's safe download.
            pool: The render workers pages are turned into text in.
            pdfs: Reads PDFs (default: a :class:`PdfReader` with its defaults).
            concurrency: Downloads at a time within one depth of one read.
            observer: Told of each downloaded page given to a reader (the fetch log and
                the metrics).
            cache: The page cache every read shares (default: off).
            cache_observer: Told how each page of a read was had from the cache (the
                fetch log and the metrics), when the cache is on.
        """
        self.downloader = downloader
        self.pool = pool
        self.pdfs = pdfs if pdfs is not None else PdfReader()
        self.concurrency = max(1, concurrency)
        self.cache = cache if cache is not None else PageCache(max_bytes=0)
        self._observer = observer
        self._cache_observer = cache_observer

    def observe(self, record: TextRecord) -> None:
        """Passes a text record to the observer, if there is one."""
        if self._observer is not None:
            self._observer(record)

    def observe_cache(self, record: CacheRecord) -> None:
        """Passes a cache record to the cache observer, if there is one."""
        if self._cache_observer is not None:
            self._cache_observer(record)

    async def __call__(
        self,
        url: str,
        *,
        allowed_hosts: Collection[str],
        page_limit: int = MAX_PAGES,
        deadline: float = DEFAULT_DEADLINE,
        request_id: str = "",
        on_page: OnPage | None = None,
    ) -> Report:
        """Read ``url`` and up to two hops of its same-site links.

        Args:
            url: The start address.
            allowed_hosts: Rule 1's hosts, applied to the start address.
            page_limit: The most pages to read (capped at 6).
            deadline: Seconds for the whole crawl.
            request_id: Carried into the fetch log.
            on_page: Called as each page is read or fails (for streaming).

        Returns:
            The :class:`Report`; if the start page failed it holds only that failure.
        """
        started = time.monotonic()
        state = _Crawl(
            crawler=self,
            allowed_hosts=allowed_hosts,
            page_limit=max(1, min(page_limit, MAX_PAGES)),
            request_id=request_id,
            on_page=on_page,
        )
        start = _Found(url, 0)
        state.seen.add(state.key(url))
        host = state.host_of(url)
        state.site = site_of(host[0]) if host else ""
        try:
            async with asyncio.timeout(deadline):
                await state.run_depth([start], start=True)
                parents = [start]
                while isinstance(start.result, PageRead) and parents and not state.text_full():
                    batch = state.next_depth(parents)
                    if not batch:
                        break
                    await state.run_depth(batch, start=False)
                    parents = [page for page in batch if isinstance(page.result, PageRead)]
        except TimeoutError:
            for page in state.found:
                if not page.finished:
                    detail = f"the read took longer than {deadline:g} s"
                    state.finish(page, PageFailed(page.url, Reason.TIMEOUT, detail, page.depth))
        elapsed_ms = round((time.monotonic() - started) * 1000)
        if not isinstance(start.result, PageRead):
            failure = start.result
            assert isinstance(failure, PageFailed)
            return Report(
                url=url,
                pages=(),
                failures=(failure,),
                elapsed_ms=elapsed_ms,
                internal_errors=state.internal_errors,
            )
        return Report(
            url=url,
            pages=state.pages(),
            failures=tuple(p.result for p in state.found if isinstance(p.result, PageFailed)),
            elapsed_ms=elapsed_ms,
            internal_errors=state.internal_errors,
        )
