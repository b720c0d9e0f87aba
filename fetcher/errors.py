"""The fetcher's errors.

Downloads report what the web did as values (``fetcher.outcome``); exceptions are for
the fetcher's own seams and for configuration. The tree::

    FetcherError                 base of everything the fetcher raises on purpose
    ├── ResolveError             raised when a name does not resolve (fetcher.net.resolver)
    ├── HopError                 raised inside a download when a hop fails; carries the
    │   │                        Reason and is turned into a ``Failed`` value at once
    │   └── NotPublicError       raised when an answer is not public (rule 2); carries the
    │                            refused answer for the fetch log only
    ├── PdfWorkerError           raised when a PDF worker process cannot be started
    │                            (fetcher.pdf.worker); the crawl reports it as ``internal``
    ├── TaskError                raised when a task in a worker process raised; the error
    │                            comes back as text, never as an object (fetcher.isolation.workers)
    └── ConfigError              raised when a setting has a bad value (start-up stops)
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

from fetcher.reasons import Reason


class FetcherError(Exception):
    """Base class of the fetcher's own exceptions."""


class ResolveError(FetcherError):
    """Raised when a name does not resolve: no answer, a resolver error or a timeout."""


class HopError(FetcherError):
    """Raised inside a download when one hop fails, with the vocabulary word."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class NotPublicError(HopError):
    """Raised when an address or one of its answers is not public; ``answer`` is for the log."""

    def __init__(self, detail: str, answer: IPv4Address | IPv6Address) -> None:
        super().__init__(Reason.NOT_PUBLIC, detail)
        self.answer = answer


class PdfWorkerError(FetcherError):
    """Raised when a PDF worker process cannot be started: the fetcher's fault (no
    interpreter, no processes or memory left to the unit), never the document's."""


class TaskError(FetcherError):
    """Raised when a task in a worker process raised: its type and message, as text."""

    def __init__(self, error: str, worker_traceback: str = "") -> None:
        super().__init__(error)
        self.error = error
        self.worker_traceback = worker_traceback

    def __str__(self) -> str:
        if not self.worker_traceback:
            return self.error
        return f"{self.error}\nin the worker:\n{self.worker_traceback.rstrip()}"


class ConfigError(FetcherError):
    """Raised when a configuration value is bad; the message names the setting."""
