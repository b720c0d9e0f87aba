"""What runs inside a PDF worker: a PDF turned into text, as JSON values.

The PDF pool's task function, in a module of its own so a worker unpickling its task
imports nothing but the PDF reader (already loaded in the PDF zygote). PDFium is imported
by :func:`read_pdf` only, so the pages' zygote never maps it.
"""

from __future__ import annotations

from fetcher.isolation.zygote import Wire

__all__ = ["read_pdf"]


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
