"""``python -m fetcher serve`` as a real process: start-up, systemd's hand-over, SIGTERM, exit 0."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from fetcher.client import FetcherClient

ROOT = Path(__file__).resolve().parents[2]


def clean_environ(**extra: str) -> dict[str, str]:
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TIGRESS_", "LISTEN_", "NOTIFY_", "JOURNAL_"))
    }
    return environ | extra


async def wait_serving(client: FetcherClient, process: asyncio.subprocess.Process) -> None:
    for _ in range(200):
        if await client.healthy(deadline=0.5):
            return
        assert process.returncode is None, await process.communicate()
        await asyncio.sleep(0.05)
    raise AssertionError("the fetcher never became healthy")


async def stop(process: asyncio.subprocess.Process) -> bytes:
    """Sends SIGTERM and returns stderr once the process has exited."""
    process.send_signal(signal.SIGTERM)
    _out, err = await asyncio.wait_for(process.communicate(), 10)
    return err


async def kill(process: asyncio.subprocess.Process) -> None:
    """Ends a process a failed test left running."""
    if process.returncode is None:
        process.kill()
        await process.communicate()


async def test_serve_answers_health_then_exits_0_on_sigterm(sock_dir: Path) -> None:
    sock = sock_dir / "f.sock"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(sock_dir / "notify"))
    notify.settimeout(5)
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "fetcher", "serve", "--listen", f"unix:{sock}"],
        cwd=ROOT,
        env=clean_environ(
            NOTIFY_SOCKET=str(sock_dir / "notify"), TIGRESS_FETCHER_SHUTDOWN_GRACE_SECONDS="2"
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        async with FetcherClient(f"unix:{sock}", timeout=2) as client:
            await wait_serving(client, process)
            assert notify.recv(1024).startswith(b"READY=1")
            err = await stop(process)
            assert process.returncode == 0, err.decode()
            assert notify.recv(1024).startswith(b"STOPPING=1")
            assert not await client.healthy()
        assert not sock.exists()
        assert b"stopped" in err
    finally:
        notify.close()
        await kill(process)


def test_serve_with_a_bad_setting_stops_with_a_message_naming_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fetcher", "serve"],
        cwd=ROOT,
        env=clean_environ(TIGRESS_FETCHER_MAX_CONCURRENT_READS="lots"),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert b"TIGRESS_FETCHER_MAX_CONCURRENT_READS" in result.stderr
    assert b"'lots'" in result.stderr


async def test_serve_exposes_metrics_on_the_listener_systemd_passes_in(sock_dir: Path) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    fd = listener.fileno()
    sock = sock_dir / "f.sock"
    # What systemd does for Sockets=fetcher-metrics.socket: the listener arrives as fd 3,
    # with LISTEN_PID naming the service's own process (exec keeps the process id).
    script = (
        "import os, sys\n"
        f"os.dup2({fd}, 3); os.close({fd})\n"
        "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1')\n"
        f"os.execv(sys.executable, [sys.executable, '-m', 'fetcher', 'serve', "
        f"'--listen', 'unix:{sock}'])\n"
    )
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-c", script],
        cwd=ROOT,
        env=clean_environ(),
        pass_fds=(fd,),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    listener.close()
    try:
        async with FetcherClient(f"unix:{sock}", timeout=2) as client:
            await wait_serving(client, process)
        async with httpx.AsyncClient(trust_env=False) as http:
            scraped = await http.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        assert scraped.status_code == 200
        names = {family.name for family in text_string_to_metric_families(scraped.text)}
        assert "tigress_fetcher_reads_in_flight" in names
        assert not any(name.endswith("_created") for name in names)
        await stop(process)
        assert process.returncode == 0
    finally:
        await kill(process)
