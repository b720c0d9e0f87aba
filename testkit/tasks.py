"""Tasks for worker-pool tests: module-level, so a worker process can import them."""

from __future__ import annotations

import os
import time
from pathlib import Path


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
