"""The fetch log (rule 8): one structured record per hop of every page fetch.

A record holds the time, the address (scheme, host, port and path only), the resolved IP
(for a name refused as ``not_public``, the answer that was refused: it is kept here and
nowhere else, never in what the gateway gets),
the status, the body bytes, the milliseconds, the redirects, the outcome and reason, the
redirect target (same trimming) and the request id. Nothing else: never a query string,
user info, fragment, title, text, header or cookie, because those carry what users and
pages say, and a log is kept far longer and read by more people than a conversation.

A page that was downloaded but whose text could not be made (a PDF without readable
text, a page stopped at its reader's limits) gets one more record after its hops, with
``stage`` = ``text``: the same address, the reader (``html`` or ``pdf``), the body's
bytes, the reader's milliseconds, ``outcome`` = ``failed`` and the reason
(``unreadable``, ``timeout``, ``too_large``, ``internal``), and when the reader's worker
was stopped, why (``stopped``: ``cpu``, ``memory``, ``wall``, ``crashed``, or
``confined`` for a worker killed by its seccomp filter). Its hop record still says
``ok``: the download itself worked, and the two together say what went wrong where.

With the page cache on (``fetcher.pagecache``), each page of a read also gets a record
with ``stage`` = ``cache``: the page's address, ``cache`` = ``hit`` (kept from an earlier
read: no hop records follow), ``shared`` (another read's download at the same time) or
``miss`` (this read's own download, whose hop records are the ones above it), the
outcome (``ok`` or ``failed``) and reason, the page's bytes and this read's milliseconds.
It is logged at info level whatever the page's outcome (``cache miss <address> … not read:
reason=not_public``): the hop records say what went wrong at their own level.

Under systemd the record goes to the journal through its native protocol, one datagram
with ``FETCH_*`` fields, so ``journalctl -u fetcher FETCH_OUTCOME=refused`` or
``FETCH_REASON=not_public`` select records; elsewhere (``auto`` on a terminal) it is one
line in the processes' common log format (``fetcher.logformat``), the record's summary
with its IP and request id, so a chat's access line and its fetches read alike; the
``json`` sink writes one JSON object per line on stderr instead, for machines. The sink
never raises into a download: a journal that cannot take a record gets it as a JSON line
on stderr instead (which systemd also keeps).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Mapping
from typing import Protocol, TextIO
from urllib.parse import urlsplit

from fetcher.outcome import CacheRecord, HopRecord, TextRecord

JOURNAL_SOCKET = "/run/systemd/journal/socket"
MAX_ADDRESS_CHARS = 512
#: Journal priorities (syslog levels): info for a page read, notice for a refusal,
#: warning for a failure after connecting.
PRIORITIES = {"ok": 6, "redirect": 6, "refused": 5, "failed": 4}

FetchRecord = dict[str, str | int | None]


def _printable(text: str) -> str:
    return "".join(char if char.isprintable() else "?" for char in text)


def loggable_address(url: str | None) -> str | None:
    """Cuts an address down to what the fetch log may show.

    Args:
        url: The address of a hop (normalised by the downloader, or as the caller wrote it
            when it was refused as malformed).

    Returns:
        ``scheme://host[:port]/path``, at most 512 characters, with no user info, query
        or fragment, or ``"-"`` when no scheme and host can be found; ``None`` for ``None``.

    # Security
    Rule 8 and privacy: query strings, fragments and user info carry tokens, searches and
    names, so they never reach the log; a malformed address is not echoed at all, since it
    may be anything a page or a model wrote; control characters cannot forge log lines.
    Callers may write the result anywhere. Proved by
    ``tests/fetcher/test_journal.py::test_address_keeps_only_scheme_host_and_path``.
    """
    if url is None:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return "-"
    host = parts.netloc.rpartition("@")[2].lower()
    if not parts.scheme or not host:
        return "-"
    return _printable(f"{parts.scheme.lower()}://{host}{parts.path}")[:MAX_ADDRESS_CHARS]


def fetch_record(hop: HopRecord, *, request_id: str, now: float) -> FetchRecord:
    """Builds the fetch log's record of one hop.

    Args:
        hop: What the downloader reported for the hop.
        request_id: The read's request id (empty when unknown).
        now: The time of the record (seconds since the epoch).

    Returns:
        The record's fields by name; absent values are ``None``.

    # Security
    Rule 8: only the fields listed in this module's docstring, built from the
    ``HopRecord``, which holds no page content, title, header or cookie; both addresses go
    through :func:`loggable_address`. Proved by ``tests/fetcher/test_journal.py``
    (``test_real_fetches_log_every_hop_without_page_content``).
    """
    stamp = datetime.datetime.fromtimestamp(now, tz=datetime.UTC)
    return {
        "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "url": loggable_address(hop.url),
        "ip": str(ip) if (ip := hop.resolved_ip or hop.refused_ip) is not None else None,
        "status": hop.status,
        "bytes": hop.bytes,
        "ms": hop.elapsed_ms,
        "redirects": hop.redirects,
        "outcome": hop.outcome,
        "reason": str(hop.reason) if hop.reason is not None else None,
        "redirect_to": loggable_address(hop.redirect_to),
        "request_id": _printable(request_id)[:64] or None,
    }


def text_record(text: TextRecord, *, now: float) -> FetchRecord:
    """Builds the fetch log's record of a downloaded page whose text could not be made.

    Args:
        text: What the crawl reported for the page.
        now: The time of the record (seconds since the epoch).

    Returns:
        The record's fields by name (see the module docstring).

    # Security
    Rule 8: the same discipline as :func:`fetch_record`: the address through
    :func:`loggable_address`, and nothing of the document (no title, text or detail: a
    PDF reader's detail comes from the process that parsed the document). Proved by
    ``tests/fetcher/test_journal.py::test_text_record_of_an_unreadable_pdf``.
    """
    stamp = datetime.datetime.fromtimestamp(now, tz=datetime.UTC)
    record: FetchRecord = {
        "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "stage": "text",
        "url": loggable_address(text.url),
        "reader": text.reader,
        "bytes": text.bytes,
        "ms": text.elapsed_ms,
        "outcome": "failed",
        "reason": str(text.reason) if text.reason is not None else None,
        "request_id": _printable(text.request_id)[:64] or None,
    }
    if text.stopped is not None:
        record["stopped"] = text.stopped
    return record


def cache_record(page: CacheRecord, *, now: float) -> FetchRecord:
    """Builds the fetch log's record of how a page was had from the page cache.

    Args:
        page: What the crawl reported for the page.
        now: The time of the record (seconds since the epoch).

    Returns:
        The record's fields by name (see the module docstring).

    # Security
    Rule 8: the same discipline as :func:`fetch_record`: the address through
    :func:`loggable_address`, and nothing of the page kept (no title, text or links).
    Proved by ``tests/fetcher/test_crawl_cache.py::test_the_fetch_log_marks_each_page``.
    """
    stamp = datetime.datetime.fromtimestamp(now, tz=datetime.UTC)
    return {
        "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "stage": "cache",
        "cache": page.cache,
        "url": loggable_address(page.url),
        "bytes": page.bytes,
        "ms": page.elapsed_ms,
        "outcome": "ok" if page.reason is None else "failed",
        "reason": str(page.reason) if page.reason is not None else None,
        "request_id": _printable(page.request_id)[:64] or None,
    }


def _is_cache(record: FetchRecord) -> bool:
    return record.get("stage") == "cache"


def _priority(record: FetchRecord) -> int:
    """A cache record is news about the cache, not the page: info, whatever the page's
    outcome, which its hop records (or the earlier read's) already say at their level."""
    return 6 if _is_cache(record) else PRIORITIES.get(str(record["outcome"]), 5)


def summary(record: FetchRecord) -> str:
    """The record in one human line, the journal's ``MESSAGE``.

    A cache record reads ``cache miss <address> …``, with the reason when the page was not
    read: not ``cache failed``, which would read as a fault of the cache.
    """
    if _is_cache(record):
        parts = ["cache", str(record["cache"]), str(record["url"])]
        parts += [f"{record['bytes']}B", f"{record['ms']}ms"]
        if record["reason"] is not None:
            parts.append(f"not read: reason={record['reason']}")
        return " ".join(parts)
    parts = [str(record.get("stage") or "fetch"), str(record["outcome"]), str(record["url"])]
    if record.get("reader") is not None:
        parts.append(str(record["reader"]))
    if record.get("status") is not None:
        parts.append(str(record["status"]))
    parts += [f"{record['bytes']}B", f"{record['ms']}ms"]
    if record["reason"] is not None:
        parts.append(f"reason={record['reason']}")
    return " ".join(parts)


class Sink(Protocol):
    """Where fetch records go."""

    def write(self, record: FetchRecord) -> None:
        """Writes one record; never raises for I/O trouble."""


#: The logger of the fetch log's terminal lines (the process's one handler formats them).
FETCH_LOGGER = "fetcher.fetch"
#: The terminal line's logging level by outcome, like the journal's priorities.
_LEVELS = {"ok": logging.INFO, "redirect": logging.INFO, "refused": logging.INFO}


def text_line(record: FetchRecord) -> str:
    """The record as the terminal's fetch line: the summary, the IP and the request id."""
    parts = [summary(record)]
    if record.get("ip") is not None:
        parts.append(f"ip={record['ip']}")
    if record.get("redirect_to") is not None:
        parts.append(f"to={record['redirect_to']}")
    parts.append(f"request={record.get('request_id') or '-'}")
    return " ".join(parts)


class TextSink:
    """One line per record through the ``fetcher.fetch`` logger (the common log format)."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        """Writes through ``logger`` (``fetcher.fetch`` when ``None``)."""
        self._logger = logger or logging.getLogger(FETCH_LOGGER)

    def write(self, record: FetchRecord) -> None:
        """Logs the record's line; logging handles its own I/O errors."""
        outcome = str(record["outcome"])
        level = logging.INFO if _is_cache(record) else _LEVELS.get(outcome, logging.WARNING)
        self._logger.log(level, "%s", text_line(record))


class JsonLinesSink:
    """One JSON object per line on a text stream (stderr outside systemd)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        """Uses ``stream``, or the process's stderr at each write when ``None``."""
        self._stream = stream

    def write(self, record: FetchRecord) -> None:
        """Writes the record as one line; a closed or full stream loses it silently."""
        line = json.dumps({"event": "fetch", **record}, ensure_ascii=False, sort_keys=False)
        stream = self._stream or sys.stderr
        with contextlib.suppress(OSError, ValueError):
            stream.write(line + "\n")
            stream.flush()


def journal_fields(record: FetchRecord, *, identifier: str) -> dict[str, str]:
    """The journal entry's fields: ``MESSAGE``, ``PRIORITY``, identifier and ``FETCH_*``."""
    fields = {
        "MESSAGE": summary(record),
        "PRIORITY": str(_priority(record)),
        "SYSLOG_IDENTIFIER": identifier,
    }
    for name, value in record.items():
        if value is not None:
            fields["FETCH_" + name.upper()] = str(value)
    return fields


def encode_journal_entry(fields: Mapping[str, str]) -> bytes:
    """Encodes fields in journald's native protocol (``NAME=value`` lines).

    A value holding a newline uses the binary form: the name, a newline, the value's
    length as a little-endian 64-bit number, the value, a newline.
    """
    out = bytearray()
    for name, value in fields.items():
        data = value.encode("utf-8", "replace")
        if b"\n" in data:
            out += name.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
        else:
            out += name.encode() + b"=" + data + b"\n"
    return bytes(out)


class JournalSink:
    """Sends each record to journald's native socket, with queryable ``FETCH_*`` fields."""

    def __init__(
        self,
        *,
        path: str = JOURNAL_SOCKET,
        identifier: str = "fetcher",
        fallback: Sink | None = None,
    ) -> None:
        """Prepares a datagram socket for ``path``; records that fail go to ``fallback``."""
        self._path = path
        self._identifier = identifier
        self._fallback = fallback or JsonLinesSink()
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        # A journal that stalls must not stall downloads: drop to the fallback instead.
        self._socket.setblocking(False)

    def write(self, record: FetchRecord) -> None:
        """Sends one entry; on any socket error the fallback gets the record."""
        entry = encode_journal_entry(journal_fields(record, identifier=self._identifier))
        try:
            self._socket.sendto(entry, self._path)
        except OSError:
            self._fallback.write(record)

    def close(self) -> None:
        """Closes the socket."""
        self._socket.close()


def under_journal(environ: Mapping[str, str], stream: TextIO) -> bool:
    """True when ``stream`` is connected to the journal (systemd's ``JOURNAL_STREAM``).

    systemd sets ``JOURNAL_STREAM=dev:inode`` for the service's stdout/stderr; it counts
    only if it still names ``stream`` (a child with redirected stderr inherits the variable).
    """
    value = environ.get("JOURNAL_STREAM", "")
    device, _, inode = value.partition(":")
    if not device.isdigit() or not inode.isdigit():
        return False
    try:
        status = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return False
    return status.st_dev == int(device) and status.st_ino == int(inode)


def choose_sink(
    mode: str,
    *,
    environ: Mapping[str, str],
    stream: TextIO | None = None,
    journal_path: str = JOURNAL_SOCKET,
) -> Sink:
    """Picks the fetch log's sink.

    Args:
        mode: ``journal``, ``json``, or ``auto`` (the journal when stderr is the journal
            and its socket exists, else lines in the common log format).
        environ: The process environment.
        stream: The stderr stream (``sys.stderr`` when ``None``).
        journal_path: journald's native socket.

    Returns:
        The sink to use.
    """
    stream = stream or sys.stderr
    if mode == "json":
        return JsonLinesSink(stream)
    if mode == "journal" or (under_journal(environ, stream) and os.path.exists(journal_path)):
        return JournalSink(path=journal_path, fallback=JsonLinesSink(stream))
    return TextSink()


class FetchLog:
    """Writes one record per hop; the downloader's observer calls :meth:`hop`."""

    def __init__(self, sink: Sink, *, clock: Callable[[], float] | None = None) -> None:
        """Writes to ``sink``, stamping records with ``clock`` (``time.time`` by default)."""
        self._sink = sink
        self._clock = clock or time.time

    def hop(self, hop: HopRecord) -> None:
        """Logs one hop of a download."""
        self._sink.write(fetch_record(hop, request_id=hop.request_id, now=self._clock()))

    def text(self, text: TextRecord) -> None:
        """Logs a downloaded page whose text could not be made; text that was made is not
        logged (its hop record says everything)."""
        if text.reason is not None:
            self._sink.write(text_record(text, now=self._clock()))

    def cache(self, page: CacheRecord) -> None:
        """Logs how a page of a read was had from the page cache."""
        self._sink.write(cache_record(page, now=self._clock()))
