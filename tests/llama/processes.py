"""Real processes for the llama suite: llama-server and `python -m gateway` on loopback ports."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
#: A loaded machine can take a while to map the model and warm up; the wait ends early
#: when the process exits.
START_DEADLINE_S = 120.0
#: Prefixes of variables a child must not inherit: llama-server reads LLAMA_ARG_* and
#: LLAMA_API_KEY as flags, the gateway reads TIGRESS_*; the suite sets what it means.
_SCRUBBED = ("LLAMA_", "TIGRESS_", "HF_")


@dataclass(frozen=True)
class Served:
    """A process serving HTTP on 127.0.0.1.

    Attributes:
        url: Its base URL, `http://127.0.0.1:<port>`.
        log: The file its stdout and stderr go to (shown when a start fails).
    """

    url: str
    log: Path


def clean_environ(**extra: str) -> dict[str, str]:
    """The test process's environment without the variables that would change a child."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED)}
    return kept | extra


def free_port() -> int:
    """A port the kernel just had free on 127.0.0.1 (a start retries if it was taken since)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _wait_healthy(process: subprocess.Popen[bytes], health_url: str) -> bool:
    """Polls the health URL until it answers 200; False if the process exits first."""
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            if httpx.get(health_url, timeout=2).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{health_url} never answered 200 within {START_DEADLINE_S:.0f}s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def serving(argv: list[str], *, health: str, env: Mapping[str, str], log: Path) -> Iterator[Served]:
    """Starts `argv` on a free loopback port, waits until healthy, stops it at the end.

    Args:
        argv: The command; `{port}` in any argument is replaced by the chosen port.
        health: The path that answers 200 once the process serves.
        env: The child's whole environment (`{port}` in a value is replaced too).
        log: Where its output goes.

    Yields:
        The running process's URL and log.
    """
    for _attempt in range(3):
        port = free_port()
        with log.open("wb") as out:
            process = subprocess.Popen(
                [arg.replace("{port}", str(port)) for arg in argv],
                cwd=ROOT,
                env={k: v.replace("{port}", str(port)) for k, v in env.items()},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            if _wait_healthy(process, f"http://127.0.0.1:{port}{health}"):
                yield Served(f"http://127.0.0.1:{port}", log)
                return
            # Both llama-server and uvicorn say "bind" when the port was taken between
            # choosing it and binding it; then another port is tried.
            if "bind" not in log.read_text(errors="replace"):
                raise AssertionError(f"{argv[0]} exited at start:\n{_tail(log)}")
        finally:
            _stop(process)
    raise AssertionError(f"{argv[0]} found no free port:\n{_tail(log)}")


def gateway_argv() -> list[str]:
    """`python -m gateway` with this interpreter (the settings come from the environment)."""
    return [sys.executable, "-m", "gateway"]
