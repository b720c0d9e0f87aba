"""Throughput of the text-tool-call filter (SPEC 4a) on long answers, side by side.

Two answers of the same length: prose without tags (Markdown with inline code, a code fence,
'<' in comparisons) and prose with a tool call, XML or JSON, every ~600 characters. Each is
fed whole and in token-sized chunks of 3-8 characters (the size engines stream). Printed:
MB/s per row and each row's time per MB relative to prose fed whole, all measured in one run.
Target: at least 20 MB/s on prose fed whole. Chunked feeding is bound by the per-call cost
(about a microsecond per feed()); engines stream a few hundred characters a second.

Run: ``python -m bench.tooltext``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from gateway.loop.tooltext.filter import TextToolFilter

SIZE = 2_000_000
REPEATS = 5
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            },
        },
    }
]
PROSE = (
    "Rust 1.80 stabilised `LazyCell` and `LazyLock` [1], so a value computed on first use no\n"
    "longer needs a crate. When n < 10 the difference is small; for n > 1000 it matters [2].\n"
    "\n```rust\nstatic CONFIG: LazyLock<Config> = LazyLock::new(load);\n```\n\n"
    "The release also added exclusive ranges in patterns, which reads better in match arms.\n"
)
CALLS = (
    "<tool_call>\n<function=web_search>\n<parameter=query>\nrust lazylock\n</parameter>\n"
    "<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>\n",
    '<tool_call>\n{"name": "web_search", "arguments": {"query": "rust 1.80"}}\n</tool_call>\n',
)


def _answer(with_tags: bool) -> str:
    parts: list[str] = []
    size = 0
    i = 0
    while size < SIZE:
        piece = PROSE + (CALLS[i % 2] if with_tags else "")
        parts.append(piece)
        size += len(piece)
        i += 1
    return "".join(parts)[:SIZE]


def _chunks(text: str, whole: bool) -> list[str]:
    if whole:
        return [text]
    rng = random.Random(7)
    out: list[str] = []
    pos = 0
    while pos < len(text):
        step = rng.randint(3, 8)
        out.append(text[pos : pos + step])
        pos += step
    return out


def _filter(chunks: list[str]) -> int:
    f = TextToolFilter(TOOLS)
    calls = 0
    for chunk in chunks:
        calls += len(f.feed(chunk).calls)
    return calls + len(f.close().calls)


def _best(run: Callable[[list[str]], int], chunks: list[str]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        run(chunks)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    """Run the benchmark and print the table."""
    mb = SIZE / 1e6
    print(f"text-tool-call filter: answers of {mb:.1f} MB, best of {REPEATS}")
    print("| answer | fed | MB/s | time vs prose whole | calls found |")
    print("|---|---|---|---|---|")
    base = 0.0
    for with_tags in (False, True):
        answer = _answer(with_tags)
        for whole in (True, False):
            chunks = _chunks(answer, whole)
            seconds = _best(_filter, chunks)
            base = base or seconds
            print(
                f"| {'many tags' if with_tags else 'no tags'} "
                f"| {'whole' if whole else '3-8 chars'} | {mb / seconds:.1f} "
                f"| {seconds / base:.1f}x | {_filter(chunks)} |"
            )


if __name__ == "__main__":
    main()
