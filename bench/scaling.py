"""Cost per doubling of every function that reads untrusted text (issue 22, "Everywhere").

Each reader is fed inputs doubling from 64 KiB to the largest its caller accepts, in
shapes a hostile peer can send: the user's messages (request parsing, and the hosts rule 1
allows from them), the engine's output (a stream of small events, and one event as large
as the engine client holds, both in the Web loop and in pass-through), SearXNG's JSON, the
text-tool-call filter, an MCP JSON-RPC body, HTML (the reader) and PDF (the PDF reader,
in-process). Printed per reader: CPU time at the largest size, the ratio of each doubling, their
geometric mean (the verdict: one noisy doubling is not a trend) and the largest, and the
Python heap's peak at the largest size (``tracemalloc``:
libxml2's and PDFium's own memory is not in it; ``bench.memory`` measures whole workers).

Target: a ratio of at most 2.3 per doubling everywhere (linear cost, with room for
caches and noise); a reader above it is quadratic somewhere. A row stops doubling once one
run takes more than `STOP_SECONDS` (that is the finding, and the bench stays short).

Run: ``make bench BENCH=scaling`` (about four minutes on a shared two-core machine).
"""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, cast

import httpx
from mcp_types import jsonrpc_message_adapter

from fetcher.html.extract import read_document
from fetcher.html.render import drop_repeated_passages
from fetcher.pdf.text import read_pdf
from gateway.api.request import parse_chat_request
from gateway.engine.client import MAX_EVENT_BYTES, EngineClient
from gateway.engine.http import EngineExchange
from gateway.engine.proxy import relay
from gateway.loop.tooltext.filter import TextToolFilter
from gateway.mcp.http import _read_message
from gateway.settings import DEFAULT_MAX_BODY_BYTES, EngineSettings
from gateway.tools.fetch.addresses import allowed_hosts
from gateway.tools.search.answer import read_answer
from gateway.tools.search.searxng import MAX_BODY_BYTES as SEARXNG_MAX_BYTES

KIB = 1024
MIB = 1024 * KIB
START = 64 * KIB
#: A run longer than this ends its row: the cost already shows.
STOP_SECONDS = 2.0
#: Each size is timed for at least this long (repeated runs), best of `REPEATS`.
MIN_SECONDS = 0.05
REPEATS = 3
#: No more repeats once a size has taken this long in all.
REPEAT_SECONDS = 1.0
TARGET = 2.3
#: How much the engine's socket hands over per read.
READ_BYTES = 16 * KIB
HTML_MAX_BYTES = 2 * MIB  # the download's text limit
PDF_MAX_BYTES = 16 * MIB  # the download's PDF limit
#: The text filter reads everything the engine writes; 4 MiB is past any real answer.
FILTER_MAX = 4 * MIB
ENGINE = EngineSettings("http://127.0.0.1:9/v1")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
]


@dataclass(frozen=True)
class Reader:
    """One row: a function of an input built for a size, and the largest size accepted."""

    name: str
    build: Callable[[int], Any]
    run: Callable[[Any], object]
    largest: int


# --- Inputs -------------------------------------------------------------------------------


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


PROSE = "Descaling a kettle takes citric acid and a rinse, see https://example.org/kettle. "


def _chat_body(text: str) -> bytes:
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    return json.dumps(body).encode()


def _sse_events(size: int) -> bytes:
    event = b'data: {"choices":[{"index":0,"delta":{"content":"word "}}]}\n\n'
    return event * (size // len(event) + 1)


def _one_event(size: int) -> bytes:
    payload = {"choices": [{"index": 0, "delta": {"content": "x" * (size - 60)}}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _searxng_body(size: int) -> bytes:
    result = {
        "url": "https://example.org/a",
        "title": "A title",
        "content": "Snippet text " * 20,
        "engine": "x",
        "engines": ["x"],
        "score": 1.0,
    }
    count = max(1, size // (len(json.dumps(result)) + 2))
    return json.dumps({"query": "q", "results": [result] * count}).encode()


def _mcp_body(size: int) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "web_search", "arguments": {"query": "q " * (size // 2)}},
    }
    return json.dumps(message).encode()


def _html(unit: str, size: int) -> bytes:
    return ("<html><body>" + _fill(unit, size) + "</body></html>").encode()


_FIRST_POST = "A first post of a thread, long, with commas, clauses, and asides, that scores best. "
_REPLY = "<div><div><div><div><div><p>A reply, deep below the thread, to the first post.</p>"


def _thread(size: int) -> bytes:
    """A first post (a sixth of the page) above replies nested deep: the region is one
    part of the page, and widens to the thread."""
    first = f"<div><div><div><div><p>{_fill(_FIRST_POST, size // 6)}</p></div></div></div></div>"
    replies = _fill(_REPLY + "</div></div></div></div></div>", size - size // 6)
    return f"<html><body><div>{first}<div>{replies}</div></div></body></html>".encode()


_POST = "A post of a thread much like the others, with commas, clauses, and asides, too. "
_LINKS = "<ul>" + '<li><a href="/more">One more place to explore</a></li>' * 5 + "</ul>"


def _posts_then_links(size: int) -> bytes:
    """Six equal posts (half the page: scattered, read whole), then link lists: the lists
    the whole-page read leaves out."""
    posts = "".join(
        f"<div><div><div><p>{_fill(_POST, size // 12)}</p></div></div></div>" for _ in range(6)
    )
    return f"<html><body>{posts}{_fill(_LINKS, size - size // 2)}</body></html>".encode()


_LD_PRODUCT = (
    '<script type="application/ld+json">{"@type": "Product", "description": "'
    + "A product's own text, written only for search engines, with its words. " * 8
    + '"}</script>'
)


def _json_ld_products(size: int) -> bytes:
    """JSON-LD scripts of one product each, up to the page's parse cap and past it, above a
    page that shows none of their text: the descriptions go first, capped."""
    return _html(_LD_PRODUCT, size)


def _json_ld_deep(size: int) -> bytes:
    """JSON-LD scripts nested deeper than the interpreter parses: each is skipped."""
    script = '<script type="application/ld+json">' + "[" * 5_000 + "</script>"
    return _html(script, size)


def _crowded(size: int) -> bytes:
    names = " ".join(f"a{i}=1" for i in range(size // 7))
    return f"<html><body><div {names}>x</div></body></html>".encode()


def _pdf(size: int) -> bytes:
    """A PDF of pages of Courier lines, ``size`` bytes or so (contents not compressed)."""
    line = b"(Descaling a kettle takes citric acid and then a rinse twice over.) Tj T*\n"
    page_text = b"BT /F1 10 Tf 12 TL 40 760 Tm\n" + line * 60 + b"ET"
    pages = max(1, size // (len(page_text) + 200))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(pages))
        + b"] /Count %d >>" % pages,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>",
    ]
    for i in range(pages):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(page_text), page_text))
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (n, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


# --- The engine's answers, through the real client code (a stand-in exchange) -----------


class _Exchange:
    """What `gateway.engine.http.open_exchange` returns, reading from memory."""

    def __init__(self, body: bytes) -> None:
        self.status = 200
        self.headers = {"content-type": "text/event-stream"}
        self._parts = iter([body[i : i + READ_BYTES] for i in range(0, len(body), READ_BYTES)])

    async def read(self) -> bytes:
        return next(self._parts, b"")

    def close(self) -> None:
        return None


class _Client(EngineClient):
    """The engine client with its one network seam (`_open`) reading from memory."""

    def __init__(self, body: bytes) -> None:
        super().__init__(cast(httpx.AsyncClient, None))
        self._body = body

    async def _open(self, engine: EngineSettings, path: str, body: bytes) -> EngineExchange:
        return cast(EngineExchange, _Exchange(self._body))


def _web_loop(body: bytes) -> int:
    async def run() -> int:
        count = 0
        async for _ in _Client(body).chat_chunks(ENGINE, b"{}"):
            count += 1
        return count

    return asyncio.run(run())


def _pass_through(body: bytes) -> int:
    async def run() -> int:
        pieces: AsyncIterator[object] = relay(cast(EngineExchange, _Exchange(body)), ENGINE)
        return len([piece async for piece in pieces])

    return asyncio.run(run())


def _filter(text: str) -> int:
    found = TextToolFilter(TOOLS)
    calls = 0
    for start in range(0, len(text), 64):
        calls += len(found.feed(text[start : start + 64]).calls)
    return calls + len(found.close().calls)


def _html_reader(body: bytes) -> object:
    return read_document(
        body, content_type="text/html", charset="utf-8", url="https://example.org/", site=None
    )


def _mcp(body: bytes) -> object:
    _read_message(body)
    return jsonrpc_message_adapter.validate_python(json.loads(body), by_name=False)


READERS = (
    Reader(
        "user message: request parsing",
        lambda n: _chat_body(_fill(PROSE, n)),
        parse_chat_request,
        DEFAULT_MAX_BODY_BYTES,
    ),
    Reader(
        "user message: allowed hosts (prose with addresses)",
        lambda n: _fill(PROSE, n),
        lambda text: allowed_hosts((), text),
        DEFAULT_MAX_BODY_BYTES,
    ),
    Reader(
        'user message: allowed hosts ("https://" repeated)',
        lambda n: _fill("https://", n),
        lambda text: allowed_hosts((), text),
        DEFAULT_MAX_BODY_BYTES,
    ),
    Reader(
        'user message: allowed hosts (an address, then ")" repeated)',
        lambda n: "https://a.example/" + ")" * n,
        lambda text: allowed_hosts((), text),
        DEFAULT_MAX_BODY_BYTES,
    ),
    Reader("engine stream: Web loop", _sse_events, _web_loop, 8 * MIB),
    Reader("engine one event: Web loop", _one_event, _web_loop, MAX_EVENT_BYTES),
    Reader("engine stream: pass-through", _sse_events, _pass_through, 8 * MIB),
    Reader("engine one event: pass-through", _one_event, _pass_through, MAX_EVENT_BYTES),
    Reader(
        "SearXNG JSON",
        _searxng_body,
        lambda body: read_answer(200, "application/json", body, None, limit=6, origin="x"),
        SEARXNG_MAX_BYTES,
    ),
    Reader("tool-call text: prose", lambda n: _fill(PROSE, n), _filter, FILTER_MAX),
    Reader(
        "tool-call text: an unclosed JSON call",
        lambda n: '<tool_call>{"name": "web_search", "arguments": {"query": "' + _fill("a ", n),
        _filter,
        FILTER_MAX,
    ),
    Reader(
        "tool-call text: '{' repeated",
        lambda n: "{" * n,
        _filter,
        FILTER_MAX,
    ),
    Reader("MCP JSON-RPC body", _mcp_body, _mcp, DEFAULT_MAX_BODY_BYTES),
    Reader(
        "HTML: paragraphs and links",
        lambda n: _html('<p>Some text <a href="/x">a link</a>.</p>', n),
        _html_reader,
        HTML_MAX_BYTES,
    ),
    Reader("HTML: one element of distinct attributes", _crowded, _html_reader, HTML_MAX_BYTES),
    Reader(
        "HTML: dense tiny elements",
        lambda n: _html("<b>x</b>", n),
        _html_reader,
        HTML_MAX_BYTES,
    ),
    Reader(
        "HTML: one passage repeated",
        lambda n: _html("<p>A passage a responsive page renders twice, for phones.</p>" * 4, n),
        _html_reader,
        HTML_MAX_BYTES,
    ),
    Reader("HTML: a first post above its replies", _thread, _html_reader, HTML_MAX_BYTES),
    Reader(
        "HTML: equal posts, then link lists",
        _posts_then_links,
        _html_reader,
        HTML_MAX_BYTES,
    ),
    Reader(
        "HTML: JSON-LD products the page does not show",
        _json_ld_products,
        _html_reader,
        HTML_MAX_BYTES,
    ),
    Reader("HTML: JSON-LD nested too deep", _json_ld_deep, _html_reader, HTML_MAX_BYTES),
    Reader(
        "reader text: one short line repeated",
        lambda n: _fill("x\n", n),
        drop_repeated_passages,
        HTML_MAX_BYTES,
    ),
    Reader(
        "reader text: two lines repeated in turn",
        lambda n: _fill("ab\ncd\nab\nef\n", n),
        drop_repeated_passages,
        HTML_MAX_BYTES,
    ),
    Reader("PDF: pages of text", _pdf, read_pdf, PDF_MAX_BYTES),
)


# --- Measuring ----------------------------------------------------------------------------


def _sizes(largest: int) -> Iterator[int]:
    size = START
    while size <= largest:
        yield size
        size *= 2


def _cpu(run: Callable[[Any], object], data: Any) -> float:
    """CPU seconds of one run: the best of REPEATS, each repeated to MIN_SECONDS."""
    best = float("inf")
    total = 0.0
    for _ in range(REPEATS):
        runs = 0
        started = time.process_time()
        while True:
            run(data)
            runs += 1
            spent = time.process_time() - started
            if spent >= MIN_SECONDS:
                break
        best = min(best, spent / runs)
        total += spent
        if total > REPEAT_SECONDS:
            break  # a long run varies little: the bench stays short
    return best


def _peak(run: Callable[[Any], object], data: Any) -> int:
    tracemalloc.start()
    try:
        run(data)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def measure(reader: Reader) -> tuple[list[tuple[int, float]], int, str]:
    """The CPU time at each size, the heap peak at the largest, and why the row ended."""
    times: list[tuple[int, float]] = []
    data: Any = None
    for size in _sizes(reader.largest):
        data = reader.build(size)
        seconds = _cpu(reader.run, data)
        times.append((size, seconds))
        if seconds > STOP_SECONDS:
            return times, _peak(reader.run, data), f"stopped: one run > {STOP_SECONDS:g} s"
    return times, _peak(reader.run, data), ""


def _label(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


def main() -> None:
    """Measure every reader and print the table."""
    print(f"cost per doubling, {_label(START)} to each reader's largest input; target <= {TARGET}")
    print(
        "| reader | sizes | CPU at largest | ratios per doubling | mean | worst | heap peak "
        "| verdict |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for reader in READERS:
        times, peak, stopped = measure(reader)
        ratios = [b / a for (_, a), (_, b) in pairwise(times) if a > 0]
        # Over the whole range (one noisy doubling is not a trend): the geometric mean.
        mean = (times[-1][1] / times[0][1]) ** (1 / len(ratios)) if ratios else 0.0
        verdict = "ok" if mean <= TARGET and not stopped else "OVER"
        print(
            f"| {reader.name} | {_label(times[0][0])}-{_label(times[-1][0])} "
            f"| {times[-1][1] * 1000:.1f} ms | {' '.join(f'{r:.2f}' for r in ratios)} "
            f"| {mean:.2f} | {max(ratios, default=0.0):.2f} | {peak / MIB:.1f} MiB "
            f"| {verdict}{'; ' + stopped if stopped else ''} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
