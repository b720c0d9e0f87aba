"""Values that describe what happened to one page download and to each hop of it.

Downloads never raise for anything the web does: they return a :class:`Downloaded` or a
:class:`Failed`. Each hop (the first request and every redirect) also produces one
:class:`HopRecord`, which is what the fetch log and the metrics consume (rule 8). A page
that was downloaded and handed to a reader (HTML or PDF) produces one
:class:`TextRecord`, for the metrics and, when no text came of it, the fetch log.
"""

from __future__ import annotations

import dataclasses
from ipaddress import IPv4Address, IPv6Address

from fetcher.reasons import Reason

IPAddress = IPv4Address | IPv6Address


@dataclasses.dataclass(frozen=True, slots=True)
class Downloaded:
    """A page that was read within every limit.

    Attributes:
        requested_url: The address the caller asked for, as given.
        final_url: The normalised address of the last hop (after redirects).
        status: The final HTTP status (2xx).
        content_type: The media type, lower-cased, without parameters.
        charset: The ``charset`` parameter of ``Content-Type``, if any.
        body: The decoded body (content-encoding removed), at most the body limit.
        elapsed_ms: Wall-clock time for all hops.
        resolved_ip: The address the final hop was connected to.
        redirects: How many redirects were followed.
        cache_control: Every hop's ``Cache-Control`` values, in order (the page cache
            keeps no page that says ``no-store`` or ``private``).
    """

    requested_url: str
    final_url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes
    elapsed_ms: int
    resolved_ip: IPAddress
    redirects: int
    cache_control: tuple[str, ...] = ()

    ok = True


@dataclasses.dataclass(frozen=True, slots=True)
class Failed:
    """A page that was refused or could not be read.

    Attributes:
        requested_url: The address the caller asked for, as given.
        url: The address of the hop that failed (the requested one, or a redirect target).
        reason: The vocabulary word.
        detail: One line for people (never page content).
        elapsed_ms: Wall-clock time spent.
        resolved_ip: The address connected to, when it got that far.
        status: The HTTP status, when one was received.
        redirects: How many redirects were followed before the failure.
    """

    requested_url: str
    url: str
    reason: Reason
    detail: str
    elapsed_ms: int
    resolved_ip: IPAddress | None = None
    status: int | None = None
    redirects: int = 0

    ok = False


Outcome = Downloaded | Failed


@dataclasses.dataclass(frozen=True, slots=True)
class HopRecord:
    """One request of a download, for the fetch log and the metrics (rule 8).

    ``url`` is the normalised address; loggers must strip its query before writing it.
    ``reason`` is ``None`` for a hop that succeeded or that ended in a followed redirect.
    ``refused_ip`` is the answer that made a name ``not_public``: the operator's fetch log
    shows it, the report never does.
    """

    url: str
    resolved_ip: IPAddress | None
    status: int | None
    bytes: int
    elapsed_ms: int
    redirects: int
    reason: Reason | None
    redirect_to: str | None = None
    request_id: str = ""
    refused_ip: IPAddress | None = None

    @property
    def outcome(self) -> str:
        """``ok``, ``redirect``, ``refused`` (never connected) or ``failed``."""
        if self.reason is None:
            return "redirect" if self.redirect_to is not None else "ok"
        return "failed" if self.resolved_ip is not None else "refused"


#: The readers a downloaded body goes to: the HTML reader (also for the other text
#: types) and the PDF reader.
READERS = ("html", "pdf")


@dataclasses.dataclass(frozen=True, slots=True)
class TextRecord:
    """A downloaded page given to a reader, and what came of it.

    Attributes:
        url: The page's final address (loggers strip its query before writing it).
        reader: ``html`` or ``pdf`` (:data:`READERS`).
        bytes: The body's size.
        elapsed_ms: The time the reader took, waiting for a worker included.
        reason: ``None`` when text was made; else ``timeout``, ``too_large``,
            ``unreadable`` or ``internal``.
        request_id: The read's request id.
        stopped: Why the reader's worker was stopped (``fetcher.isolation.zygote.Stopped``:
            ``cpu``, ``memory``, ``wall``, ``confined``, ``crashed``), else ``None``;
            ``confined`` is a worker killed for a system call its filter refuses.
    """

    url: str
    reader: str
    bytes: int
    elapsed_ms: int
    reason: Reason | None
    request_id: str = ""
    stopped: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class CacheRecord:
    """How one page of a read was had from the page cache (``fetcher.pagecache``).

    Attributes:
        url: The page's normalised requested address (loggers strip its query).
        cache: ``hit``, ``shared`` or ``miss``.
        reason: ``None`` for a page read; else why it was not.
        bytes: The page's body size (0 for a failure).
        elapsed_ms: The time this read spent on the page (waiting included).
        request_id: The read's request id.
    """

    url: str
    cache: str
    reason: Reason | None
    bytes: int
    elapsed_ms: int
    request_id: str = ""
