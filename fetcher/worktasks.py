"""What runs inside a worker process: a page or a PDF turned into text, as JSON values.

The task functions the two worker pools run (``fetcher.crawl`` renders pages with
:func:`read_page`, ``fetcher.pdf.reader`` reads PDFs with :func:`read_pdf`). They live in
a module of their own that imports only the readers: a worker unpickles its task by
importing the function's module, and this one is already loaded in its zygote (the
crawl's module would bring the downloader, httpx and gRPC into every worker, and make each
fork copy twice the memory: bench/worker_start.py). PDFium is imported by
:func:`read_pdf` only, so the pages' zygote never maps it.
"""

from __future__ import annotations

import dataclasses

from fetcher.html.extract import read_document
from fetcher.isolation.zygote import Wire

__all__ = ["Page", "read_page", "read_pdf"]


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


def read_pdf(data: bytes, char_limit: int | None) -> Wire:
    """Runs in a PDF worker: the PDF's text or its problem, as JSON; the PDF reader
    checks it with ``fetcher.pdf.worker.answer_of``."""
    from fetcher.pdf.result import PdfText  # noqa: PLC0415 - with PDFium, in the PDF zygote
    from fetcher.pdf.text import read_pdf as read  # noqa: PLC0415

    result = read(data, char_limit=char_limit)
    if isinstance(result, PdfText):
        return {
            "title": result.title,
            "text": result.text,
            "pages": result.pages,
            "pages_read": result.pages_read,
        }
    return {"problem": str(result.problem), "detail": result.detail}
