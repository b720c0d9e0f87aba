"""What runs inside a worker process: a page or a PDF turned into text, as JSON values.

The render pool's task function (``fetcher.crawl`` renders pages with :func:`read_page`;
the PDF pool's is ``fetcher.pdf.task.read_pdf``). It lives in a module of its own that
imports only the reader: a worker unpickles its task by
importing the function's module, and this one is already loaded in its zygote (the
crawl's module would bring the downloader, httpx and gRPC into every worker, and make each
fork copy twice the memory: bench/worker_start.py).
"""

from __future__ import annotations

import dataclasses

from fetcher.html.extract import read_document
from fetcher.isolation.zygote import Wire

__all__ = ["Page", "read_page"]


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    """A downloaded page on its way to a render worker."""

    body: bytes
    content_type: str
    charset: str | None
    url: str
    site: str


def read_page(page: Page) -> Wire:
    """Runs in a render worker: the page as text (:func:`fetcher.html.extract.read_document`),
    as JSON; the crawl checks it with :func:`fetcher.html.extract.document_from_wire`."""
    return read_document(
        page.body,
        content_type=page.content_type,
        charset=page.charset,
        url=page.url,
        site=page.site,
    ).to_wire()
