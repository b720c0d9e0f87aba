"""Values a PDF reading ends in: the text of a PDF, or why there is none.

Shared by the reader that runs inside the worker process (:mod:`fetcher.pdf.text`) and the
runner that starts that process (:mod:`fetcher.pdf.worker`), so the runner never imports
PDFium. Plain values, no behaviour beyond describing themselves.
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = [
    "DESCRIPTIONS",
    "PdfFailure",
    "PdfLimits",
    "PdfProblem",
    "PdfResult",
    "PdfText",
    "is_pdf",
]

MIB = 1 << 20
# Readers accept a PDF whose header comes within its first kilobyte (junk may precede it).
_HEADER_WINDOW = 1024


def is_pdf(body: bytes) -> bool:
    """Whether a body is a PDF by its content: ``%PDF-`` within the first kilobyte."""
    return b"%PDF-" in body[:_HEADER_WINDOW]


class PdfProblem(enum.StrEnum):
    """Why a PDF gave no text."""

    NO_TEXT = "no_text"  # no text layer: scanned pages, images only
    ENCRYPTED = "encrypted"  # needs a password other than the empty one
    TRUNCATED = "truncated"  # the file ends early (cut at a size limit, interrupted)
    DAMAGED = "damaged"  # not a PDF PDFium can open
    TOO_LARGE = "too_large"  # reading it needed more memory than the limit
    TIMEOUT = "timeout"  # reading it needed more CPU or wall-clock time than the limit
    CRASHED = "crashed"  # the worker died another way, or answered nonsense


#: Human wording for each problem, for the model's tool text and the command line.
DESCRIPTIONS: dict[PdfProblem, str] = {
    PdfProblem.NO_TEXT: "the PDF has no text layer (scanned or image-only pages)",
    PdfProblem.ENCRYPTED: "the PDF is protected by a password",
    PdfProblem.TRUNCATED: "the PDF file is incomplete (cut short)",
    PdfProblem.DAMAGED: "the PDF file is damaged or not a PDF",
    PdfProblem.TOO_LARGE: "reading the PDF needed more memory than allowed",
    PdfProblem.TIMEOUT: "reading the PDF took too long",
    PdfProblem.CRASHED: "the PDF reader failed on this file",
}


@dataclasses.dataclass(frozen=True, slots=True)
class PdfText:
    """The text of a PDF, laid out for reading.

    Attributes:
        title: The document's title (its metadata, else its first heading); may be empty.
        text: Paragraphs one per line in reading order, headings marked ``#``, footnotes
            last; page furniture (running headers, footers, page numbers, margin stamps)
            removed. Not cut to any page budget: the caller cuts.
        pages: The document's page count.
        pages_read: How many pages were read (fewer than ``pages`` when a character
            limit stopped the reading early).
    """

    title: str
    text: str
    pages: int
    pages_read: int


@dataclasses.dataclass(frozen=True, slots=True)
class PdfFailure:
    """A PDF that gave no text.

    Attributes:
        problem: Why, as a machine-readable word.
        detail: One line for people and logs (never document content).
    """

    problem: PdfProblem
    detail: str


PdfResult = PdfText | PdfFailure


@dataclasses.dataclass(frozen=True, slots=True)
class PdfLimits:
    """What one PDF reading may use; the worker process is killed past any of them.

    Attributes:
        memory_bytes: Address-space limit of the worker process (``RLIMIT_AS``). PDFium
            aborts its process when an allocation fails, so this is also what stops a
            decompression bomb. The worker itself (Python and PDFium) needs about 30 MiB.
        cpu_seconds: CPU-time limit of the worker (``RLIMIT_CPU``, whole seconds).
        wall_seconds: Wall-clock deadline from the worker's start; the caller kills it then.
        char_limit: Stop reading further pages once this many characters of text were
            gathered (``None``: read every page). The fetcher passes a few times its page
            budget; the command line reads whole documents.
        max_input_bytes: Refuse larger inputs outright, without starting a worker.
        max_output_bytes: The most the caller reads of the worker's answer (JSON, text
            escaped to ASCII); a longer answer is a failure, never cut.
    """

    memory_bytes: int = 256 * MIB
    cpu_seconds: int = 5
    wall_seconds: float = 8.0
    char_limit: int | None = None
    max_input_bytes: int = 64 * MIB
    max_output_bytes: int = 16 * MIB
