"""Hostile pages meet the reader in a production render worker: read within the limits.

Each page is 2 MiB (the body limit) of one shape a hostile site can send; the reader must
turn it into text well inside the production limits (3 s of CPU, 640 MiB), not be
stopped at them. A shape that is quadratic anywhere in the pipeline takes minutes and is
stopped, so these tests fail on quadratic code by a wide margin whatever the machine.
"""

from __future__ import annotations

import pytest

from fetcher.crawl import Page, read_page
from fetcher.extract import document_from_wire
from fetcher.workers import Stopped, WorkerPool

TWO_MIB = 2 * 1024 * 1024


def _repeat(unit: bytes) -> bytes:
    head, tail = b"<html><body>", b"</body></html>"
    return head + unit * ((TWO_MIB - len(head) - len(tail)) // len(unit)) + tail


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_repeat(b"<script>x</script>"), id="scripts"),
        pytest.param(_repeat(b"<style>x</style>"), id="styles"),
        pytest.param(_repeat(b"<style>x</style><script>y</script>"), id="styles-and-scripts"),
        pytest.param(b"<script>x</script>" * (TWO_MIB // 18), id="scripts-without-a-document"),
    ],
)
async def test_a_page_of_code_elements_is_read_within_the_limits(
    body: bytes, render_pool: WorkerPool
) -> None:
    page = Page(body, "text/html", None, "https://example.com/", "example.com")
    result = await render_pool.run(read_page, page)
    assert not isinstance(result, Stopped), result


async def test_the_largest_answer_a_page_can_give_fits_the_reply_cap(
    render_pool: WorkerPool,
) -> None:
    """A 300-character title, 12,000 characters of text and 24 links of 2,048 characters,
    all in four-byte UTF-8: well under the worker's reply cap."""
    wide = "\U0001f600"
    links = "".join(f'<a href="/{n:02d}{"x" * 2010}">l</a>' for n in range(24))
    body = f"<title>{wide * 300}</title><main><p>{wide * 13_000}</p>{links}</main>".encode()
    page = Page(body, "text/html", "utf-8", "https://example.com/", "example.com")
    result = await render_pool.run(read_page, page)
    assert isinstance(result, dict), result
    document = document_from_wire(result, url="https://example.com/", site="example.com")
    assert len(document.title) == 300
    assert len(document.text) > 11_000
    assert len(document.links) == 24
    assert max(len(link) for link in document.links) > 2000
