"""What the benchmarks that run their stand-ins in processes of their own share.

the stand-ins' processes: a free loopback port, the test CA handed over in a folder, a
child (``python -m bench.NAME ROLE ...``) that prints one line when it is ready and stops on
SIGTERM. The scripted engine they run is ``testkit.streaming_engine``.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import trustme

__all__ = [
    "free_port",
    "load_ca",
    "save_ca",
    "spawn",
    "stop",
    "wait_for_signal",
]


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_for_signal() -> None:
    """Return on SIGTERM or SIGINT (a stand-in's life)."""
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopped.set)
    await stopped.wait()


def save_ca(folder: Path) -> trustme.CA:
    """A new test CA, written to ``folder`` for the stand-ins' processes."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    ca.private_key_pem.write_to_path(str(folder / "ca-key.pem"))
    return ca


def load_ca(folder: Path) -> trustme.CA:
    """The test CA :func:`save_ca` wrote."""
    return trustme.CA.from_pem(
        (folder / "ca.pem").read_bytes(), (folder / "ca-key.pem").read_bytes()
    )


async def spawn(module: str, *args: str) -> tuple[asyncio.subprocess.Process, str]:
    """Start ``module`` as ``python -m module args...`` would, and wait (a minute at most)
    for the first line it prints.

    The module runs under a ``-c`` main rather than as the main module itself: the children
    of a ``forkserver`` (the fetcher's render workers) import the parent's main module
    again before their task, unless it is a package's ``__main__`` as production's
    ``python -m fetcher`` is. Run as ``-m bench.research``, each page would pay that
    import (about 100 ms, httpx and the gateway included): a cost of the bench, not of
    Tigress.
    """
    launch = f"import runpy; runpy.run_module({module!r}, run_name='__main__')"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", launch, *args, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 60)
    return process, line.decode().strip()


async def stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, then wait for the process to end."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    await process.wait()
