"""The fetcher's command line: ``check``, ``get``, ``text``, ``read`` and ``serve``.

Operators use it to see what the fetcher would do with an address, and acceptance
checks drive it. Every command runs the production policy: no flag can loosen a rule.
Exit codes: 0 when everything was allowed or read, 3 when anything was refused or
failed, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import sys
from collections.abc import Sequence
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from fetcher.crawl import WORKER_PRELOAD, WORKER_WARM_UP, Crawler
from fetcher.errors import HopError
from fetcher.html.extract import PAGE_TEXT_LIMIT, Document, cut, read_document
from fetcher.isolation.workers import WorkerPool
from fetcher.net.download import Downloader
from fetcher.net.guard import check_answers, lookup, parse_address
from fetcher.net.policy import Policy
from fetcher.net.resolver import DnsResolver, IPAddress, Resolver, StaticResolver
from fetcher.net.urls import Refused, normalise_host
from fetcher.outcome import Downloaded, Outcome
from fetcher.pdf.reader import PdfReader
from fetcher.pdf.result import PdfFailure, PdfLimits, is_pdf
from fetcher.pdf.worker import extract_pdf
from fetcher.report import Report

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_REFUSED = 3


def _resolve_entry(text: str) -> tuple[str, IPAddress]:
    """``NAME:IP`` split at the first colon, so IPv6 answers need no brackets (curl's
    ``NAME:PORT:IP`` is read too)."""
    name, colon, address = text.partition(":")
    if not colon or not name:
        raise argparse.ArgumentTypeError(f"expected NAME:IP, got {text!r}")
    host = normalise_host(name)
    if isinstance(host, Refused):
        raise argparse.ArgumentTypeError(f"{name!r} is not a host name: {host.detail}")
    try:
        return host[0], ip_address(address.strip("[]"))
    except ValueError:
        pass
    # curl's own form, NAME:PORT:IP, is accepted too (the port says nothing here).
    port, colon, rest = address.partition(":")
    if colon and port.isdigit():
        try:
            return host[0], ip_address(rest.strip("[]"))
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(f"{address!r} is not an IP address")


def version() -> str:
    """The installed distribution's version (``unknown`` when run from an uninstalled tree)."""
    try:
        return importlib.metadata.version("tigress")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def program_name(argv0: str) -> str:
    """What usage lines call the program: the console script, or ``python -m fetcher``."""
    name = Path(argv0).name
    return name if name.startswith("tigress-") else "python -m fetcher"


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The argument parser, and the parser of each subcommand by name."""
    parser = argparse.ArgumentParser(
        prog=program_name(sys.argv[0]),
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser(
        "check", help="decide whether addresses may be opened, without connecting"
    )
    check.add_argument(
        "--resolve",
        metavar="NAME:IP",
        action="append",
        type=_resolve_entry,
        default=[],
        help="use IP as an answer for NAME (repeatable; the answers are still checked)",
    )
    check.add_argument("urls", nargs="+", metavar="URL")

    get = commands.add_parser("get", help="download one page and print the outcome as JSON")
    get.add_argument("--allow-host", action="append", required=True, metavar="HOST")
    get.add_argument("url", metavar="URL")

    text = commands.add_parser(
        "text", help="print the text the reader makes of saved HTML or PDF files"
    )
    text.add_argument("--json", action="store_true", help="one JSON object per file")
    text.add_argument(
        "--full", action="store_true", help="PDFs: the whole text, not cut to the page budget"
    )
    text.add_argument("--url", default="https://localhost/", help="the page's address")
    text.add_argument("files", nargs="+", metavar="FILE", type=Path)

    read = commands.add_parser("read", help="read a page and its same-site links (the crawl)")
    read.add_argument("--allow-host", action="append", required=True, metavar="HOST")
    read.add_argument("--pages", type=int, default=6, help="page limit (at most 6)")
    read.add_argument("--json", action="store_true", help="print the report as JSON")
    read.add_argument("url", metavar="URL")

    # grpc is imported only for `serve`, so `check` starts fast.
    from fetcher.server import add_serve_arguments  # noqa: PLC0415

    serve = commands.add_parser("serve", help="run the gRPC service")
    add_serve_arguments(serve)
    return parser, {"check": check, "get": get, "text": text, "read": read, "serve": serve}


async def check_urls(
    urls: Sequence[str], *, resolver: Resolver, policy: Policy
) -> list[dict[str, Any]]:
    """Decide every URL (concurrently), in the order given."""

    async def one(url: str) -> dict[str, Any]:
        answers: list[IPAddress] = []
        try:
            address = parse_address(url, policy)
            answers = await lookup(address, resolver)
            check_answers(address, answers, policy)
        except HopError as exc:
            # The same detail `get` gives (it never holds a resolved address: rule 2's
            # detail names only the host asked for; the answers are in "addresses").
            return {
                "url": url,
                "allowed": False,
                "reason": str(exc.reason),
                "detail": exc.detail,
                "addresses": [str(a) for a in answers],
            }
        return {
            "url": url,
            "allowed": True,
            "reason": "allowed",
            "addresses": [str(a) for a in answers],
        }

    return list(await asyncio.gather(*(one(url) for url in urls)))


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    """An outcome as the JSON ``get`` prints (never the body)."""
    if isinstance(outcome, Downloaded):
        return {
            "url": outcome.requested_url,
            "ok": True,
            "final_url": outcome.final_url,
            "status": outcome.status,
            "content_type": outcome.content_type,
            "charset": outcome.charset,
            "bytes": len(outcome.body),
            "elapsed_ms": outcome.elapsed_ms,
            "resolved_ip": str(outcome.resolved_ip),
            "redirects": outcome.redirects,
        }
    return {
        "url": outcome.requested_url,
        "ok": False,
        "final_url": outcome.url,
        "reason": str(outcome.reason),
        "detail": outcome.detail,
        "status": outcome.status,
        "elapsed_ms": outcome.elapsed_ms,
        "resolved_ip": str(outcome.resolved_ip) if outcome.resolved_ip else None,
        "redirects": outcome.redirects,
    }


def report_json(report: Report) -> dict[str, Any]:
    """A crawl report as JSON."""
    return {
        "url": report.url,
        "elapsed_ms": report.elapsed_ms,
        "pages": [
            {
                "requested_url": p.requested_url,
                "final_url": p.final_url,
                "title": p.title,
                "status": p.status,
                "bytes": p.bytes,
                "elapsed_ms": p.elapsed_ms,
                "depth": p.depth,
                "text": p.text,
            }
            for p in report.pages
        ],
        "failures": [
            {"url": f.url, "reason": str(f.reason), "detail": f.detail, "depth": f.depth}
            for f in report.failures
        ],
    }


def report_text(report: Report) -> str:
    """A crawl report for people to read."""
    if report.first_page_failed:
        failure = report.failures[0]
        return f"Could not read {failure.url}: {failure.reason} ({failure.detail})"
    lines: list[str] = []
    for page in report.pages:
        lines += [f"== {page.title or page.final_url}", f"   {page.final_url}", "", page.text, ""]
    lines += [f"!! {f.url}: {f.reason} ({f.detail})" for f in report.failures]
    return "\n".join(lines)


def _print_json(value: object) -> None:
    # ASCII only: U+2028 and friends inside page text must not split a JSON line.
    sys.stdout.write(json.dumps(value, ensure_ascii=True) + "\n")


async def _check(args: argparse.Namespace) -> int:
    table: dict[str, list[IPAddress]] = {}
    for name, address in args.resolve:
        table.setdefault(name, []).append(address)
    system = DnsResolver()
    try:
        resolver = StaticResolver(table, fallback=system)
        results = await check_urls(args.urls, resolver=resolver, policy=Policy())
    finally:
        await system.aclose()
    for result in results:
        _print_json(result)
    return EXIT_OK if all(r["allowed"] for r in results) else EXIT_REFUSED


async def _get(args: argparse.Namespace) -> int:
    async with Downloader() as downloader:
        outcome = await downloader.download(args.url, allowed_hosts=args.allow_host)
    _print_json(outcome_json(outcome))
    return EXIT_OK if outcome.ok else EXIT_REFUSED


def _text(args: argparse.Namespace) -> int:
    failed = False
    for path in args.files:
        body = path.read_bytes()
        if is_pdf(body):  # by content, whatever the file is called
            limits = PdfLimits(char_limit=None if args.full else 4 * PAGE_TEXT_LIMIT)
            result = asyncio.run(extract_pdf(body, limits))
            if isinstance(result, PdfFailure):
                failed = True
                if args.json:
                    _print_json(
                        {"file": str(path), "reason": str(result.problem), "detail": result.detail}
                    )
                else:
                    sys.stderr.write(f"{path}: {result.problem} ({result.detail})\n")
                continue
            text = result.text if args.full else cut(result.text, PAGE_TEXT_LIMIT)
            document = Document(title=result.title, text=text, links=())
        else:
            document = read_document(body, content_type="text/html", charset=None, url=args.url)
        if args.json:
            _print_json(
                {
                    "file": str(path),
                    "title": document.title,
                    "text": document.text,
                    "links": list(document.links),
                }
            )
        else:
            sys.stdout.write(document.text + "\n")
    return EXIT_REFUSED if failed else EXIT_OK


async def _read(args: argparse.Namespace) -> int:
    pool = WorkerPool(workers=2, preload=WORKER_PRELOAD, warm_up=WORKER_WARM_UP)
    pdfs = PdfReader()
    try:
        async with Downloader() as downloader:
            read = Crawler(downloader=downloader, pool=pool, pdfs=pdfs)
            report = await read(
                args.url, allowed_hosts=args.allow_host, page_limit=max(1, min(args.pages, 6))
            )
    finally:
        await pool.aclose()
        await pdfs.aclose()
    if args.json:
        _print_json(report_json(report))
    else:
        sys.stdout.write(report_text(report) + "\n")
    return EXIT_REFUSED if report.first_page_failed else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser, commands = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    name = argv[0] if argv else ""
    if name in commands and name != "serve":
        # Options and addresses may come in any order: `check URL --resolve NAME:IP URL`.
        args = commands[name].parse_intermixed_args(argv[1:])
        args.command = name
    else:
        args = parser.parse_args(argv)
    if args.command == "check":
        return asyncio.run(_check(args))
    if args.command == "get":
        return asyncio.run(_get(args))
    if args.command == "text":
        missing = [str(p) for p in args.files if not p.is_file()]
        if missing:
            commands["text"].error(f"no such file: {', '.join(missing)}")
        return _text(args)
    if args.command == "read":
        return asyncio.run(_read(args))
    from fetcher.server import run_serve  # noqa: PLC0415

    return run_serve(args)
