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
in a worker process of its own with the same kinds of limits; it gives a title and text
like a page, no links (a crawl never follows links out of a PDF), and a PDF without
readable text (no text layer, a password, truncated, damaged) is ``unreadable``. The
PDF's body keeps its room in the downloader until it has been read. One read turns one
page into text at a time, so reads take turns at the workers.

Rule 1 applies to the start address. Pages reached by following links are on the start
page's site by construction (``fetcher.html.links``), so each is allowed as its own host; a
redirect may still leave the site (the cited site chose it), but links are only ever
followed on the start page's site.

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
    read_document,
)
from fetcher.html.links import site_of
from fetcher.isolation.workers import Stopped, Wire, WorkerPool
from fetcher.net.download import PDF_TYPE, Downloader
from fetcher.net.urls import Address, parse
from fetcher.outcome import Downloaded, TextRecord
from fetcher.pdf.reader import PdfReader
from fetcher.pdf.result import PdfFailure, PdfProblem
from fetcher.reasons import Reason
from fetcher.report import PageFailed, PageRead, Report

logger = logging.getLogger(__name__)

MAX_PAGES = 6
MAX_DEPTH = 2
DEFAULT_DEADLINE = 30.0
DEFAULT_CONCURRENCY = 4
#: Modules the render workers need, imported once by their forkserver.
WORKER_PRELOAD = ("fetcher.prewarm",)

PageEvent = PageRead | PageFailed
OnPage = Callable[[PageEvent], None]

_STOPPED_REASONS = {
    "cpu": Reason.TIMEOUT,
    "wall": Reason.TIMEOUT,
    "memory": Reason.TOO_LARGE,
    "crashed": Reason.INTERNAL,
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
}
#: Why a body gave no text: the reason and a line for people.
_NoText = tuple[Reason, str]


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    """A downloaded page on its way to a render worker."""

    body: bytes
    content_type: str
    charset: str | None
    url: str
    site: str


def read_page(page: Page) -> Wire:
    """Runs in a render worker: the page as text (:func:`fetcher.html.extract.read_document`),
    as JSON; the crawl checks it with :func:`fetcher.html.extract.document_from_wire`."""
    return read_document(
        page.body,
        content_type=page.content_type,
        charset=page.charset,
        url=page.url,
        site=page.site,
    ).to_wire()


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
        # A PDF's room in the downloader is held until it has been read (``hold``).
        async with contextlib.AsyncExitStack() as hold:
            async with self.downloads:
                outcome = await self.crawler.downloader.download(
                    page.url, allowed_hosts=allowed, request_id=self.request_id, hold=hold
                )
            if not isinstance(outcome, Downloaded):
                return PageFailed(outcome.url, outcome.reason, outcome.detail, page.depth)
            final = self.key(outcome.final_url)
            self.seen.add(final)
            if final in self.read_finals:
                return None  # a redirect to a page already read: reported once, already
            self.read_finals.add(final)
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
            )
        )
        if not isinstance(document, Document):
            reason, detail = document
            return PageFailed(outcome.final_url, reason, detail, page.depth)
        page.links = document.links if page.depth < MAX_DEPTH else ()
        return PageRead(
            requested_url=page.url,
            final_url=outcome.final_url,
            title=document.title,
            text=document.text,
            status=outcome.status,
            bytes=len(outcome.body),
            elapsed_ms=outcome.elapsed_ms,
            depth=page.depth,
        )

    async def _render(self, outcome: Downloaded) -> Document | _NoText:
        """A page of a text type, turned into text in the render pool."""
        work = Page(
            outcome.body, outcome.content_type, outcome.charset, outcome.final_url, self.site
        )
        answer = await self.crawler.pool.run(read_page, work)
        if isinstance(answer, Stopped):
            reason = _STOPPED_REASONS[answer.why]
            return reason, f"reading the page stopped: {answer.detail}"
        # The worker read hostile bytes: its answer is checked, and breaking the contract
        # is a bug of ours or a subverted worker, reported as ``internal`` (see read()).
        return document_from_wire(answer, url=outcome.final_url, site=self.site)

    async def _read_pdf(self, outcome: Downloaded) -> Document | _NoText:
        """A PDF, read by the PDF reader: title and text, never links."""
        result = await self.crawler.pdfs.read(outcome.body)
        if isinstance(result, PdfFailure):
            return _PDF_REASONS[result.problem], f"{result.problem}: {result.detail}"
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
    ) -> None:
        """Builds the crawler.

        Args:
            downloader: Does each page's safe download.
            pool: The render workers pages are turned into text in.
            pdfs: Reads PDFs (default: a :class:`PdfReader` with its defaults).
            concurrency: Downloads at a time within one depth of one read.
            observer: Told of each downloaded page given to a reader (the fetch log and
                the metrics).
        """
        self.downloader = downloader
        self.pool = pool
        self.pdfs = pdfs if pdfs is not None else PdfReader()
        self.concurrency = max(1, concurrency)
        self._observer = observer

    def observe(self, record: TextRecord) -> None:
        """Passes a text record to the observer, if there is one."""
        if self._observer is not None:
            self._observer(record)

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
