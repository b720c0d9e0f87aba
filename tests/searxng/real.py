"""The real SearXNG for the suite: Valkey/Redis, SearXNG itself, and its loopback engines' backend.

- :class:`ResultServer`: the HTTP server SearXNG's engines are pointed at
  (``tests/searxng/settings.yml``), on 127.0.0.1 in a thread of its own (SearXNG is one
  process for the whole session, the tests' event loops are one per test). It answers
  the generic JSON engines (``/json``, ``/news``), the Brave API client (``/brave``, with
  dates) and ``/err500``, with results on the address a test sets (:attr:`site`), and
  records every request SearXNG made.
- :func:`running_valkey`: Debian's ``redis-server`` (or ``valkey-server``) on a loopback
  port, nothing saved: SearXNG's limiter needs it.
- :func:`running_searxng`: ``python -m searx.webapp`` from the cached build
  (``tests/searxng/build.py``), the limiter on, ``127.0.0.1`` in its ``pass_ip`` list
  (one widened web_search is 16 searches; the limiter lets 4 JSON searches an hour
  through otherwise), so another loopback address (127.0.0.2) meets the limiter whole.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tests.llama.processes import Served, clean_environ, free_port, serving
from tests.searxng.build import ReadyPaths

SETTINGS = Path(__file__).with_name("settings.yml")
#: Results per engine answer (SearXNG merges the engines' lists by address).
RESULTS = 3
VALKEY_BINARIES = ("valkey-server", "redis-server")
START_DEADLINE_S = 30.0


@dataclass
class Asked:
    """One request SearXNG's engines made of the result server."""

    path: str
    params: dict[str, str]


@dataclass
class ResultServer:
    """The backend of SearXNG's loopback engines (see the module docstring).

    Attributes:
        port: The test's origin's port, which every result points at: the JSON engine's
            on ``origin.test``, the Brave client's on ``www.origin.test``, the news
            engine's on ``docs.origin.test`` (names the origin's certificate holds).
        asked: Every request received, in order.
    """

    origin_port: int = 443
    asked: list[Asked] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def port(self) -> int:
        """The port SearXNG's engines are pointed at."""
        assert self._server is not None
        return int(self._server.server_address[1])

    def paths(self) -> list[str]:
        """The paths asked, in order."""
        with self._lock:
            return [asked.path for asked in self.asked]

    def clear(self) -> None:
        """Forgets what was asked (each test starts from nothing)."""
        with self._lock:
            self.asked.clear()

    def host(self, path: str) -> str:
        """The host of ``path``'s results."""
        return {"/json": "origin.test", "/brave": "www.origin.test"}.get(path, "docs.origin.test")

    def result_url(self, path: str, query: str, n: int) -> str:
        """The address of result ``n`` (from 1) that ``path`` gives for ``query``."""
        words = query.replace(" ", "-")
        return f"https://{self.host(path)}:{self.origin_port}/{path.strip('/')}/{words}/{n}"

    def results(self, path: str, query: str) -> list[dict[str, str]]:
        """What ``path`` answers for ``query``: distinct addresses per engine."""
        kind = path.strip("/")
        return [
            {
                "link": self.result_url(path, query, n),
                "name": f"{kind} {query} {n}",
                "snippet": f"<b>{query}</b> from {kind}, result {n}.",
            }
            for n in range(1, RESULTS + 1)
        ]

    def answer(self, path: str, params: dict[str, str]) -> tuple[int, bytes]:
        """The status and JSON body for one request."""
        with self._lock:
            self.asked.append(Asked(path, params))
        query = params.get("q", "")
        if path in ("/json", "/news"):
            return 200, json.dumps({"items": self.results(path, query)}).encode()
        if path == "/brave":
            results = [
                {"url": r["link"], "title": r["name"], "description": r["snippet"], "age": day}
                for r, day in zip(
                    self.results(path, query),
                    ("2026-10-01", "2026-09-15", "2025-01-02"),
                    strict=True,
                )
            ]
            return 200, json.dumps({"web": {"results": results}}).encode()
        return 500, b'{"error": "scripted failure"}'

    @contextlib.contextmanager
    def running(self) -> Iterator[ResultServer]:
        """Serves on 127.0.0.1 in a thread until the block ends."""
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                params = {
                    k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()
                }
                status, body = backend.answer(parts.path, params)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # the tests read `asked`, not a log

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            thread.join()


def valkey_binary() -> str | None:
    """Debian's ``valkey-server`` or ``redis-server``, when installed."""
    for name in VALKEY_BINARIES:
        found = shutil.which(name)
        if found is not None:
            return found
    return None


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def running_valkey(binary: str, log: Path) -> Iterator[str]:
    """``binary`` on a free loopback port, nothing saved; yields its ``valkey://`` URL."""
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while not _answers_ping(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{binary} did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.05)
        yield f"valkey://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def write_settings(folder: Path, *, result_port: int, valkey_url: str) -> Path:
    """SearXNG's settings.yml and limiter.toml in ``folder``; returns the settings' path."""
    text = SETTINGS.read_text()
    text = text.replace("@SECRET@", secrets.token_hex(16))
    text = text.replace("@VALKEY_URL@", valkey_url)
    text = text.replace("@RESULT_PORT@", str(result_port))
    settings = folder / "settings.yml"
    settings.write_text(text)
    # Read from the settings' folder: 127.0.0.1 passes the limiter, 127.0.0.2 does not.
    (folder / "limiter.toml").write_text('[botdetection.ip_lists]\npass_ip = ["127.0.0.1"]\n')
    return settings


@contextlib.contextmanager
def running_searxng(build: ReadyPaths, settings: Path, log: Path) -> Iterator[Served]:
    """SearXNG from ``build`` with ``settings``, on a free loopback port, until the end."""
    argv = [str(build.python), "-m", "searx.webapp"]
    env = clean_environ(
        SEARXNG_SETTINGS_PATH=str(settings),
        SEARXNG_PORT="{port}",
        SEARXNG_BIND_ADDRESS="127.0.0.1",
        PYTHONPATH=str(build.source),
    )
    with serving(argv, health="/healthz", env=env, log=log) as up:
        yield up
