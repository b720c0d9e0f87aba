"""Hostile pages: markup shaped to make a reader do much more than read.

:func:`nested_landmarks` is the page of issue 15 (item A): about 2 MiB of 2,000 nested
``<nav>`` around some 130,000 links, which cost the first reader 51 s of CPU and
~150 MB, because it walked every landmark's whole subtree.
"""

from __future__ import annotations

TWO_MIB = 2 * 1024 * 1024


def nested_landmarks(*, depth: int = 2000, size: int = TWO_MIB) -> bytes:
    """``depth`` nested ``<nav>``/``<main>`` around same-site links, ``size`` bytes at most."""
    head = b"<html><head><title>Hostile</title></head><body>"
    opening = b"<nav><main>" * (depth // 2)
    closing = b"</main></nav>" * (depth // 2)
    tail = b"<p>The end.</p></body></html>"
    links: list[bytes] = []
    used = len(head) + len(opening) + len(closing) + len(tail)
    index = 0
    while True:
        link = b'<a href="/p%d">x</a>' % index
        if used + len(link) > size:
            break
        links.append(link)
        used += len(link)
        index += 1
    return head + opening + b"".join(links) + closing + tail
