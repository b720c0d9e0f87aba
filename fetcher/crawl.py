"""The two-hop, same-site crawl (SPEC 7 steps 8-10).

Breadth first from the start address: the start page (depth 0), then its same-site links
(depth 1), then theirs (depth 2), at most ``page_limit`` pages (6, or what is left of the
answer's page budget). Pages of one depth are downloaded concurrently, a few at a time,
each through the full safe download (every rule, every hop). No address is read twice in
one crawl. One deadline bounds the whole crawl; pages not done by then are reported as
``timeout``. Page texts are cut to 12,000 characters each and 24,000 in all.

Rule 1 applies to the start address. Pages reached by following links are on the start
page's site by construction (``fetcher.links``), so each is allowed as its own host; a
redirect may still leave the site (the cited site chose it), but links are only ever
followed on the start page's site.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Collection

from fetcher.download import Downloader
from fetcher.extract import PAGE_TEXT_LIMIT, REPORT_TEXT_LIMIT, cut, read_document
from fetcher.links import site_of
from fetcher.outcome import Downloaded
from fetcher.reasons import Reason
from fetcher.report import PageFailed, PageRead, Report
from fetcher.urls import Address, parse

logger = logging.getLogger(__name__)

MAX_PAGES = 6
MAX_DEPTH = 2
DEFAULT_DEADLINE = 30.0
DEFAULT_CONCURRENCY = 4

PageEvent = PageRead | PageFailed


@dataclasses.dataclass(slots=True)
class _Found:
    """A page the crawl decided to read, with what came of it."""

    url: str
    depth: int
    result: PageEvent | None = None
    links: tuple[str, ...] = ()
    duplicate: bool = False  # a redirect landed on a page this crawl had already read


class _Crawl:
    def __init__(
        self,
        *,
        downloader: Downloader,
        allowed_hosts: Collection[str],
        page_limit: int,
        concurrency: int,
        request_id: str,
        on_page: Callable[[PageEvent], None] | None,
    ) -> None:
        self.downloader = downloader
        self.allowed_hosts = allowed_hosts
        self.page_limit = page_limit
        self.semaphore = asyncio.Semaphore(concurrency)
        self.request_id = request_id
        self.on_page = on_page
        self.found: list[_Found] = []
        self.seen: set[str] = set()
        self.read_finals: set[str] = set()
        self.site = ""

    def key(self, url: str) -> str:
        address = parse(url, ports=self.downloader.policy.ports)
        return address.url if isinstance(address, Address) else url

    def host_of(self, url: str) -> tuple[str, ...]:
        address = parse(url, ports=self.downloader.policy.ports)
        return (address.host,) if isinstance(address, Address) else ()

    def text_full(self) -> bool:
        used = sum(len(p.result.text) for p in self.found if isinstance(p.result, PageRead))
        return used >= REPORT_TEXT_LIMIT

    async def read(self, page: _Found, *, allowed: Collection[str]) -> None:
        async with self.semaphore:
            try:
                outcome = await self.downloader.download(
                    page.url, allowed_hosts=allowed, request_id=self.request_id
                )
            except Exception:
                # A bug must not cost the pages already read: log it, report this page.
                logger.exception("reading a page of the crawl failed unexpectedly")
                page.result = PageFailed(
                    page.url, Reason.CONNECT, "the page could not be read", page.depth
                )
                if self.on_page is not None:
                    self.on_page(page.result)
                return
        if not isinstance(outcome, Downloaded):
            page.result = PageFailed(outcome.url, outcome.reason, outcome.detail, page.depth)
        else:
            final = self.key(outcome.final_url)
            self.seen.add(final)
            if final in self.read_finals:
                page.duplicate = True
                return
            self.read_finals.add(final)
            # A hostile 2 MB page can cost a second of CPU: keep the event loop (other
            # reads, gRPC, health checks) responsive while it is turned into text.
            document = await asyncio.to_thread(
                read_document,
                outcome.body,
                content_type=outcome.content_type,
                charset=outcome.charset,
                url=outcome.final_url,
                site=self.site,
            )
            page.links = document.links if page.depth < MAX_DEPTH else ()
            page.result = PageRead(
                requested_url=page.url,
                final_url=outcome.final_url,
                title=document.title,
                text=document.text,
                status=outcome.status,
                bytes=len(outcome.body),
                elapsed_ms=outcome.elapsed_ms,
                depth=page.depth,
            )
        if self.on_page is not None:
            self.on_page(page.result)

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


async def crawl(
    url: str,
    *,
    allowed_hosts: Collection[str],
    downloader: Downloader,
    page_limit: int = MAX_PAGES,
    deadline: float = DEFAULT_DEADLINE,
    concurrency: int = DEFAULT_CONCURRENCY,
    request_id: str = "",
    on_page: Callable[[PageEvent], None] | None = None,
) -> Report:
    """Read ``url`` and up to two hops of its same-site links.

    Args:
        url: The start address.
        allowed_hosts: Rule 1's hosts, applied to the start address.
        downloader: Does each page's safe download.
        page_limit: The most pages to read (capped at 6).
        deadline: Seconds for the whole crawl.
        concurrency: Downloads at a time within one depth.
        request_id: Carried into the fetch log.
        on_page: Called as each page is read or fails (for streaming).

    Returns:
        The :class:`Report`; if the start page failed it holds only that failure.
    """
    started = time.monotonic()
    state = _Crawl(
        downloader=downloader,
        allowed_hosts=allowed_hosts,
        page_limit=max(1, min(page_limit, MAX_PAGES)),
        concurrency=max(1, concurrency),
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
            if page.result is None:
                page.result = PageFailed(
                    page.url,
                    Reason.TIMEOUT,
                    f"the read took longer than {deadline:g} s",
                    page.depth,
                )
                if on_page is not None:
                    on_page(page.result)
    elapsed_ms = round((time.monotonic() - started) * 1000)
    if not isinstance(start.result, PageRead):
        failure = start.result
        assert isinstance(failure, PageFailed)
        return Report(url=url, pages=(), failures=(failure,), elapsed_ms=elapsed_ms)
    return Report(
        url=url,
        pages=state.pages(),
        failures=tuple(p.result for p in state.found if isinstance(p.result, PageFailed)),
        elapsed_ms=elapsed_ms,
    )
