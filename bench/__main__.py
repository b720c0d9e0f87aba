"""``make bench``: every benchmark in one run, each printing ratios measured side by side."""

from __future__ import annotations

import importlib
import sys
import time

BENCHES = (
    "download",
    "extraction",
    "hostile",
    "memory",
    "pdf",
    "pdf_crawl",
    "grpc_hop",
    "worker_start",
    "tooltext",
    "addresses",
    "gateway_stream",
    "research",
    "scaling",
)


def main() -> None:
    """Run the benchmarks named on the command line, or all of them."""
    names = sys.argv[1:] or list(BENCHES)
    for name in names:
        print(f"\n## bench.{name}", flush=True)
        started = time.perf_counter()
        importlib.import_module(f"bench.{name}").main()
        print(f"(bench.{name} took {time.perf_counter() - started:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
