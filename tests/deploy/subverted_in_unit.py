"""The subverted-worker suite's attempts, run inside the fetcher unit (test_systemd.py).

Started by a runtime drop-in as the fetcher unit's ``ExecStartPost=`` (so once the fetcher
serves: its gRPC socket exists), this runs under everything the unit gives the fetcher: its
dynamic user, namespaces, system call filter, ``MemoryDenyWriteExecute=``, cgroup and
``IPAddressDeny=``. It builds a render pool and a PDF pool as ``fetcher serve`` does (from
the same settings) and runs each attempt of ``tests/fetcher/isolation/test_subverted_worker.py``
(``testkit/subverted.py``, copied beside this file as ``subverted.py``) as the task of a real
worker of each, then prints one line, ``subverted-suite RUN_ID: {JSON}``, to the journal: for
each attempt, what came of it and whether that is what the suite expects. It always exits 0:
the test reads the verdicts, and the fetcher keeps running either way.

Under the unit's ``ProtectProc=invisible`` this process cannot see the zygotes and workers
in ``/proc`` (they are not dumpable), so its check that an attempt left no process behind
finds nothing there; the test checks that from outside instead: every process left in the
unit's cgroup descends from the fetcher's main process.

Usage: ``python subverted_in_unit.py MAINPID RUN_ID`` (the line names the run).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import subverted  # type: ignore[import-not-found]  # testkit/subverted.py, copied beside this

from fetcher.crawl import WORKER_PRELOAD
from fetcher.errors import TaskError
from fetcher.isolation.workers import WorkerPool
from fetcher.isolation.zygote import Stopped, Wire
from fetcher.pdf.worker import pdf_pool
from fetcher.settings import load_settings

SOCKET = "/run/fetcher/fetcher.sock"
#: The Unix sockets tried when the unit hides ``/proc/net/unix`` (``ProcSubset=pid``).
KNOWN_SOCKETS = (
    SOCKET,
    "/run/systemd/journal/socket",
    "/run/systemd/journal/stdout",
    "/run/systemd/notify",
)
KEPT = Path("/run/fetcher/kept-by-the-suite")


def keep() -> None:
    KEPT.write_text("mine")


def kept_intact() -> bool:
    """The kept file as it was, and no file created beside it; removes it."""
    intact = KEPT.read_text() == "mine" and not KEPT.with_name("new-by-a-worker").exists()
    KEPT.unlink()
    return intact


async def left_over(pool: WorkerPool) -> list[int]:
    """Processes of the zygote's session other than the zygote and the spares (5 s grace)."""
    zygote = pool.zygote_pid
    assert zygote is not None
    extra: list[int] = []
    for _ in range(500):
        extra = sorted(subverted.zygote_session(zygote) - {zygote} - pool.worker_pids)
        if not extra:
            return []
        await asyncio.sleep(0.01)
    return extra


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie counts), by signal 0."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def gone(pid: int) -> bool:
    """Whether process ``pid`` is gone within five seconds (its zygote reaps it)."""
    for _ in range(500):
        if not alive(pid):
            return True
        await asyncio.sleep(0.01)
    return False


def hidden(got: Any) -> bool:
    """Whether the task failed because ``/proc/net/unix`` is not there."""
    return isinstance(got, dict) and "No such file or directory: '/proc/net/unix'" in str(
        got.get("error")
    )


def shown(result: Wire | Stopped) -> Any:
    return {"stopped": result.why} if isinstance(result, Stopped) else result


async def attempts(pool: WorkerPool, fetcher_pid: int) -> dict[str, dict[str, Any]]:
    """Every attempt in one pool: what came of it, and whether the suite expects that."""
    verdicts: dict[str, dict[str, Any]] = {}

    async def attempt(
        name: str, function: Callable[..., Wire], *args: Any, expect: Any = "confined"
    ) -> Wire | Stopped:
        try:
            result: Wire | Stopped = await pool.run(function, *args)
        except TaskError as exc:  # the task raised: a refusal that did not kill
            result = {"error": exc.error}
        extra = await left_over(pool)
        if expect == "confined":
            ok = isinstance(result, Stopped) and result.why == "confined"
        else:
            ok = expect(result) if callable(expect) else result == expect
        verdicts[name] = {"ok": ok and not extra, "got": shown(result), "left": extra}
        return result

    await pool.run(os.getpid)  # the zygote runs
    zygote = pool.zygote_pid
    assert zygote is not None
    # Outside a unit the table names every socket, the fetcher's among them; under
    # ProcSubset=pid there is no /proc/net to read, and the known sockets are tried.
    found = await attempt(
        "named_unix_sockets",
        subverted.named_unix_sockets,
        expect=lambda got: (isinstance(got, list) and SOCKET in got) or hidden(got),
    )
    for path in found if isinstance(found, list) else KNOWN_SOCKETS:
        await attempt(f"connect_unix {path}", subverted.connect_unix, path)
    for name in ("udp_socket", "raw_socket", "socketpair", "fork", "spawn", "exec_shell"):
        await attempt(name, getattr(subverted, name))
    await attempt("connect_tcp 443", subverted.connect_tcp, 443)
    before = os.stat(SOCKET)
    for name in ("unlink", "rename", "bind_unix"):
        await attempt(f"{name} {SOCKET}", getattr(subverted, name), SOCKET)
    after = os.stat(SOCKET)
    verdicts["the gRPC socket is the same file"] = {
        "ok": (after.st_ino, after.st_dev) == (before.st_ino, before.st_dev)
    }
    keep()
    for mode in ("w", "x", "a", "r+"):
        target = KEPT.with_name("new-by-a-worker") if mode in ("w", "x") else KEPT
        await attempt(f"write_file {mode}", subverted.write_file, str(target), mode)
    await attempt("unlink a file", subverted.unlink, str(KEPT))
    await attempt("rename a file", subverted.rename, str(KEPT))
    verdicts["no file was written, created or removed"] = {"ok": kept_intact()}
    await attempt("write_stderr", subverted.write_stderr, expect="refused: Bad file descriptor")
    for limit in ("AS", "CPU", "FSIZE", "NOFILE", "NPROC", "CORE"):
        await attempt(f"raise_limit {limit}", subverted.raise_limit, limit)
    for label, pid in (("the zygote", zygote), ("the fetcher", fetcher_pid)):
        await attempt(f"kill {label}", subverted.kill, pid)
        await attempt(f"ptrace {label}", subverted.ptrace, pid)
    # Under ProtectProc=invisible the zygote and its workers (not dumpable) are not in
    # /proc for this process: whether they live is asked of the kernel (signal 0).
    again = await pool.run(os.getpid)
    verdicts["the zygote and the fetcher are alive"] = {
        "ok": alive(zygote) and alive(fetcher_pid) and isinstance(again, int),
        "got": again,
    }
    lingerer = await attempt(
        "answer_then_linger", subverted.answer_then_linger, 60.0, expect=lambda got: True
    )
    verdicts["a worker does not outlive its task"] = {
        "ok": isinstance(lingerer, int) and await gone(lingerer)
    }
    return verdicts


async def main(fetcher_pid: int) -> dict[str, Any]:
    settings = load_settings(environ=os.environ)
    pools = {
        "html": WorkerPool(workers=1, limits=settings.page_limits, preload=WORKER_PRELOAD),
        "pdf": pdf_pool(settings.pdf_limits),
    }
    results: dict[str, dict[str, dict[str, Any]]] = {}
    try:
        for name, pool in pools.items():
            results[name] = await attempts(pool, fetcher_pid)
    finally:
        for pool in pools.values():
            await pool.aclose()
    return {"fetcher_pid": fetcher_pid, "pools": results}


if __name__ == "__main__":
    try:
        report: Any = asyncio.run(main(int(sys.argv[1])))
    except Exception as exc:  # the test reads this line whatever happened
        report = {"error": f"{type(exc).__name__}: {exc}"}
    print(f"subverted-suite {sys.argv[2]}:", json.dumps(report, sort_keys=True), flush=True)
