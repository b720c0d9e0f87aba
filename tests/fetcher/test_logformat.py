"""One log format for both processes (fetcher/logformat.py): a line on a terminal, journal
fields under systemd; the fetch log's terminal line carries the request id."""

from __future__ import annotations

import io
import logging
import os
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fetcher.journal import FetchLog, TextSink, choose_sink, text_line
from fetcher.logformat import (
    JournalHandler,
    configure_logging,
    line_formatter,
    log_handler,
    priority,
    record_fields,
)
from tests.fetcher.test_journal import READ, REFUSED, journal_socket, parse_journal_entry

__all__ = ["journal_socket"]  # the fixture, used by name


def record(message: str, level: int = logging.INFO, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("gateway.http.access", level, __file__, 1, message, (), None)
    for name, value in extra.items():
        setattr(made, name, value)
    return made


def test_a_terminal_line_is_time_level_logger_message() -> None:
    line = line_formatter().format(record("chat 3f2a ok"))
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3} INFO gateway\.http\.access: chat 3f2a ok", line)


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (logging.DEBUG, 7),
        (logging.INFO, 6),
        (logging.INFO + 5, 6),
        (logging.WARNING, 4),
        (logging.ERROR, 3),
        (logging.CRITICAL, 2),
        (1, 7),
    ],
    ids=["debug", "info", "between", "warning", "error", "critical", "below-debug"],
)
def test_levels_are_syslog_priorities(level: int, expected: int) -> None:
    assert priority(level) == expected


def test_journal_fields_carry_the_records_extra_fields() -> None:
    fields = record_fields(
        record("chat 3f2a", fields={"chat_outcome": "ok", "CHAT_MS": 12, "none": None}),
        identifier="gateway",
    )
    assert fields == {
        "MESSAGE": "gateway.http.access: chat 3f2a",
        "PRIORITY": "6",
        "SYSLOG_IDENTIFIER": "gateway",
        "LOGGER": "gateway.http.access",
        "CHAT_OUTCOME": "ok",
        "CHAT_MS": "12",
    }


def test_a_traceback_stays_in_the_journals_message() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        made = logging.LogRecord("gateway", logging.ERROR, __file__, 1, "bug", (), sys.exc_info())
    fields = record_fields(made, identifier="gateway")
    assert fields["MESSAGE"].startswith("gateway: bug\nTraceback")
    assert "ValueError: boom" in fields["MESSAGE"]


def test_under_the_journal_records_go_to_its_socket(
    tmp_path: Path, journal_socket: tuple[socket.socket, str]
) -> None:
    receiver, path = journal_socket
    with (tmp_path / "stderr").open("w") as stderr:
        status = os.fstat(stderr.fileno())
        environ = {"JOURNAL_STREAM": f"{status.st_dev}:{status.st_ino}"}
        handler = log_handler("fetcher", environ=environ, stream=stderr, journal_path=path)
        assert isinstance(handler, JournalHandler)
        handler.emit(record("fetch ok", fields={"FETCH_REQUEST_ID": "r-1"}))
        handler.close()
    entry = parse_journal_entry(receiver.recv(65536))
    assert entry["SYSLOG_IDENTIFIER"] == "fetcher"
    assert entry["FETCH_REQUEST_ID"] == "r-1"
    assert (tmp_path / "stderr").read_text() == ""


def test_a_journal_that_cannot_take_a_record_gets_a_line_on_stderr(tmp_path: Path) -> None:
    stderr = io.StringIO()
    handler = JournalHandler(identifier="gateway", path=str(tmp_path / "gone"), fallback=stderr)
    handler.emit(record("chat 3f2a ok"))
    handler.close()
    assert stderr.getvalue().rstrip().endswith("INFO gateway.http.access: chat 3f2a ok")


def test_elsewhere_lines_go_to_the_stream() -> None:
    stream = io.StringIO()
    handler = log_handler("gateway", environ={}, stream=stream)
    assert not isinstance(handler, JournalHandler)
    handler.emit(record("ready"))
    assert stream.getvalue().endswith("INFO gateway.http.access: ready\n")


@pytest.fixture
def root_handlers() -> Iterator[None]:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved:
        root.addHandler(handler)
    root.setLevel(level)


@pytest.mark.usefixtures("root_handlers")
def test_configure_makes_the_one_handler_the_roots_only_one() -> None:
    stream = io.StringIO()
    handler = configure_logging("fetcher", environ={}, stream=stream)
    root = logging.getLogger()
    assert root.handlers == [handler]
    assert root.level == logging.INFO
    logging.getLogger("uvicorn.error").info("Started server process")
    assert "INFO uvicorn.error: Started server process" in stream.getvalue()


def test_the_fetch_logs_terminal_line_names_the_ip_and_the_request_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="fetcher.fetch")
    log = FetchLog(TextSink(), clock=lambda: 0.0)
    log.hop(READ)
    log.hop(REFUSED)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "fetcher.fetch"]
    assert lines == [
        (
            logging.INFO,
            "fetch ok https://example.org/a 200 5120B 87ms ip=93.184.215.14 request=req-7",
        ),
        (
            logging.INFO,
            "fetch refused https://intranet.example/admin 0B 3ms reason=not_public request=req-7",
        ),
    ]
    assert "SECRET" not in caplog.text  # the query never reaches the log


def test_a_failure_line_is_a_warning_and_an_unknown_id_a_dash() -> None:
    failed = {"outcome": "failed", "url": "https://a.test/", "bytes": 0, "ms": 1, "reason": "tls"}
    redirect = {**failed, "outcome": "redirect", "reason": None, "redirect_to": "https://b.test/"}
    assert text_line(failed) == "fetch failed https://a.test/ 0B 1ms reason=tls request=-"  # type: ignore[arg-type]
    assert text_line(redirect).endswith("to=https://b.test/ request=-")  # type: ignore[arg-type]
    logger = logging.getLogger("test.fetch")
    seen: list[int] = []

    class Keep(logging.Handler):
        def emit(self, made: logging.LogRecord) -> None:
            seen.append(made.levelno)

    keep = Keep()
    logger.addHandler(keep)
    logger.setLevel(logging.INFO)
    try:
        TextSink(logger).write(failed)  # type: ignore[arg-type]
    finally:
        logger.removeHandler(keep)
    assert seen == [logging.WARNING]
    assert isinstance(choose_sink("auto", environ={}, stream=io.StringIO()), TextSink)
