"""The report of one read (the crawl of SPEC section 7, step 10).

These plain values are what the crawl returns and what the gRPC service converts to and
from protobuf; nothing outside ``fetcher.service`` and ``fetcher.client`` sees protobuf.
"""

from __future__ import annotations

import dataclasses

from fetcher.reasons import Reason

#: The most characters of an address or a detail a failure carries: a page may link to a
#: megabyte-long address, and the report must still fit in one gRPC message.
MAX_FAILURE_TEXT = 2048


@dataclasses.dataclass(frozen=True, slots=True)
class PageRead:
    """A page of the crawl that was read and turned into text."""

    requested_url: str
    final_url: str
    title: str
    text: str
    status: int
    bytes: int
    elapsed_ms: int
    depth: int


@dataclasses.dataclass(frozen=True, slots=True)
class PageFailed:
    """A page of the crawl that was refused or could not be read.

    ``url`` and ``detail`` are cut to :data:`MAX_FAILURE_TEXT` characters when made.
    """

    url: str
    reason: Reason
    detail: str
    depth: int

    def __post_init__(self) -> None:
        for name in ("url", "detail"):
            text = getattr(self, name)
            if len(text) > MAX_FAILURE_TEXT:
                object.__setattr__(self, name, text[: MAX_FAILURE_TEXT - 3] + "...")


@dataclasses.dataclass(frozen=True, slots=True)
class Report:
    """Everything one read produced, in the order pages were found.

    If the first page failed, ``pages`` is empty and ``failures`` holds only that page.
    """

    url: str
    pages: tuple[PageRead, ...]
    failures: tuple[PageFailed, ...]
    elapsed_ms: int
    #: Pages that failed through a bug of the fetcher (``internal``): for the metrics.
    internal_errors: int = dataclasses.field(default=0, compare=False)

    @property
    def first_page_failed(self) -> bool:
        """True when the start page itself could not be read."""
        return not self.pages
