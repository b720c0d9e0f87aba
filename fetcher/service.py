"""The gRPC servicer of ``tigress.fetcher.v1.FetcherService``, and report-to-protobuf conversion.

This is one of the two modules where protobuf types exist (the other is
``fetcher.client``): requests are checked and turned into a call of the injected
:class:`Reader` (the crawl, in production), and the :class:`~fetcher.report.Report` it
returns is converted to protobuf here.

What a call can end with (refusals of addresses are never errors, they are report values):

- ``OK``: the report (``Read``), or each page then the report (``ReadStream``).
- ``INVALID_ARGUMENT``: the request breaks a bound written in ``fetcher.proto``.
- ``RESOURCE_EXHAUSTED``: already ``max_concurrent_reads`` reads in flight; refused at
  once, never queued, so the gateway can say so instead of waiting.
- ``UNAVAILABLE``: the fetcher is shutting down (health is NOT_SERVING).
- ``DEADLINE_EXCEEDED``: the caller's deadline leaves no time, or the read overran it.
- ``CANCELLED``: the caller cancelled; the read (and its downloads) is cancelled with it.
- ``INTERNAL``: a bug; logged with its traceback, the caller gets a fixed message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Iterator
from typing import Any, Protocol, TypeVar

import grpc

from fetcher.client import REQUEST_ID_METADATA
from fetcher.metrics import Metrics
from fetcher.reasons import Reason
from fetcher.report import PageFailed, PageRead, Report
from fetcher.v1 import fetcher_pb2, fetcher_pb2_grpc

logger = logging.getLogger(__name__)

#: SPEC section 7 step 9: a read never goes past 6 pages, whatever the budget left.
MAX_PAGES = 6
MAX_URL_BYTES = 4096
MAX_ALLOWED_HOSTS = 1000
MAX_HOST_CHARS = 253
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")

OnPage = Callable[[PageRead | PageFailed], None]


class Reader(Protocol):
    """Reads an address and the same-site pages it links to (``fetcher.crawl.crawl``)."""

    async def __call__(
        self,
        url: str,
        *,
        allowed_hosts: Collection[str],
        page_limit: int,
        deadline: float,
        request_id: str,
        on_page: OnPage | None = None,
    ) -> Report:
        """Returns the report; refusals and failures are values inside it.

        ``deadline`` is in seconds; ``request_id`` goes into every fetch log record.
        """
        ...


def reason_to_pb(reason: Reason) -> Any:
    """The wire enum value of a vocabulary word (``Reason.NOT_PUBLIC`` → ``REASON_NOT_PUBLIC``)."""
    return fetcher_pb2.Reason.Value("REASON_" + Reason(reason).name)


def page_to_pb(page: PageRead) -> fetcher_pb2.PageRead:
    """Converts a page that was read."""
    return fetcher_pb2.PageRead(
        requested_url=page.requested_url,
        final_url=page.final_url,
        title=page.title,
        text=page.text,
        status=max(0, page.status),
        body_bytes=max(0, page.bytes),
        elapsed_ms=max(0, page.elapsed_ms),
        depth=max(0, page.depth),
    )


def failure_to_pb(page: PageFailed) -> fetcher_pb2.PageFailed:
    """Converts a page that failed or was refused."""
    return fetcher_pb2.PageFailed(
        url=page.url,
        reason=reason_to_pb(page.reason),
        detail=page.detail,
        depth=max(0, page.depth),
    )


def report_to_pb(report: Report) -> fetcher_pb2.Report:
    """Converts a whole report."""
    return fetcher_pb2.Report(
        url=report.url,
        pages=[page_to_pb(page) for page in report.pages],
        failures=[failure_to_pb(page) for page in report.failures],
        elapsed_ms=max(0, report.elapsed_ms),
    )


def event_to_pb(item: PageRead | PageFailed | Report) -> fetcher_pb2.ReadStreamResponse:
    """Wraps one streamed item in its ``ReadStreamResponse``."""
    if isinstance(item, PageRead):
        return fetcher_pb2.ReadStreamResponse(page=page_to_pb(item))
    if isinstance(item, PageFailed):
        return fetcher_pb2.ReadStreamResponse(failure=failure_to_pb(item))
    return fetcher_pb2.ReadStreamResponse(report=report_to_pb(item))


class CallError(Exception):
    """Raised inside a handler to end the call with a gRPC status and a message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Order:
    """A checked request.

    # Security
    Every field is bounded (``fetcher.proto`` states the bounds) before anything is read,
    so a caller cannot make the fetcher hold huge host lists, chase a six-page-plus crawl
    or write arbitrary text into the fetch log's request id. Rule 1 itself (the host must
    be allowed) is the downloader's; this only keeps the request small and well formed.
    Proved by ``tests/fetcher/test_service.py``
    (``test_request_breaking_a_bound_is_rejected_without_reading``).
    """

    __slots__ = ("allowed_hosts", "page_limit", "request_id", "url")

    def __init__(self, request: fetcher_pb2.ReadRequest, metadata_id: str = "") -> None:
        """Checks the request; ``metadata_id`` is the ``tigress-request-id`` metadata
        (``fetcher.client.REQUEST_ID_METADATA``), used when the field is empty."""
        if len(request.url.encode()) > MAX_URL_BYTES:
            raise CallError(
                grpc.StatusCode.INVALID_ARGUMENT, f"url is longer than {MAX_URL_BYTES} bytes"
            )
        if len(request.allowed_hosts) > MAX_ALLOWED_HOSTS:
            raise CallError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"more than {MAX_ALLOWED_HOSTS} allowed_hosts",
            )
        if any(len(host) > MAX_HOST_CHARS for host in request.allowed_hosts):
            raise CallError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"an allowed host is longer than {MAX_HOST_CHARS} characters",
            )
        if request.page_limit < 1:
            raise CallError(grpc.StatusCode.INVALID_ARGUMENT, "page_limit must be at least 1")
        request_id = request.request_id or metadata_id
        if request_id and not _REQUEST_ID.fullmatch(request_id):
            raise CallError(
                grpc.StatusCode.INVALID_ARGUMENT,
                "request_id must be 1 to 64 characters from A-Z a-z 0-9 . _ : -",
            )
        self.url: str = request.url
        self.allowed_hosts = frozenset(request.allowed_hosts)
        self.page_limit = min(int(request.page_limit), MAX_PAGES)
        self.request_id: str = request_id or uuid.uuid4().hex[:16]


def _metadata_request_id(context: Context) -> str:
    """The call's ``tigress-request-id`` metadata ("" when absent)."""
    for key, value in context.invocation_metadata() or ():
        if key == REQUEST_ID_METADATA and isinstance(value, str):
            return value
    return ""


_DONE = object()
_Message = TypeVar("_Message", fetcher_pb2.ReadResponse, fetcher_pb2.ReadStreamResponse)
Context = grpc.aio.ServicerContext[Any, Any]


class FetcherServicer(fetcher_pb2_grpc.FetcherServiceServicer):
    """Handles ``Read`` and ``ReadStream`` with a bound on reads in flight."""

    def __init__(
        self,
        *,
        reader: Reader,
        metrics: Metrics,
        max_concurrent_reads: int = 16,
        read_deadline: float = 30.0,
        deadline_margin: float = 0.25,
        max_message_bytes: int = 1024 * 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Builds the servicer.

        Args:
            reader: What reads an address (the crawl with the production downloader).
            metrics: Where calls, reads in flight and pages per read are counted.
            max_concurrent_reads: Reads handled at once; more are refused at once.
            read_deadline: The longest a read may take (seconds).
            deadline_margin: Kept back from the caller's deadline (seconds), so the report
                is sent while the caller still waits.
            max_message_bytes: The gRPC message size limit; a bigger report is a bug and
                ends the call with INTERNAL and a clear message.
            clock: Monotonic seconds.
        """
        self._reader = reader
        self._metrics = metrics
        self._max_reads = max_concurrent_reads
        self._read_deadline = read_deadline
        self._margin = deadline_margin
        self._max_message_bytes = max_message_bytes
        self._clock = clock
        self._in_flight = 0
        self._draining = False
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def in_flight(self) -> int:
        """Reads being handled now."""
        return self._in_flight

    def drain(self) -> None:
        """Stops taking new reads (they get UNAVAILABLE); reads in flight go on."""
        self._draining = True

    async def wait_idle(self, within: float) -> bool:
        """Waits until no read is in flight; returns False if ``within`` seconds ran out first."""
        try:
            async with asyncio.timeout(within):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        """Takes one of the read slots, or refuses the call at once.

        # Security
        Bounded concurrency: at most ``max_concurrent_reads`` reads run at once and one
        more is refused with RESOURCE_EXHAUSTED without queueing, so a flood of calls
        cannot pile up downloads, memory or sockets (the unit's limits are the backstop).
        During shutdown every new read gets UNAVAILABLE. Proved by
        ``tests/fetcher/test_service.py::test_reads_past_the_bound_get_resource_exhausted_at_once``.
        """
        if self._draining:
            raise CallError(grpc.StatusCode.UNAVAILABLE, "the fetcher is shutting down")
        if self._in_flight >= self._max_reads:
            raise CallError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"the fetcher is busy: {self._in_flight} reads in flight",
            )
        self._in_flight += 1
        self._idle.clear()
        self._metrics.reads_in_flight.inc()
        try:
            yield
        finally:
            self._in_flight -= 1
            self._metrics.reads_in_flight.dec()
            if self._in_flight == 0:
                self._idle.set()

    @contextlib.asynccontextmanager
    async def _call(self, method: str, context: Context) -> AsyncIterator[None]:
        """Ends every way a call can end with the right status, and counts it."""
        started = self._clock()
        code = "UNKNOWN"
        try:
            yield
            code = "OK"
        except CallError as error:
            code = error.code.name
            await context.abort(error.code, error.message)
        except asyncio.CancelledError:
            remaining: float | None = context.time_remaining()
            expired = remaining is not None and remaining <= 0
            code = "DEADLINE_EXCEEDED" if expired else "CANCELLED"
            raise
        except Exception:
            code = "INTERNAL"
            logger.exception("%s failed", method)
            await context.abort(grpc.StatusCode.INTERNAL, "the fetcher failed; see its log")
        except BaseException:
            code = "CANCELLED"
            raise
        finally:
            self._metrics.observe_call(method, code, self._clock() - started)

    def _fit(self, message: _Message) -> _Message:
        """Checks a reply against the size limit, so a breach is named, not a transport error."""
        size = message.ByteSize()
        if size > self._max_message_bytes:
            raise CallError(
                grpc.StatusCode.INTERNAL,
                f"the report is {size} bytes, more than the limit of {self._max_message_bytes}",
            )
        return message

    def _budget(self, context: Context) -> float:
        """Seconds the read may take: the service's cap, within the caller's deadline."""
        # None when the caller set no deadline (the type stubs say float).
        remaining: float | None = context.time_remaining()
        if remaining is None:
            return self._read_deadline
        budget = min(self._read_deadline, remaining - self._margin)
        if budget <= 0:
            raise CallError(
                grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline leaves no time to read"
            )
        return float(budget)

    async def _read(self, order: _Order, context: Context, on_page: OnPage | None) -> Report:
        budget = self._budget(context)
        try:
            # The crawl keeps its own deadline; this only stops one that overruns it.
            async with asyncio.timeout(budget + self._margin):
                report = await self._reader(
                    order.url,
                    allowed_hosts=order.allowed_hosts,
                    page_limit=order.page_limit,
                    deadline=budget,
                    request_id=order.request_id,
                    on_page=on_page,
                )
        except TimeoutError as exc:
            raise CallError(
                grpc.StatusCode.DEADLINE_EXCEEDED, "the read overran its deadline"
            ) from exc
        self._metrics.observe_report(report)
        return report

    async def Read(
        self, request: fetcher_pb2.ReadRequest, context: Context
    ) -> fetcher_pb2.ReadResponse:
        """Reads an address and answers with the whole report."""
        async with self._call("Read", context):
            order = _Order(request, _metadata_request_id(context))
            with self._slot():
                report = await self._read(order, context, None)
            return self._fit(fetcher_pb2.ReadResponse(report=report_to_pb(report)))
        raise AssertionError("unreachable: _call re-raises or aborts")  # pragma: no cover

    async def ReadStream(
        self, request: fetcher_pb2.ReadRequest, context: Context
    ) -> AsyncIterator[fetcher_pb2.ReadStreamResponse]:
        """Sends each page as soon as it is finished, then the whole report."""
        async with self._call("ReadStream", context):
            order = _Order(request, _metadata_request_id(context))
            with self._slot():
                queue: asyncio.Queue[Any] = asyncio.Queue()
                task = asyncio.create_task(self._read(order, context, queue.put_nowait))
                task.add_done_callback(lambda _: queue.put_nowait(_DONE))
                try:
                    while (item := await queue.get()) is not _DONE:
                        yield self._fit(event_to_pb(item))
                    report = task.result()
                finally:
                    # Reached early only when the call is cancelled: stop the downloads.
                    task.cancel()
                    await asyncio.wait([task])
                yield self._fit(event_to_pb(report))
