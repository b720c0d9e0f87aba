"""Prometheus metrics: names and labels by the rules, exposition parsed by a real parser."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
from ipaddress import ip_address
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from fetcher.isolation.workers import WorkerPool
from fetcher.metrics import (
    HOP_OUTCOMES,
    NO_REASON,
    RPC_METHODS,
    STOP_REASONS,
    Metrics,
    MetricsEndpoint,
    exposition,
)
from fetcher.outcome import READERS, HopRecord, TextRecord
from fetcher.pdf.reader import PdfReader
from fetcher.reasons import Reason
from fetcher.report import PageFailed, PageRead, Report
from fetcher.systemd import systemd_listeners

HOST = "secret-host.example"


def hop(reason: Reason | None = None, *, ip: bool = True, redirect: bool = False) -> HopRecord:
    return HopRecord(
        url=f"https://{HOST}/path?q=1",
        resolved_ip=ip_address("93.184.215.14") if ip else None,
        status=200 if reason is None else None,
        bytes=3000 if reason is None else 0,
        elapsed_ms=250,
        redirects=0,
        reason=reason,
        redirect_to=f"https://{HOST}/next" if redirect else None,
        request_id="req-1",
    )


def filled_metrics() -> Metrics:
    metrics = Metrics(CollectorRegistry())
    metrics.observe_hop(hop())
    metrics.observe_hop(hop(redirect=True))
    metrics.observe_hop(hop(Reason.NOT_PUBLIC, ip=False))
    metrics.observe_hop(hop(Reason.TLS))
    page = PageRead(f"https://{HOST}/", f"https://{HOST}/", "t", "x", 200, 3000, 250, 0)
    failed = PageFailed(f"https://{HOST}/b", Reason.TLS, "d", 1)
    metrics.observe_report(Report(f"https://{HOST}/", (page,), (failed,), 300))
    metrics.observe_call("Read", "OK", 0.3)
    metrics.observe_call("Read", "RESOURCE_EXHAUSTED", 0.001)
    metrics.reads_in_flight.inc()
    metrics.observe_text(text("pdf", Reason.UNREADABLE))
    metrics.observe_text(text("html", None))
    return metrics


def text(reader: str, reason: Reason | None) -> TextRecord:
    return TextRecord(f"https://{HOST}/a.pdf?q=1", reader, 5000, 120, reason, "req-1")


def families(metrics: Metrics) -> dict[str, Metric]:
    """Parsed families, without the ``*_created`` gauges (the service turns those off)."""
    body, _ = exposition(metrics.registry)
    return {
        family.name: family
        for family in text_string_to_metric_families(body.decode())
        if not family.name.endswith("_created")
    }


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    body, _ = exposition(metrics.registry)
    for family in text_string_to_metric_families(body.decode()):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return found.value
    raise AssertionError(f"no sample {name} {labels}")


def test_exposition_parses_and_holds_every_metric_of_the_issue() -> None:
    found = families(filled_metrics())
    kinds = {name: family.type for name, family in found.items()}
    assert kinds == {
        "tigress_fetcher_fetches": "counter",
        "tigress_fetcher_fetch_duration_seconds": "histogram",
        "tigress_fetcher_response_bytes": "histogram",
        "tigress_fetcher_redirects": "counter",
        "tigress_fetcher_pages_per_read": "histogram",
        "tigress_fetcher_reads_in_flight": "gauge",
        "tigress_fetcher_grpc_handled": "counter",
        "tigress_fetcher_grpc_handling_seconds": "histogram",
        "tigress_fetcher_build_info": "gauge",
        "tigress_fetcher_internal_errors": "counter",
        "tigress_fetcher_texts": "counter",
    }


def test_hops_are_counted_by_outcome_and_reason() -> None:
    metrics = filled_metrics()
    total = "tigress_fetcher_fetches_total"
    assert sample(metrics, total, outcome="ok", reason="none") == 1
    assert sample(metrics, total, outcome="redirect", reason="none") == 1
    assert sample(metrics, total, outcome="refused", reason="not_public") == 1
    assert sample(metrics, total, outcome="failed", reason="tls") == 1
    assert sample(metrics, "tigress_fetcher_redirects_total") == 1
    assert sample(metrics, "tigress_fetcher_response_bytes_count") == 1
    assert sample(metrics, "tigress_fetcher_response_bytes_sum") == 3000
    assert sample(metrics, "tigress_fetcher_fetch_duration_seconds_sum", outcome="ok") == 0.25
    assert sample(metrics, "tigress_fetcher_pages_per_read_sum") == 1
    assert sample(metrics, "tigress_fetcher_reads_in_flight") == 1
    assert sample(metrics, "tigress_fetcher_grpc_handled_total", method="Read", code="OK") == 1
    assert (
        sample(
            metrics, "tigress_fetcher_grpc_handled_total", method="Read", code="RESOURCE_EXHAUSTED"
        )
        == 1
    )


def test_names_follow_prometheus_rules_and_labels_come_from_closed_sets() -> None:
    allowed_values = {
        "outcome": set(HOP_OUTCOMES),
        "reason": {str(reason) for reason in Reason} | {NO_REASON},
        "method": set(RPC_METHODS),
        "code": {"OK", "RESOURCE_EXHAUSTED"},
        "reader": set(READERS),
        "version": None,
    }
    for name, family in families(filled_metrics()).items():
        kind = family.type
        assert name.startswith("tigress_fetcher_")
        if kind == "histogram":
            assert name.endswith(("_seconds", "_bytes", "_per_read")), name
        for found in family.samples:
            if kind == "counter" and not found.name.endswith("_created"):
                assert found.name.endswith("_total"), found.name
            for label, value in found.labels.items():
                if label in ("le", "quantile"):
                    continue
                assert label in allowed_values, (name, label)
                closed = allowed_values[label]
                assert closed is None or value in closed, (name, label, value)


def test_no_address_host_or_ip_reaches_the_exposition() -> None:
    body, _ = exposition(filled_metrics().registry)
    text = body.decode()
    assert HOST not in text
    assert "93.184.215.14" not in text
    assert "req-1" not in text


def test_openmetrics_is_served_when_the_scraper_asks_for_it() -> None:
    body, content_type = exposition(
        filled_metrics().registry, "application/openmetrics-text; version=1.0.0"
    )
    assert content_type.startswith("application/openmetrics-text")
    names = {family.name for family in openmetrics_families(body.decode())}  # type: ignore[no-untyped-call]
    assert "tigress_fetcher_fetches" in names


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_exposition() -> None:
    body, _ = exposition(filled_metrics().registry)
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=body, capture_output=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_metrics_use_only_the_registry_passed_in() -> None:
    first, second = Metrics(CollectorRegistry()), Metrics(CollectorRegistry())
    first.observe_hop(hop())
    assert sample(second, "tigress_fetcher_fetches_total", outcome="ok", reason="none") == 0


async def test_metrics_endpoint_serves_a_listener_opened_elsewhere() -> None:
    # The test opens the listener, as systemd does for fetcher-metrics.socket.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    endpoint = MetricsEndpoint(filled_metrics().registry, [listener])
    await endpoint.start()
    try:
        async with httpx.AsyncClient(trust_env=False, base_url=f"http://127.0.0.1:{port}") as http:
            scraped = await http.get("/metrics")
            head = await http.head("/metrics")
    finally:
        await endpoint.stop()
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    names = {family.name for family in text_string_to_metric_families(scraped.text)}
    assert "tigress_fetcher_fetches" in names
    assert head.status_code == 200
    assert head.content == b""


async def test_metrics_endpoint_refuses_an_oversized_request() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    endpoint = MetricsEndpoint(Metrics(CollectorRegistry()).registry, [listener])
    await endpoint.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /metrics HTTP/1.1\r\n" + b"X: " + b"a" * 10_000)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 5)
        writer.close()
    finally:
        await endpoint.stop()
    # Refused and closed (EOF), never answered with the exposition.
    assert b"tigress_fetcher" not in answer


def test_render_pool_state_is_exported() -> None:
    metrics = Metrics(CollectorRegistry())
    pool = WorkerPool(workers=2)
    try:
        metrics.watch_pool(pool)
        pool.stopped["cpu"] += 1
        assert sample(metrics, "tigress_fetcher_render_workers") == 2
        assert sample(metrics, "tigress_fetcher_render_workers_busy") == 0
        assert sample(metrics, "tigress_fetcher_render_waiting") == 0
        assert sample(metrics, "tigress_fetcher_render_stops_total", why="cpu") == 1
        assert {
            why
            for why in STOP_REASONS
            if sample(metrics, "tigress_fetcher_render_stops_total", why=why) == 0
        } == {"memory", "wall", "crashed"}
    finally:
        pool.close()


def test_pages_given_to_a_reader_are_counted_by_reader_and_reason() -> None:
    metrics = filled_metrics()
    total = "tigress_fetcher_texts_total"
    assert sample(metrics, total, reader="pdf", reason="unreadable") == 1
    assert sample(metrics, total, reader="html", reason="none") == 1
    assert sample(metrics, total, reader="pdf", reason="none") == 0  # present from the start


async def test_pdf_reader_state_is_exported() -> None:
    metrics = Metrics(CollectorRegistry())
    metrics.watch_pdfs(PdfReader(workers=3))
    assert sample(metrics, "tigress_fetcher_pdf_workers") == 3
    assert sample(metrics, "tigress_fetcher_pdf_workers_busy") == 0
    assert sample(metrics, "tigress_fetcher_pdf_waiting") == 0


def test_systemd_listeners_adopt_passed_sockets_only_for_this_process(tmp_path: Path) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    fd = os.dup(listener.fileno())
    listener.close()
    environ = {"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": "1"}
    assert systemd_listeners({**environ, "LISTEN_PID": "1"}, first_fd=fd) == []
    adopted = systemd_listeners(environ, first_fd=fd)
    try:
        assert len(adopted) == 1
        assert adopted[0].fileno() == fd
        assert adopted[0].getsockname()[0] == "127.0.0.1"
        assert not os.get_inheritable(fd)
    finally:
        for found in adopted:
            found.close()
