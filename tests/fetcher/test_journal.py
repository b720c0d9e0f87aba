"""Rule 8, the fetch log: the fields of every hop's record, and its silence about content."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import ssl
import struct
import tempfile
from collections.abc import Iterator
from ipaddress import ip_address
from pathlib import Path

import pytest

from fetcher.journal import (
    FetchLog,
    JournalSink,
    JsonLinesSink,
    TextSink,
    choose_sink,
    encode_journal_entry,
    fetch_record,
    journal_fields,
    loggable_address,
    text_record,
)
from fetcher.net.download import Downloader
from fetcher.net.policy import Policy
from fetcher.net.resolver import StaticResolver
from fetcher.outcome import HopRecord, TextRecord
from fetcher.reasons import Reason
from testkit.origin import Origin, html, redirect

FIELDS = {
    "time",
    "url",
    "ip",
    "status",
    "bytes",
    "ms",
    "redirects",
    "outcome",
    "reason",
    "redirect_to",
    "request_id",
}
REFUSED = HopRecord(
    url="https://intranet.example/admin?token=SECRET",
    resolved_ip=None,
    status=None,
    bytes=0,
    elapsed_ms=3,
    redirects=0,
    reason=Reason.NOT_PUBLIC,
    request_id="req-7",
)
READ = HopRecord(
    url="https://example.org/a",
    resolved_ip=ip_address("93.184.215.14"),
    status=200,
    bytes=5120,
    elapsed_ms=87,
    redirects=1,
    reason=None,
    request_id="req-7",
)


@pytest.mark.parametrize(
    ("url", "logged"),
    [
        ("https://example.org/a/b?q=secret#frag", "https://example.org/a/b"),
        ("https://user:pw@example.org/x", "https://example.org/x"),
        ("https://EXAMPLE.org:8443/P?x=1", "https://example.org:8443/P"),
        ("https://[2001:db8::1]/v6?k", "https://[2001:db8::1]/v6"),
        ("https://example.org", "https://example.org"),
        ("not an address at all ?secret", "-"),
        ("https:///no-host?secret", "-"),
        ("https://[broken/?secret", "-"),
        ("https://example.org/esc\x1bape", "https://example.org/esc?ape"),
        ("https://example.org/new\nline", "https://example.org/newline"),
        (None, None),
    ],
    ids=[
        "query-fragment",
        "userinfo",
        "port-case",
        "ipv6",
        "no-path",
        "malformed",
        "no-host",
        "bad-bracket",
        "control-char",
        "newline",
        "none",
    ],
)
def test_address_keeps_only_scheme_host_and_path(url: str | None, logged: str | None) -> None:
    assert loggable_address(url) == logged


def test_address_is_cut_to_512_characters() -> None:
    logged = loggable_address("https://example.org/" + "p" * 2000)
    assert logged is not None
    assert len(logged) == 512


def test_record_of_a_refusal_has_every_field_and_the_reason() -> None:
    record = fetch_record(REFUSED, request_id="req-7", now=1_790_000_000.5)
    assert set(record) == FIELDS
    assert record == {
        "time": "2026-09-21T14:13:20.500Z",
        "url": "https://intranet.example/admin",
        "ip": None,
        "status": None,
        "bytes": 0,
        "ms": 3,
        "redirects": 0,
        "outcome": "refused",
        "reason": "not_public",
        "redirect_to": None,
        "request_id": "req-7",
    }


def test_record_of_a_redirect_hop_names_its_trimmed_target() -> None:
    hop = HopRecord(
        url="https://example.org/old",
        resolved_ip=ip_address("2001:db8::5"),
        status=301,
        bytes=0,
        elapsed_ms=9,
        redirects=0,
        reason=None,
        redirect_to="https://example.org/new?session=SECRET",
    )
    record = fetch_record(hop, request_id="", now=0)
    assert record["outcome"] == "redirect"
    assert record["redirect_to"] == "https://example.org/new"
    assert record["ip"] == "2001:db8::5"
    assert record["request_id"] is None


def test_json_sink_writes_one_object_per_line() -> None:
    stream = io.StringIO()
    log = FetchLog(JsonLinesSink(stream), clock=lambda: 0.0)
    log.hop(REFUSED)
    log.hop(READ)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert set(first) == FIELDS | {"event"}
    assert (first["outcome"], first["reason"], first["request_id"]) == (
        "refused",
        "not_public",
        "req-7",
    )
    assert (second["ip"], second["status"], second["bytes"], second["ms"]) == (
        "93.184.215.14",
        200,
        5120,
        87,
    )
    assert "SECRET" not in stream.getvalue()


@pytest.fixture
def journal_socket() -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket standing in for journald's (short path: 108-byte limit)."""
    folder = tempfile.mkdtemp(prefix="tgj", dir="/tmp")
    path = os.path.join(folder, "journal.sock")
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(path)
    receiver.settimeout(2)
    yield receiver, path
    receiver.close()
    shutil.rmtree(folder, ignore_errors=True)


def parse_journal_entry(data: bytes) -> dict[str, str]:
    """Decodes journald's native protocol (both the text and the binary field form)."""
    fields: dict[str, str] = {}
    while data:
        line, _, rest = data.partition(b"\n")
        if b"=" in line:
            name, _, value = line.partition(b"=")
            fields[name.decode()] = value.decode()
            data = rest
        else:
            (size,) = struct.unpack("<Q", rest[:8])
            fields[line.decode()] = rest[8 : 8 + size].decode()
            data = rest[8 + size + 1 :]
    return fields


def test_journal_sink_sends_queryable_fetch_fields(
    journal_socket: tuple[socket.socket, str],
) -> None:
    receiver, path = journal_socket
    sink = JournalSink(path=path, identifier="fetcher")
    try:
        FetchLog(sink, clock=lambda: 0.0).hop(REFUSED)
    finally:
        sink.close()
    fields = parse_journal_entry(receiver.recv(65536))
    assert fields["FETCH_OUTCOME"] == "refused"
    assert fields["FETCH_REASON"] == "not_public"
    assert fields["FETCH_URL"] == "https://intranet.example/admin"
    assert fields["FETCH_REQUEST_ID"] == "req-7"
    assert fields["FETCH_BYTES"] == "0"
    assert fields["FETCH_MS"] == "3"
    assert fields["PRIORITY"] == "5"
    assert fields["SYSLOG_IDENTIFIER"] == "fetcher"
    assert fields["MESSAGE"].startswith("fetch refused https://intranet.example/admin")
    # Absent values are absent fields, so FETCH_STATUS= never matches a refusal.
    assert "FETCH_STATUS" not in fields
    assert "FETCH_IP" not in fields


def test_journal_field_with_a_newline_uses_the_binary_form() -> None:
    entry = encode_journal_entry({"MESSAGE": "two\nlines", "FETCH_OUTCOME": "ok"})
    assert entry == b"MESSAGE\n" + struct.pack("<Q", 9) + b"two\nlines\nFETCH_OUTCOME=ok\n"
    assert parse_journal_entry(entry) == {"MESSAGE": "two\nlines", "FETCH_OUTCOME": "ok"}


def test_journal_sink_falls_back_to_json_lines_when_the_journal_is_gone(tmp_path: Path) -> None:
    stream = io.StringIO()
    sink = JournalSink(path=str(tmp_path / "missing.sock"), fallback=JsonLinesSink(stream))
    try:
        FetchLog(sink).hop(READ)
    finally:
        sink.close()
    assert json.loads(stream.getvalue())["outcome"] == "ok"


def test_sink_is_the_journal_when_stderr_is_the_journal_stream(
    tmp_path: Path, journal_socket: tuple[socket.socket, str]
) -> None:
    _receiver, path = journal_socket
    with (tmp_path / "stderr").open("w") as stderr:
        status = os.fstat(stderr.fileno())
        environ = {"JOURNAL_STREAM": f"{status.st_dev}:{status.st_ino}"}
        sink = choose_sink("auto", environ=environ, stream=stderr, journal_path=path)
        assert isinstance(sink, JournalSink)
        sink.close()
        # A JOURNAL_STREAM inherited by a process whose stderr goes elsewhere does not count.
        other = {"JOURNAL_STREAM": f"{status.st_dev}:{status.st_ino + 1}"}
        assert isinstance(
            choose_sink("auto", environ=other, stream=stderr, journal_path=path), TextSink
        )
        assert isinstance(choose_sink("auto", environ={}, stream=stderr), TextSink)
        assert isinstance(
            choose_sink("json", environ=environ, stream=stderr, journal_path=path), JsonLinesSink
        )


async def test_real_fetches_log_every_hop_without_page_content(
    origin: Origin,
    test_policy: Policy,
    resolver: StaticResolver,
    client_ssl_context: ssl.SSLContext,
) -> None:
    stream = io.StringIO()
    log = FetchLog(JsonLinesSink(stream))
    origin.routes["/start"] = redirect(
        "/page?next=REDIRECT-SECRET", headers=(("Set-Cookie", "sid=COOKIE-SECRET"),)
    )
    origin.routes["/page"] = html(
        "<html><head><title>TITLE-SECRET</title></head>"
        "<body><p>BODY-SECRET text of the page</p></body></html>",
        headers=(("X-Header", "HEADER-SECRET"), ("Set-Cookie", "late=COOKIE-SECRET")),
    )
    with_user = origin.url("/x").replace("https://", "https://user:USER-SECRET@")
    observed: list[HopRecord] = []

    def observe(hop: HopRecord) -> None:
        observed.append(hop)
        log.hop(hop)

    async with Downloader(
        policy=test_policy, resolver=resolver, ssl_context=client_ssl_context, observer=observe
    ) as logged:
        for url in (origin.url("/start?token=QUERY-SECRET"), with_user):
            await logged.download(url, allowed_hosts=["origin.test"], request_id="req-9")
        await logged.download(
            origin.url("/page?token=QUERY-SECRET"),
            allowed_hosts=["origin.test"],
            request_id="req-9",
        )
        await logged.download(
            "https://not-allowed.test/?q=QUERY-SECRET",
            allowed_hosts=["origin.test"],
            request_id="req-9",
        )
    text = stream.getvalue()
    records = [json.loads(line) for line in text.splitlines()]
    assert len(records) == len(observed) >= 5
    assert [record["outcome"] for record in records[:2]] == ["redirect", "ok"]
    assert records[0]["redirect_to"] == origin.url("/page")
    assert records[2]["reason"] == "userinfo"
    assert all(set(record) == FIELDS | {"event"} for record in records)
    assert all(record["request_id"] == "req-9" for record in records)
    assert records[-1]["outcome"] == "refused"
    assert records[-1]["reason"] == "not_in_answer"
    read = [record for record in records if record["outcome"] == "ok"]
    assert read
    assert read[0]["ip"] == "127.0.0.1"
    assert read[0]["status"] == 200
    assert read[0]["bytes"] > 0
    assert read[0]["url"] == origin.url("/page")
    for secret in ("QUERY", "USER", "REDIRECT", "COOKIE", "TITLE", "BODY", "HEADER"):
        assert f"{secret}-SECRET" not in text, secret


UNREADABLE = TextRecord(
    url="https://example.org/paper.pdf?token=QUERY-SECRET",
    reader="pdf",
    bytes=48_213,
    elapsed_ms=140,
    reason=Reason.UNREADABLE,
    request_id="req-3",
)


def test_text_record_of_an_unreadable_pdf() -> None:
    record = text_record(UNREADABLE, now=1_790_000_000.5)
    assert record == {
        "time": "2026-09-21T14:13:20.500Z",
        "stage": "text",
        "url": "https://example.org/paper.pdf",
        "reader": "pdf",
        "bytes": 48_213,
        "ms": 140,
        "outcome": "failed",
        "reason": "unreadable",
        "request_id": "req-3",
    }
    fields = journal_fields(record, identifier="fetcher")
    assert fields["MESSAGE"] == (
        "text failed https://example.org/paper.pdf pdf 48213B 140ms reason=unreadable"
    )
    assert (fields["FETCH_STAGE"], fields["FETCH_REASON"], fields["PRIORITY"]) == (
        "text",
        "unreadable",
        "4",
    )


def test_only_pages_whose_text_failed_get_a_text_record() -> None:
    stream = io.StringIO()
    log = FetchLog(JsonLinesSink(stream), clock=lambda: 0.0)
    log.text(UNREADABLE)
    log.text(TextRecord("https://example.org/", "html", 900, 12, None, "req-3"))
    (line,) = stream.getvalue().splitlines()
    assert json.loads(line)["event"] == "fetch"
    assert json.loads(line)["reason"] == "unreadable"
