"""PDF downloads (rule 5 grown by one type): their own size limit, never cut, and a bound
on how many PDF bodies the process holds at once. Against the real HTTPS origin."""

from __future__ import annotations

import contextlib
import gzip
from collections.abc import AsyncIterator, Callable

import pytest

from fetcher.net.download import PDF_MAX_BYTES, PDF_MAX_BYTES_CEILING, Limits
from fetcher.outcome import Downloaded, Failed, HopRecord, Outcome
from fetcher.reasons import Reason
from testkit.origin import Origin, Reply, html
from tests.support.fixtures import DownloaderFactory

ALLOWED = ("origin.test",)
MIB = 1024 * 1024
PDF = (("Content-Type", "application/pdf"),)
# Roomy: these tests move megabytes through TLS on a shared machine; time is not tested.
SLOW_OK = 60.0


def ok(outcome: Outcome) -> Downloaded:
    assert isinstance(outcome, Downloaded), outcome
    return outcome


def failed(outcome: Outcome, reason: Reason) -> Failed:
    assert isinstance(outcome, Failed), outcome
    assert outcome.reason is reason, outcome
    return outcome


def streamed(size: int) -> Callable[[], AsyncIterator[bytes]]:
    """A body of ``size`` bytes sent without Content-Length (the limit is met while reading)."""

    async def chunks() -> AsyncIterator[bytes]:
        yield b"%PDF-1.4\n"
        left = size - 9
        block = b"0" * (256 * 1024)
        while left > 0:
            yield block[:left]
            left -= len(block)

    return chunks


def declared(size: int) -> bytes:
    """A body of ``size`` bytes; the origin declares its Content-Length."""
    return b"%PDF-1.4\n" + b"0" * (size - 9)


@pytest.mark.parametrize(
    ("size", "announced", "allowed"),
    [
        pytest.param(PDF_MAX_BYTES, False, True, id="16MiB-streamed"),
        pytest.param(PDF_MAX_BYTES + 1, False, False, id="16MiB+1-streamed"),
        pytest.param(PDF_MAX_BYTES, True, True, id="16MiB-declared"),
        pytest.param(PDF_MAX_BYTES + 1, True, False, id="16MiB+1-declared"),
    ],
)
async def test_a_pdf_is_read_up_to_16_mib_and_refused_past_it_never_cut(
    origin: Origin,
    make_downloader: DownloaderFactory,
    size: int,
    announced: bool,
    allowed: bool,
) -> None:
    origin.routes["/paper.pdf"] = Reply(
        headers=PDF, body=declared(size) if announced else streamed(size)
    )
    hops: list[HopRecord] = []
    async with make_downloader(limits=Limits(page_timeout=SLOW_OK), observer=hops.append) as d:
        outcome = await d.download(origin.url("/paper.pdf"), allowed_hosts=ALLOWED)
    if allowed:
        page = ok(outcome)
        assert page.content_type == "application/pdf"
        assert len(page.body) == size
    else:
        failure = failed(outcome, Reason.TOO_LARGE)
        assert str(PDF_MAX_BYTES) in failure.detail
        if announced:
            # Refused on its Content-Length, before a byte of the body was kept.
            assert hops[-1].bytes == 0


async def test_html_keeps_its_2_mib_while_a_pdf_of_the_same_size_is_read(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    size = 2 * MIB + 1
    origin.routes["/page"] = Reply(headers=(("Content-Type", "text/html"),), body=b"x" * size)
    origin.routes["/paper.pdf"] = Reply(headers=PDF, body=declared(size))
    async with make_downloader(limits=Limits(page_timeout=SLOW_OK)) as downloader:
        page = await downloader.download(origin.url("/page"), allowed_hosts=ALLOWED)
        paper = await downloader.download(origin.url("/paper.pdf"), allowed_hosts=ALLOWED)
    failed(page, Reason.TOO_LARGE)
    assert len(ok(paper).body) == size


async def test_a_gzip_bomb_sent_as_a_pdf_stops_at_the_pdf_limit(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    bomb = gzip.compress(b"%PDF-1.4\n" + b"\0" * (8 * MIB), compresslevel=9)
    origin.routes["/bomb.pdf"] = Reply(headers=(*PDF, ("Content-Encoding", "gzip")), body=bomb)
    async with make_downloader(limits=Limits(pdf_max_bytes=4 * MIB)) as downloader:
        outcome = await downloader.download(origin.url("/bomb.pdf"), allowed_hosts=ALLOWED)
    failed(outcome, Reason.TOO_LARGE)


@pytest.mark.parametrize(
    ("limit", "allowed"),
    [
        pytest.param(PDF_MAX_BYTES_CEILING, True, id="64MiB"),
        pytest.param(PDF_MAX_BYTES_CEILING + 1, False, id="64MiB+1"),
    ],
)
def test_no_limits_raise_the_pdf_limit_past_its_64_mib_ceiling(limit: int, allowed: bool) -> None:
    if allowed:
        assert Limits(pdf_max_bytes=limit).pdf_max_bytes == PDF_MAX_BYTES_CEILING
    else:
        with pytest.raises(ValueError, match="ceiling"):
            Limits(pdf_max_bytes=limit)


@pytest.mark.parametrize(
    ("size", "allowed"),
    [
        pytest.param(PDF_MAX_BYTES_CEILING, True, id="64MiB"),
        pytest.param(PDF_MAX_BYTES_CEILING + 1, False, id="64MiB+1"),
    ],
)
async def test_at_the_ceiling_a_64_mib_pdf_is_read_and_one_byte_more_refused(
    origin: Origin, make_downloader: DownloaderFactory, size: int, allowed: bool
) -> None:
    origin.routes["/big.pdf"] = Reply(headers=PDF, body=declared(size))
    limits = Limits(page_timeout=SLOW_OK, pdf_max_bytes=PDF_MAX_BYTES_CEILING)
    async with make_downloader(limits=limits) as downloader:
        outcome = await downloader.download(origin.url("/big.pdf"), allowed_hosts=ALLOWED)
    if allowed:
        assert len(ok(outcome).body) == size
    else:
        failed(outcome, Reason.TOO_LARGE)


async def test_a_pdf_past_the_room_waits_until_a_holder_is_done(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    origin.routes["/a.pdf"] = Reply(headers=PDF, body=declared(1000))
    origin.routes["/b.pdf"] = Reply(headers=PDF, body=declared(1000))
    origin.routes["/page"] = html("<p>not a PDF</p>")
    async with (
        make_downloader(limits=Limits(page_timeout=0.5, pdfs_held=1)) as downloader,
        contextlib.AsyncExitStack() as first,
    ):
        ok(await downloader.download(origin.url("/a.pdf"), allowed_hosts=ALLOWED, hold=first))
        # The room is held by ``first``: another PDF waits for it, here past its page time,
        # while a page of a text type needs no room.
        failed(
            await downloader.download(origin.url("/b.pdf"), allowed_hosts=ALLOWED), Reason.TIMEOUT
        )
        ok(await downloader.download(origin.url("/page"), allowed_hosts=ALLOWED))
        await first.aclose()  # done with the first PDF: its room is free
        ok(await downloader.download(origin.url("/b.pdf"), allowed_hosts=ALLOWED))
        # Without a ``hold`` the room came back when the download returned.
        ok(await downloader.download(origin.url("/a.pdf"), allowed_hosts=ALLOWED))
