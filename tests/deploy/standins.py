"""Programs that tests/deploy/test_systemd.py runs inside the container (not a test module).

Each is a subcommand, started with the container's own Python (standard library only,
except ``read``, which needs the installed Tigress):

- ``https``: the stand-in public web host: HTTPS on every local address, port 443, with a
  certificate from the test's CA, one small HTML page at every path, except ``NAME.pdf``:
  the file of that name in ``--pdfs`` (``application/pdf``), or 404;
- ``dns``: the stand-in resolver: answers A queries for the names given, NODATA for other
  types of those names, NXDOMAIN for the rest;
- ``probe``: joins a cgroup (the fetcher's), then tries a TCP connection to each address
  on port 443 and prints which ones it reached, as JSON;
- ``connect``: opens a Unix socket and says whether it could;
- ``get``: an HTTP GET on loopback, printing the status and the body;
- ``read``: one read through the fetcher's gRPC socket, printing the report as JSON.

The servers tell systemd they are ready (``Type=notify``), so ``systemd-run`` returns
once they listen.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import socket
import ssl
import struct
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import IPv4Address, ip_address
from pathlib import Path

PAGE = (
    b"<!doctype html><html><head><title>Stand-in public host</title></head>"
    b"<body><main><h1>Stand-in public host</h1><p>This page lives at an address outside "
    b"every special-purpose range, inside the test container's own network.</p>"
    b"</main></body></html>"
)


def notify_ready() -> None:
    """Sends READY=1 to systemd when it asked for it (``NOTIFY_SOCKET``)."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.sendto(b"READY=1", address)


class _Page(BaseHTTPRequestHandler):
    server: _TLSServer

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        body, media = PAGE, "text/html; charset=utf-8"
        if path.endswith(".pdf"):
            pdf = self.server.pdfs / Path(path).name
            if not pdf.is_file():
                self.send_error(404)
                return
            body, media = pdf.read_bytes(), "application/pdf"
        self.send_response(200)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"https: {self.address_string()} {format % args}\n")


class _TLSServer(ThreadingHTTPServer):
    """HTTPS on ``[::]`` with IPv4 mapped in; the handshake runs in each request's thread,
    so a probe that connects and leaves at once cannot stall the accept loop."""

    address_family = socket.AF_INET6
    daemon_threads = True
    context: ssl.SSLContext
    pdfs: Path

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()

    def finish_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        try:
            wrapped = self.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        self.RequestHandlerClass(wrapped, client_address, self)  # type: ignore[arg-type]


def serve_https(cert: Path, key: Path, port: int, pdfs: Path) -> None:
    """Serves the stand-in page (and the PDFs in ``pdfs``) over HTTPS until stopped."""
    server = _TLSServer(("::", port), _Page)
    server.pdfs = pdfs
    server.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.context.load_cert_chain(cert, key)
    notify_ready()
    server.serve_forever()


def dns_answer(query: bytes, names: dict[str, IPv4Address]) -> bytes | None:
    """The response to one DNS query (RFC 1035 section 4), or ``None`` for garbage."""
    if len(query) < 12:
        return None
    ident, flags, qdcount = struct.unpack("!HHH", query[:6])
    if qdcount != 1 or flags & 0x8000:
        return None
    labels, offset = [], 12
    while offset < len(query) and query[offset] != 0:
        length = query[offset]
        labels.append(query[offset + 1 : offset + 1 + length].decode("ascii", "replace"))
        offset += 1 + length
    end = offset + 5
    if end > len(query):
        return None
    qtype, _qclass = struct.unpack("!HH", query[offset + 1 : end])
    name = ".".join(labels).lower().rstrip(".")
    question = query[12:end]
    answers = b""
    rcode = 0
    if name not in names:
        rcode = 3  # NXDOMAIN
    elif qtype == 1:  # A
        answers = struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + names[name].packed
    header = struct.pack("!HHHHHH", ident, 0x8180 | rcode, 1, 1 if answers else 0, 0, 0)
    return header + question + answers


def serve_dns(listen: str, answers: Sequence[str]) -> None:
    """Answers DNS over UDP on ``listen``, port 53, until stopped."""
    names = {}
    for entry in answers:
        name, _, address = entry.partition("=")
        names[name.lower()] = IPv4Address(address)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind((listen, 53))
        notify_ready()
        while True:
            query, client = server.recvfrom(4096)
            response = dns_answer(query, names)
            if response is not None:
                server.sendto(response, client)


def _reaches(address: str, port: int, timeout: float) -> bool:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(timeout)
        try:
            probe.connect((address, port))
        except OSError:
            return False
    return True


def probe(cgroup: Path, addresses: Sequence[str], port: int, timeout: float) -> None:
    """Joins ``cgroup``, then prints ``{address: reached}`` for TCP connections to each.

    Sockets take the cgroup's firewall (``IPAddressDeny=``) from the cgroup they are made
    in, so the process moves first; a denied connection is a dropped SYN (a timeout).
    """
    (cgroup / "cgroup.procs").write_text(f"{os.getpid()}\n")
    own = Path("/proc/self/cgroup").read_text().strip().rpartition(":")[2]
    if not str(cgroup).endswith(own):
        raise SystemExit(f"probe: still in {own}, not in {cgroup}")
    with concurrent.futures.ThreadPoolExecutor(len(addresses)) as pool:
        reached = pool.map(lambda a: _reaches(a, port, timeout), addresses)
        print(json.dumps(dict(zip(addresses, reached, strict=True))))


def connect(path: str) -> None:
    """Prints ``connected``, or the error opening the Unix socket at ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        try:
            client.connect(path)
        except OSError as exc:
            print(f"refused: {type(exc).__name__}")
            return
    print("connected")


def get(url: str, wait: float) -> None:
    """Prints the status on the first line, then the body.

    A refused connection is tried again for up to ``wait`` seconds: a service that was
    just (re)started may not listen yet.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                status, body = response.status, response.read()
            break
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
            break
        except urllib.error.URLError as exc:
            if not isinstance(exc.reason, ConnectionRefusedError) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    print(status)
    print(body.decode("utf-8", "replace"))


async def read(url: str, allowed: Sequence[str], request_id: str) -> None:
    """Reads ``url`` through the fetcher's socket; prints pages and failures as JSON."""
    from fetcher.client import FetcherClient

    async with FetcherClient("unix:/run/fetcher/fetcher.sock", timeout=30) as client:
        report = await client.read(url, allowed_hosts=allowed, page_limit=1, request_id=request_id)
    print(
        json.dumps(
            {
                "pages": [
                    {"url": p.final_url, "title": p.title, "text": p.text} for p in report.pages
                ],
                "failures": [{"url": f.url, "reason": str(f.reason)} for f in report.failures],
            }
        )
    )


def main(argv: Sequence[str]) -> None:
    """Runs one subcommand (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="standins")
    commands = parser.add_subparsers(dest="command", required=True)
    https = commands.add_parser("https")
    https.add_argument("--cert", type=Path, required=True)
    https.add_argument("--key", type=Path, required=True)
    https.add_argument("--port", type=int, default=443)
    https.add_argument("--pdfs", type=Path, default=Path("/nonexistent"))
    dns = commands.add_parser("dns")
    dns.add_argument("--listen", required=True)
    dns.add_argument("answers", nargs="+", metavar="NAME=IPV4")
    probe_ = commands.add_parser("probe")
    probe_.add_argument("--cgroup", type=Path, required=True)
    probe_.add_argument("--port", type=int, default=443)
    probe_.add_argument("--timeout", type=float, default=2.0)
    probe_.add_argument("addresses", nargs="+")
    connect_ = commands.add_parser("connect")
    connect_.add_argument("path")
    get_ = commands.add_parser("get")
    get_.add_argument("--wait", type=float, default=0.0, metavar="SECONDS")
    get_.add_argument("url")
    read_ = commands.add_parser("read")
    read_.add_argument("--allow", action="append", required=True)
    read_.add_argument("--request-id", default="")
    read_.add_argument("url")
    args = parser.parse_args(argv)
    if args.command == "https":
        serve_https(args.cert, args.key, args.port, args.pdfs)
    elif args.command == "dns":
        serve_dns(args.listen, args.answers)
    elif args.command == "probe":
        for address in args.addresses:
            ip_address(address)  # a typo must not read as "unreachable"
        probe(args.cgroup, args.addresses, args.port, args.timeout)
    elif args.command == "connect":
        connect(args.path)
    elif args.command == "get":
        get(args.url, args.wait)
    else:
        asyncio.run(read(args.url, args.allow, args.request_id))


if __name__ == "__main__":
    main(sys.argv[1:])
