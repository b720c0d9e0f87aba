"""Hostile pages: markup shaped to make a reader do much more than read.

:func:`nested_landmarks` is the page of issue 15 (item A): about 2 MiB of 2,000 nested
``<nav>`` around some 130,000 links, which cost the first reader 51 s of CPU and
~150 MB, because it walked every landmark's whole subtree. :data:`NESTED_SHAPES` are
its cousins (other elements the pruner or the link ranker treats specially),
:func:`code_pages` pages of nothing but ``<script>`` and ``<style>`` (quadratic in the
first last-resort tag stripper; JSON-LD many, deep, at the parse cap and past it),
:func:`dense_pages` pages of as many tiny elements as 2 MiB holds (the most memory a
render takes: 150 to 430 MiB, measured by ``bench/memory.py``), :func:`widest_answer`
the largest answer a page can give.
:func:`hostile_pages` is all of them, by name (``bench/hostile.py``, ``bench/memory.py``).
"""

from __future__ import annotations

TWO_MIB = 2 * 1024 * 1024

#: Opening and closing tags nested 2,000 deep around 2 MiB of links.
NESTED_SHAPES = {
    "plain <div>": (b"<div>", b"</div>"),
    "nested <nav>": (b"<nav>", b"</nav>"),
    "nested <footer>": (b"<footer>", b"</footer>"),
    "nested [hidden]": (b"<div hidden>", b"</div>"),
    "nested .share": (b'<div class="share">', b"</div>"),
    "nested [role=navigation]": (b'<div role="navigation">', b"</div>"),
}


def _links_within(used: int, size: int) -> bytes:
    """Same-site links, as many as fit in ``size`` bytes after ``used``."""
    links: list[bytes] = []
    index = 0
    while True:
        link = b'<a href="/p%d">x</a>' % index
        if used + len(link) > size:
            break
        links.append(link)
        used += len(link)
        index += 1
    return b"".join(links)


def nested(opening: bytes, closing: bytes, *, depth: int = 2000, size: int = TWO_MIB) -> bytes:
    """``depth`` nested ``opening``/``closing`` tags around links, ``size`` bytes at most."""
    head, tail = b"<html><body>", b"</body></html>"
    used = len(head) + len(tail) + depth * (len(opening) + len(closing))
    return head + opening * depth + _links_within(used, size) + closing * depth + tail


def nested_landmarks(*, depth: int = 2000, size: int = TWO_MIB) -> bytes:
    """``depth`` nested ``<nav>``/``<main>`` around same-site links, ``size`` bytes at most."""
    head = b"<html><head><title>Hostile</title></head><body>"
    opening = b"<nav><main>" * (depth // 2)
    closing = b"</main></nav>" * (depth // 2)
    tail = b"<p>The end.</p></body></html>"
    used = len(head) + len(opening) + len(closing) + len(tail)
    return head + opening + _links_within(used, size) + closing + tail


def repeated(unit: bytes, *, head: bytes = b"<html><body>", size: int = TWO_MIB) -> bytes:
    """A document of ``unit`` repeated up to ``size`` bytes, after ``head``."""
    tail = b"</body></html>"
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


_LD = b'<script type="application/ld+json">'


def code_pages() -> dict[str, bytes]:
    """Pages of code elements only, 2 MiB each."""
    return {
        "scripts": repeated(b"<script>x</script>"),
        "styles": repeated(b"<style>x</style>"),
        "styles-and-scripts": repeated(b"<style>x</style><script>y</script>"),
        "scripts-without-a-document": b"<script>x</script>" * (TWO_MIB // 18),
        # JSON-LD, which the reader parses for a product's description (fetcher.html.structured).
        "json-ld products": repeated(
            _LD + b'{"@type": "Product", "description": "' + b"Words of a product. " * 6 + b'"}'
            b"</script>"
        ),
        "json-ld nested deep": repeated(_LD + b"[" * 5_000 + b"</script>"),
        "json-ld of empty objects at the script cap": repeated(
            _LD + b"[" + b"{}," * 66_000 + b"{}]</script>"
        ),
        "json-ld one script of 2 MiB": repeated(b"{}, ", head=b"<html><body>" + _LD + b"["),
    }


#: Tiny elements, each repeated as often as 2 MiB holds (up to 700,000 elements).
_DENSE_UNITS = {
    "dense <br>": b"<br>",
    "dense <i>": b"<i>",
    "dense &amp;": b"&amp;",
    "dense <p>x": b"<p>x",
    "dense <li>x": b"<li>x",
    "dense <td>x": b"<td>x",  # in one table row
    "dense <b>x</b>": b"<b>x</b>",
    "dense <div>x</div>": b"<div>x</div>",
    "dense <h1>x</h1>": b"<h1>x</h1>",
    "dense links": b"<a href=/x>y</a>",
    "dense attributes": b"<div " + b" ".join(b"a%d=1" % n for n in range(200)) + b">x</div>",
}


def dense_pages() -> dict[str, bytes]:
    """Pages of tiny elements, 2 MiB each."""
    pages = {name: repeated(unit) for name, unit in _DENSE_UNITS.items()}
    pages["dense <td>x"] = repeated(b"<td>x", head=b"<html><body><table><tr>")
    return pages


def crowded_element(*, size: int = TWO_MIB) -> bytes:
    """One element with as many distinct attributes as ``size`` holds (about 220,000 in
    2 MiB): libxml2's attribute check is quadratic in them (issue 22, finding 11)."""
    head, tail = b"<html><body><div", b">x</div></body></html>"
    names: list[bytes] = []
    used = len(head) + len(tail)
    while used < size - 16:
        name = b" a%d=1" % len(names)
        names.append(name)
        used += len(name)
    return head + b"".join(names) + tail


def widest_answer() -> bytes:
    """A 300-character title, 13,000 characters of text and 24 links of 2,048 characters,
    all in four-byte UTF-8: the largest answer a page can give."""
    wide = "\U0001f600"
    links = "".join(f'<a href="/{n:02d}{"x" * 2010}">l</a>' for n in range(24))
    return f"<title>{wide * 300}</title><main><p>{wide * 13_000}</p>{links}</main>".encode()


def hostile_pages() -> dict[str, bytes]:
    """Every hostile page above, by name."""
    pages = {name: nested(*tags) for name, tags in NESTED_SHAPES.items()}
    pages["nested <nav><main> (issue 15)"] = nested_landmarks()
    pages["crowded element (issue 22)"] = crowded_element()
    return pages | code_pages() | dense_pages() | {"widest answer": widest_answer()}
