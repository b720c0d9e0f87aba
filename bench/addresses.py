"""Rule 1's user hosts on hostile text: cost per doubling, before and after (issue 22).

The gateway reads the hosts of the addresses in the user's messages once per answer
(`gateway.tools.fetch.addresses.hosts_in_text`). Before, ``"https://" * N`` copied the rest of the
text once per scheme and ``"https://a.example/" + ")" * N`` recounted the token once per
bracket: quadratic, on the event loop. Printed for each red-team input, size doubling:
CPU seconds and peak memory (tracemalloc) of the current code, the ratio to the size
before (target: 2.3 or less), and the same for the code as it was (``_before``, kept
here only to measure against; its sizes stop early: it is quadratic).

Run: ``python -m bench.addresses``.
"""

from __future__ import annotations

import math
import re
import time
import tracemalloc
from collections.abc import Callable

from gateway.tools.fetch.addresses import MAX_ALLOWED_HOSTS, host_of, hosts_in_text

INPUTS: dict[str, Callable[[int], str]] = {
    "schemes": lambda n: "https://" * (n // 8),
    "closing brackets": lambda n: "https://a.example/" + ")" * n,
    "www names": lambda n: "www." * (n // 4),
    "many hosts": lambda n: " ".join(f"https://h{i}.example/" for i in range(n // 20)),
}
SIZES = [2**k * 1024 for k in range(4, 11)]  # 16 KiB to 1 MiB
#: The old code's sizes (quadratic: 128 KiB took it seconds).
BEFORE_SIZES = SIZES[:4]

# The code as it was before issue 22 (gateway/tools/fetch/addresses.py), to measure against.
_SCHEME_START = re.compile(r"(?<![\w.+-])https?://", re.IGNORECASE)
_WWW_START = re.compile(r"(?<![\w.@/:-])www\.", re.IGNORECASE)
_TOKEN = re.compile(r"[^\s<>\"`{}|\\^]+")
_TRAILING = frozenset(".,;:!?'\"…。、，；：！？」』】〉》")
_CLOSERS = {")": "(", "]": "[", "}": "{", "）": "（"}


def _before_trim(token: str) -> str:
    while token:
        last = token[-1]
        if last in _TRAILING or (
            last in _CLOSERS and token.count(last) > token.count(_CLOSERS[last])
        ):
            token = token[:-1]
        else:
            break
    return token


def _before(text: str) -> list[str]:
    found: list[tuple[int, str]] = []
    for pattern, prefix in ((_SCHEME_START, ""), (_WWW_START, "https://")):
        for start in pattern.finditer(text):
            token = _TOKEN.match(text, start.start())
            if token is not None:
                found.append((start.start(), prefix + _before_trim(token.group())))
    hosts = (host_of(address) for _, address in sorted(found))
    return list(dict.fromkeys(h for h in hosts if h))[:MAX_ALLOWED_HOSTS]


def _measure(function: Callable[[str], object], text: str) -> tuple[float, int]:
    """CPU seconds (best of three) and peak traced bytes of ``function(text)``."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        function(text)
        best = min(best, time.process_time() - started)
    tracemalloc.start()
    try:
        function(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return best, peak


def _rows(name: str, function: Callable[[str], object], sizes: list[int]) -> float:
    """Print one line per size; return the worst CPU ratio per doubling."""
    make = INPUTS[name]
    previous: tuple[float, int] | None = None
    worst = 0.0
    for size in sizes:
        cpu, peak = _measure(function, make(size))
        ratio = mem_ratio = ""
        if previous is not None:
            # Below a millisecond the clock's resolution decides the ratio: not counted.
            cpu_ratio = cpu / previous[0] if previous[0] > 1e-3 else float("nan")
            if not math.isnan(cpu_ratio):
                worst = max(worst, cpu_ratio)
            ratio = f"{cpu_ratio:5.2f}x"
            mem_ratio = f"{peak / max(previous[1], 1):5.2f}x"
        print(
            f"  {size // 1024:5d} KiB  {cpu * 1000:9.2f} ms {ratio:>7}"
            f"  peak {peak / 1024:9.1f} KiB {mem_ratio:>7}"
        )
        previous = (cpu, peak)
    return worst


def main() -> None:
    """Print the table for every input, after and before."""
    for name in INPUTS:
        print(f"{name}: now")
        now = _rows(name, hosts_in_text, SIZES)
        print(f"{name}: before issue 22")
        before = _rows(name, _before, BEFORE_SIZES)
        print(f"{name}: worst CPU ratio per doubling now {now:.2f}, before {before:.2f}")


if __name__ == "__main__":
    main()
