"""Hostile pages meet the reader in a production render worker: read within the limits.

Each page is 2 MiB (the body limit) of one shape a hostile site can send; the reader must
turn it into text well inside the production limits (3 s of CPU, 256 MiB), not be
stopped at them. A shape that is quadratic anywhere in the pipeline takes minutes and is
stopped, so these tests fail on quadratic code by a wide margin whatever the machine.
"""

from __future__ import annotations

import pytest

from fetcher.crawl import Page, read_page
from fetcher.html.extract import document_from_wire
from fetcher.isolation.workers import Stopped, WorkerPool
from testkit import tasks
from testkit.hostile import code_pages, widest_answer


@pytest.mark.parametrize("name", list(code_pages()))
async def test_a_page_of_code_elements_is_read_within_the_limits(
    name: str, render_pool: WorkerPool
) -> None:
    body = code_pages()[name]
    page = Page(body, "text/html", None, "https://example.com/", "example.com")
    result = await render_pool.run(read_page, page)
    assert not isinstance(result, Stopped), result


async def test_the_largest_answer_a_page_can_give_fits_the_reply_cap(
    render_pool: WorkerPool,
) -> None:
    """A 300-character title, 12,000 characters of text and 24 links of 2,048 characters,
    all in four-byte UTF-8: well under the worker's reply cap."""
    page = Page(widest_answer(), "text/html", "utf-8", "https://example.com/", "example.com")
    result = await render_pool.run(read_page, page)
    assert isinstance(result, dict), result
    document = document_from_wire(result, url="https://example.com/", site="example.com")
    assert len(document.title) == 300
    assert len(document.text) > 11_000
    assert len(document.links) == 24
    assert max(len(link) for link in document.links) > 2000


async def test_a_fresh_worker_leaves_most_of_its_address_space_to_its_page(
    render_pool: WorkerPool,
) -> None:
    # The limit is the worker's whole address space, the forkserver's imports included
    # (about 50 MiB measured by bench/memory.py); the page must keep the larger part.
    size = await render_pool.run(tasks.address_space)
    assert isinstance(size, int)
    assert 0 < size < render_pool.limits.memory_bytes // 2
