"""One log format for both processes and uvicorn: a terminal line, or journal fields.

On a terminal (and anywhere that is not the journal) every record, the gateway's, the
fetcher's and uvicorn's alike, is one line::

    12:03:04.512 INFO gateway: ready: the chat page at http://127.0.0.1:8000/

Under systemd, when stderr is the journal (``JOURNAL_STREAM``, see
:func:`fetcher.journal.under_journal`), records go to journald's native socket as fields:
``MESSAGE`` (``name: message``), ``PRIORITY`` (the syslog level of the record's level),
``SYSLOG_IDENTIFIER`` (the unit's), ``LOGGER``, and whatever the record carries in its
``fields`` extra (``log.info(..., extra={"fields": {"CHAT_OUTCOME": "ok"}})``), so
``journalctl -u gateway CHAT_OUTCOME=engine_error`` selects records. The journal keeps its
own timestamps, so none is written there. A record the journal cannot take is written as a
line on stderr instead (which systemd also keeps).

The gateway may import this module (it is pure logging set-up, holding nothing of the
fetcher's), so both processes share one definition of the format.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from collections.abc import Mapping
from typing import TextIO

from fetcher.journal import JOURNAL_SOCKET, encode_journal_entry, under_journal

#: The terminal line: time of day to the millisecond, level, logger, message.
LINE_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s"
TIME_FORMAT = "%H:%M:%S"

#: Python's levels as syslog priorities (journald's ``PRIORITY``).
_PRIORITIES = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}


def line_formatter() -> logging.Formatter:
    """The terminal line's formatter (:data:`LINE_FORMAT`)."""
    return logging.Formatter(LINE_FORMAT, TIME_FORMAT)


def priority(level: int) -> int:
    """The syslog priority of a logging level (levels between two take the lower's)."""
    for threshold in sorted(_PRIORITIES, reverse=True):
        if level >= threshold:
            return _PRIORITIES[threshold]
    return 7


def record_fields(record: logging.LogRecord, *, identifier: str) -> dict[str, str]:
    """A record's journal fields (see the module docstring)."""
    fields = {
        "MESSAGE": f"{record.name}: {record.getMessage()}",
        "PRIORITY": str(priority(record.levelno)),
        "SYSLOG_IDENTIFIER": identifier,
        "LOGGER": record.name,
    }
    if record.exc_info:
        fields["MESSAGE"] += "\n" + logging.Formatter().formatException(record.exc_info)
    extra = getattr(record, "fields", None)
    if isinstance(extra, Mapping):
        for name, value in extra.items():
            if value is not None:
                fields[str(name).upper()] = str(value)
    return fields


class JournalHandler(logging.Handler):
    """Sends each record to journald's native socket as fields."""

    def __init__(self, *, identifier: str, path: str = JOURNAL_SOCKET, fallback: TextIO) -> None:
        """Prepares a datagram socket for ``path``; records it cannot send go to ``fallback``
        as terminal lines."""
        super().__init__()
        self._identifier = identifier
        self._path = path
        self._fallback = logging.StreamHandler(fallback)
        self._fallback.setFormatter(line_formatter())
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        # A journal that stalls must not stall the process: fall back instead.
        self._socket.setblocking(False)

    def emit(self, record: logging.LogRecord) -> None:
        """Sends one entry; on any socket error the fallback stream gets the line."""
        entry = encode_journal_entry(record_fields(record, identifier=self._identifier))
        try:
            self._socket.sendto(entry, self._path)
        except OSError:
            self._fallback.emit(record)

    def close(self) -> None:
        """Closes the socket."""
        with contextlib.suppress(OSError):
            self._socket.close()
        super().close()


def log_handler(
    identifier: str,
    *,
    environ: Mapping[str, str],
    stream: TextIO | None = None,
    journal_path: str = JOURNAL_SOCKET,
) -> logging.Handler:
    """The process's one log handler: journal fields under systemd, else terminal lines.

    Args:
        identifier: The journal's ``SYSLOG_IDENTIFIER`` (``gateway``, ``fetcher``).
        environ: The process environment (``JOURNAL_STREAM``).
        stream: Where lines go (stderr when ``None``).
        journal_path: journald's native socket.
    """
    stream = stream or sys.stderr
    if under_journal(environ, stream) and os.path.exists(journal_path):
        return JournalHandler(identifier=identifier, path=journal_path, fallback=stream)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(line_formatter())
    return handler


def configure_logging(
    identifier: str, *, environ: Mapping[str, str], stream: TextIO | None = None
) -> logging.Handler:
    """Makes :func:`log_handler` the root logger's only handler, at INFO.

    uvicorn's loggers must propagate to the root (``log_config=None`` in its settings) for
    its lines to take the same form.

    Returns:
        The handler installed.
    """
    handler = log_handler(identifier, environ=environ, stream=stream)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # uvicorn's own configuration, where something applied it in this process, gives its
    # loggers handlers of their own and stops them at "uvicorn": undo it, so its lines
    # reach the one handler.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.propagate = True
        logger.disabled = False  # dictConfig disables the loggers it does not name
        logger.setLevel(logging.NOTSET)  # uvicorn's log_level, if given, is set after this
    return handler
