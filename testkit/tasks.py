"""Tasks for worker-pool tests and benchmarks: module-level, so a worker process can import
them, and in a module that imports only what a worker may (tests/fetcher/isolation/
test_workers.py runs the benchmarks' tasks in a real pool)."""

from __future__ import annotations

import os
import posix
import resource
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fetcher.isolation.workers import Wire
from fetcher.isolation.zygote import WORKER_CHANNEL
from fetcher.pdf.task import read_pdf

if TYPE_CHECKING:
    from fetcher.worktasks import Page


def spin(seconds: float) -> float:
    """Burns ``seconds`` of CPU; returns the CPU time used."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return time.process_time() - start


def allocate(size: int) -> int:
    """Holds ``size`` bytes at once."""
    return len(bytearray(size))


def sleep(seconds: float) -> int:
    """Sleeps ``seconds`` (a worker may not write files: the pool's ``worker_pids`` tells
    whether it still runs); returns the process id."""
    time.sleep(seconds)
    return os.getpid()


def pid() -> int:
    """The worker's process id."""
    return os.getpid()


def fail() -> None:
    """Raises a bug."""
    raise ValueError("a bug in a task")


def record_pid(path: str) -> int:
    """Writes the calling process's id to ``path``; returns it."""
    Path(path).write_text(str(os.getpid()))
    return os.getpid()


class Poison:
    """A value whose unpickling calls :func:`record_pid` wherever it is unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return record_pid, (self.path,)


def poisoned(path: str) -> Poison:
    """Returns a value that runs code in whichever process unpickles it."""
    return Poison(path)


def forge_reply(frame: bytes) -> None:
    """Acts as a subverted worker: writes ``frame`` to its own channel and exits at once."""
    view = memoryview(frame)
    while view:
        view = view[os.write(WORKER_CHANNEL, view) :]
    posix._exit(0)


def limits() -> Wire:
    """The worker's own resource limits that matter for containment."""
    return {
        "nproc": list(resource.getrlimit(resource.RLIMIT_NPROC)),
        "core": list(resource.getrlimit(resource.RLIMIT_CORE)),
    }


def crash() -> None:
    """Ends the worker the way a native library's bug does."""
    os.kill(os.getpid(), signal.SIGSEGV)


def address_space() -> int:
    """The worker's address space now (``VmSize``), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def pdf_peak_kib(data: bytes, char_limit: int | None) -> int:
    """Reads a PDF as a PDF worker does; the worker's peak resident memory (KiB)."""
    read_pdf(data, char_limit)
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


#: Set by :func:`warm` in a worker that ran the pool's warm-up (a spare), before its task.
WARMED = False


def warm() -> None:
    """A pool's warm-up, run in each spare once confined."""
    global WARMED  # noqa: PLW0603 - the worker's own state, read by warmed()
    WARMED = True


def warmed() -> Wire:
    """Whether this worker ran the warm-up before its task."""
    return WARMED


def import_fresh(module: str) -> Wire:
    """Imports a module no process has compiled yet and calls its ``answer()``."""
    import importlib  # noqa: PLC0415

    answer = importlib.import_module(module).answer()
    assert isinstance(answer, int)
    return answer


# The benchmarks' tasks (bench.memory, bench.hostile): here, not in the bench modules,
# whose own imports (the crawl's, httpcore's, trio's) reach modules whose import a confined
# worker's filter refuses (trio opens /dev/null read-write), so the worker would die.


def status(pid: int | str = "self") -> dict[str, int]:
    """The memory fields of /proc/PID/status, in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name.startswith("Vm") and value.strip().endswith("kB"):
            fields[name] = int(value.split()[0])
    return fields


def private_kib(pid: int | str = "self") -> int:
    """Resident pages of the process that no other process shares, in KiB."""
    total = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total


def measured_read(page: Page) -> Wire:
    """Runs in a render worker: the page read, with the worker's memory before and at peak
    (KiB)."""
    from fetcher.worktasks import read_page  # noqa: PLC0415  (preloaded by render pools)

    before = status()
    private = private_kib()
    # VmHWM starts at the worker's RSS at its fork (the kernel resets it in the copy);
    # a confined worker could not write /proc/self/clear_refs anyway.
    started = time.process_time()
    read_page(page)
    after = status()
    return {
        "size": before["VmSize"],
        "rss": before["VmRSS"],
        "private": private,
        "peak_size": after["VmPeak"],
        "peak_rss": after["VmHWM"],
        "cpu": time.process_time() - started,
    }


def measure(page: Page) -> Wire:
    """bench.hostile's task: CPU seconds of one render and the worker's peak RSS in MiB."""
    from fetcher.worktasks import read_page  # noqa: PLC0415  (preloaded by render pools)

    started = time.process_time()
    read_page(page)
    return [
        time.process_time() - started,
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    ]


def hang_up(seconds: float) -> int:
    """Hangs up its channel without answering, then sleeps ``seconds`` (a worker whose
    end the fetcher waits for)."""
    os.close(WORKER_CHANNEL)
    time.sleep(seconds)
    return os.getpid()
