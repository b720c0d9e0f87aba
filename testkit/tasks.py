"""Tasks for worker-pool tests: module-level, so a worker process can import them."""

from __future__ import annotations

import os
import resource
import signal
import socket
import time
from pathlib import Path

from fetcher.isolation.workers import Wire


def spin(seconds: float) -> float:
    """Burns ``seconds`` of CPU; returns the CPU time used."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return time.process_time() - start


def allocate(size: int) -> int:
    """Holds ``size`` bytes at once."""
    return len(bytearray(size))


def tick(path: str, seconds: float) -> int:
    """Appends a line to ``path`` every 20 ms for ``seconds``; returns the process id."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with Path(path).open("a") as file:
            file.write("tick\n")
        time.sleep(0.02)
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
    """Acts as a subverted worker: writes ``frame`` to its own socket and exits at once."""
    for fd in range(3, 256):
        try:
            channel = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        with channel:
            if channel.family == socket.AF_UNIX and channel.type == socket.SOCK_STREAM:
                channel.sendall(frame)
    os._exit(0)


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
