"""A subverted worker (issue 23): code running inside a real render worker and a real PDF
worker, as a parser bug would give a hostile page, tries what the red team did.

Each attempt is the task of a real worker of the running fetcher's own pools (forked by
their zygotes, limited and filtered before the task; ``testkit/subverted.py``). Every one
must fail: the worker is killed by its filter (``Stopped("confined")``), nothing it started
is left (no process of the zygote's session but the zygote and its spares), and the
fetcher is unharmed: its gRPC socket is the same file, its zygote alive, and a read
through the service still works. Through the crawl, a page whose worker broke its
confinement is ``internal``, and the fetch log and a metric say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ParamSpec

import pytest
from prometheus_client import CollectorRegistry

from fetcher.client import FetcherClient
from fetcher.crawl import WORKER_PRELOAD, Crawler
from fetcher.isolation.workers import WorkerPool
from fetcher.isolation.zygote import Stopped, Wire
from fetcher.journal import FetchLog, JsonLinesSink
from fetcher.metrics import Metrics
from fetcher.net.download import Downloader
from fetcher.pdf.reader import PdfReader
from fetcher.pdf.worker import PDF_PRELOAD
from fetcher.reasons import Reason
from fetcher.server import FetcherServer, fetch_observer
from testkit import subverted
from testkit.fetcher import running_fetcher, unix_settings
from testkit.origin import Origin, Reply, html
from tests.fetcher.pdf.maker import Text, make_pdf

P = ParamSpec("P")
ALLOWED = ["origin.test"]


@pytest.fixture
async def fetcher(
    sock_dir: Path, crawler: Crawler, render_pool: WorkerPool
) -> AsyncIterator[FetcherServer]:
    """The real service on a Unix socket, with the crawl's real pools."""
    async with running_fetcher(unix_settings(sock_dir), crawler, pool=render_pool) as server:
        yield server


@pytest.fixture(params=["html", "pdf"])
def pool(request: pytest.FixtureRequest, crawler: Crawler) -> WorkerPool:
    """The running fetcher's render pool, or its PDF pool."""
    return crawler.pool if request.param == "html" else crawler.pdfs.pool


def named_sockets_of(pid: int) -> set[str]:
    """The paths of the named Unix sockets process ``pid`` holds open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    rows = Path("/proc/net/unix").read_text().splitlines()[1:]
    return {row.split()[7] for row in rows if len(row.split()) > 7 and row.split()[6] in inodes}


async def only_zygote_and_spares(pool: WorkerPool) -> bool:
    """Whether, within five seconds, the zygote's session holds nothing but the zygote and
    the pool's spare workers."""
    zygote = pool.zygote_pid
    assert zygote is not None
    for _ in range(500):
        if subverted.zygote_session(zygote) <= {zygote} | pool.worker_pids:
            return True
        await asyncio.sleep(0.01)
    return False


async def attempt(
    pool: WorkerPool, function: Callable[P, Wire], *args: P.args, **kwargs: P.kwargs
) -> Wire | Stopped:
    """Runs one attempt in a fresh worker; afterwards no process of it may be left."""
    result = await pool.run(function, *args, **kwargs)
    assert await only_zygote_and_spares(pool), function.__name__
    return result


def confined(result: Wire | Stopped) -> bool:
    return isinstance(result, Stopped) and result.why == "confined"


async def test_the_worker_sees_every_unix_socket_and_reaches_none(
    fetcher: FetcherServer, pool: WorkerPool, sock_dir: Path
) -> None:
    grpc_socket = str(sock_dir / "f.sock")
    found = await attempt(pool, subverted.named_unix_sockets)
    assert isinstance(found, list)
    assert grpc_socket in found  # it can see the fetcher's socket, as the red team did
    # No forkserver listener: the zygote holds no named socket, the fetcher only its own.
    assert pool.zygote_pid is not None
    assert named_sockets_of(pool.zygote_pid) == set()
    assert named_sockets_of(os.getpid()) == {grpc_socket}
    for path in found:
        assert isinstance(path, str)
        assert confined(await attempt(pool, subverted.connect_unix, path)), path


@pytest.mark.parametrize(
    ("name", "function"),
    [
        pytest.param("udp", subverted.udp_socket, id="udp"),
        pytest.param("raw", subverted.raw_socket, id="raw"),
        pytest.param("pair", subverted.socketpair, id="socketpair"),
        pytest.param("fork", subverted.fork, id="fork"),
        pytest.param("spawn", subverted.spawn, id="posix_spawn"),
        pytest.param("exec", subverted.exec_shell, id="exec"),
    ],
)
async def test_no_socket_and_no_process(
    pool: WorkerPool, name: str, function: Callable[[], Wire]
) -> None:
    assert confined(await attempt(pool, function)), name


async def test_no_tcp_connection(pool: WorkerPool, origin: Origin) -> None:
    assert confined(await attempt(pool, subverted.connect_tcp, origin.port))


async def test_the_grpc_socket_cannot_be_replaced(
    fetcher: FetcherServer, pool: WorkerPool, sock_dir: Path
) -> None:
    grpc_socket = sock_dir / "f.sock"
    before = grpc_socket.stat()
    for function in (subverted.unlink, subverted.rename, subverted.bind_unix):
        assert confined(await attempt(pool, function, str(grpc_socket))), function.__name__
    after = grpc_socket.stat()
    assert (after.st_ino, after.st_dev) == (before.st_ino, before.st_dev)


@pytest.mark.parametrize("mode", ["w", "x", "a", "r+"])
async def test_no_file_is_written(pool: WorkerPool, tmp_path: Path, mode: str) -> None:
    existing = tmp_path / "existing"
    existing.write_text("mine")
    target = tmp_path / "new" if mode in ("w", "x") else existing
    assert confined(await attempt(pool, subverted.write_file, str(target), mode))
    assert existing.read_text() == "mine"
    assert not (tmp_path / "new").exists()


async def test_no_file_is_removed_or_moved(pool: WorkerPool, tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.write_text("mine")
    assert confined(await attempt(pool, subverted.unlink, str(kept)))
    assert confined(await attempt(pool, subverted.rename, str(kept)))
    assert kept.read_text() == "mine"


async def test_stderr_writes_fail_without_a_kill(pool: WorkerPool) -> None:
    # The other side of the write rule: a library's warning is refused, not fatal.
    assert await attempt(pool, subverted.write_stderr) == "refused: Bad file descriptor"


@pytest.mark.parametrize("limit", ["AS", "CPU", "FSIZE", "NOFILE", "NPROC", "CORE"])
async def test_no_limit_is_raised(pool: WorkerPool, limit: str) -> None:
    assert confined(await attempt(pool, subverted.raise_limit, limit))


async def test_no_other_process_is_signalled_or_traced(pool: WorkerPool) -> None:
    await pool.run(os.getpid)  # the zygote runs
    zygote = pool.zygote_pid
    assert zygote is not None
    for target in (zygote, os.getpid()):
        assert confined(await attempt(pool, subverted.kill, target))
        assert confined(await attempt(pool, subverted.ptrace, target))
    assert subverted.session_of(zygote) == zygote  # alive
    assert await pool.run(os.getpid) != os.getpid()


async def test_a_worker_does_not_outlive_its_task(pool: WorkerPool) -> None:
    # It answers, then stays: the pool kills it after its one task all the same.
    pid = await attempt(pool, subverted.answer_then_linger, 60.0)
    assert isinstance(pid, int)
    assert pid not in pool.worker_pids
    assert subverted.session_of(pid) is None


async def test_the_fetcher_serves_reads_after_every_attempt(
    fetcher: FetcherServer, pool: WorkerPool, origin: Origin, sock_dir: Path
) -> None:
    for function in (subverted.fork, subverted.raw_socket, subverted.exec_shell):
        assert confined(await attempt(pool, function))
    origin.routes["/"] = html("<title>Still here</title><main><p>The fetcher reads.</p></main>")
    origin.routes["/paper.pdf"] = pdf_reply()
    async with FetcherClient(f"unix:{sock_dir / 'f.sock'}") as client:
        for path, title in (("/", "Still here"), ("/paper.pdf", "Paper")):
            report = await client.read(origin.url(path), allowed_hosts=ALLOWED, page_limit=1)
            assert [page.title for page in report.pages] == [title]


def pdf_reply() -> Reply:
    body = make_pdf([[Text(72, 600, b"A paper, read after the attacks.")]], title="Paper")
    return Reply(headers=(("Content-Type", "application/pdf"),), body=body)


class Subverted(WorkerPool):
    """A real pool whose every task is an attack, whatever the crawl asked: the worker a
    hostile page or PDF would have subverted (a seam of ours, the task, is what differs)."""

    async def run(self, function: Callable[..., Wire], *args: Any, **kwargs: Any) -> Wire | Stopped:
        return await super().run(subverted.raw_socket)


@pytest.mark.parametrize("reader", ["html", "pdf"])
async def test_a_worker_that_breaks_its_confinement_makes_the_read_internal_and_is_logged(
    origin: Origin, downloader: Downloader, render_pool: WorkerPool, reader: str
) -> None:
    stream = io.StringIO()
    metrics = Metrics(CollectorRegistry())
    observer = fetch_observer(FetchLog(JsonLinesSink(stream)), metrics)
    pdfs = PdfReader(workers=1)
    pool = render_pool
    if reader == "html":
        pool = Subverted(workers=1, preload=WORKER_PRELOAD)
    else:
        await pdfs.aclose()
        pdfs.pool = Subverted(workers=1, preload=PDF_PRELOAD)
    origin.routes["/page"] = html("<title>Hostile</title><main><p>x</p></main>")
    origin.routes["/page.pdf"] = pdf_reply()
    crawl = Crawler(downloader=downloader, pool=pool, pdfs=pdfs, observer=observer)
    try:
        path = "/page" if reader == "html" else "/page.pdf"
        report = await crawl(origin.url(path), allowed_hosts=ALLOWED)
    finally:
        await pdfs.aclose()
        if pool is not render_pool:
            await pool.aclose()
    assert report.pages == ()
    assert [failure.reason for failure in report.failures] == [Reason.INTERNAL]
    logged = [json.loads(line) for line in stream.getvalue().splitlines()]
    texts = [record for record in logged if record.get("stage") == "text"]
    assert [(t["reader"], t["reason"], t["stopped"]) for t in texts] == [
        (reader, "internal", "confined")
    ]
    body = metrics.registry.get_sample_value(
        "tigress_fetcher_worker_stops_total", {"reader": reader, "why": "confined"}
    )
    assert body == 1
