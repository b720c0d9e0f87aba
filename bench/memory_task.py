"""bench.memory's task, in a module of its own: a render worker imports only this and what
the zygote preloaded (bench.memory's own imports, the crawl's among them, reach modules
whose import a confined worker's filter refuses)."""

from __future__ import annotations

import os
import time

from fetcher.isolation.workers import Wire
from fetcher.worktasks import Page, read_page


def _proc_text(path: str) -> str:
    """A /proc file's text, read with open(2) and read(2) only: a confined worker may open
    for reading, but ``open()``'s isatty check is an ioctl, which its filter refuses."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode()


def status(pid: int | str = "self") -> dict[str, int]:
    """The memory fields of /proc/PID/status, in KiB."""
    fields = {}
    for line in _proc_text(f"/proc/{pid}/status").splitlines():
        name, _, value = line.partition(":")
        if name.startswith("Vm") and value.strip().endswith("kB"):
            fields[name] = int(value.split()[0])
    return fields


def private_kib(pid: int | str = "self") -> int:
    """Resident pages of the process that no other process shares, in KiB."""
    total = 0
    for line in _proc_text(f"/proc/{pid}/smaps_rollup").splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total


def measured_read(page: Page) -> Wire:
    """Runs in a render worker: the page read, with the worker's memory before and at peak
    (KiB)."""
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
