"""The chat page's serving (gateway/http/page.py): headers, validators, gzip, what is served."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest

from gateway.http.page import (
    CONTENT_SECURITY_POLICY,
    STATIC,
    TYPES,
    load_assets,
    make_asset,
    respond,
    security_headers,
)
from tests.gateway.conftest import GatewayFactory

MODIFIED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
BIG = make_asset(b"body { color: red; }\n" * 100, "text/css; charset=utf-8", MODIFIED)
SMALL = make_asset(b"<svg/>", "image/svg+xml", MODIFIED)


async def test_every_page_response_carries_the_security_headers(
    gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    async with gateway_at() as url:
        first = await http.get(f"{url}/")
        responses = [
            first,
            await http.get(f"{url}/static/app.js"),
            await http.get(f"{url}/", headers={"If-None-Match": first.headers["etag"]}),
            await http.get(f"{url}/static/no-such-file.js"),
            await http.get(f"{url}/static/vendor.json"),
        ]
    assert [r.status_code for r in responses] == [200, 200, 304, 404, 404]
    for response in responses:
        for name, value in security_headers().items():
            assert response.headers[name] == value


def test_csp_allows_only_the_pages_own_origin_and_no_framing() -> None:
    directives = dict(d.split(" ", 1) for d in CONTENT_SECURITY_POLICY.split("; "))
    assert directives["default-src"] == "'none'"
    for name in ("script-src", "style-src", "img-src", "connect-src"):
        assert directives[name] == "'self'", name
    assert directives["frame-ancestors"] == "'none'"
    assert directives["base-uri"] == "'none'"
    assert directives["form-action"] == "'none'"
    assert "unsafe" not in CONTENT_SECURITY_POLICY
    assert "http" not in CONTENT_SECURITY_POLICY


def test_page_has_no_inline_script_style_or_remote_address() -> None:
    html = (STATIC / "index.html").read_text()
    for script in re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S):
        assert script == ""
    assert "<style" not in html
    assert not re.search(r"\sstyle=", html)
    assert not re.search(r"\son[a-z]+=", html)
    assert not re.search(r"(src|href)=\"(?!/static/)", html)


def test_page_scripts_never_assign_html() -> None:
    # The renderer builds DOM nodes; no script of ours parses a string as HTML.
    for path in STATIC.glob("*.js"):
        if path.name == "markdown-it.min.js":
            continue
        code = path.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in code, f"{path.name} uses {sink}"


async def test_index_is_served_at_the_root_with_its_type(
    gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    async with gateway_at() as url:
        response = await http.get(f"{url}/", headers={"Accept-Encoding": "identity"})
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.content == (STATIC / "index.html").read_bytes()
    assert response.headers["cache-control"] == "no-cache"


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        ("app.js", "text/javascript; charset=utf-8"),
        ("app.css", "text/css; charset=utf-8"),
        ("markdown-it.min.js", "text/javascript; charset=utf-8"),
        ("markdown-it.LICENSE.txt", "text/plain; charset=utf-8"),
        ("icon.svg", "image/svg+xml"),
    ],
)
async def test_static_files_are_served_with_their_types(
    gateway_at: GatewayFactory, http: httpx.AsyncClient, name: str, content_type: str
) -> None:
    async with gateway_at() as url:
        response = await http.get(f"{url}/static/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"] == content_type
    assert response.content == (STATIC / name).read_bytes()  # httpx undoes the gzip


@pytest.mark.parametrize(
    "path",
    ["/static/", "/static/../app.py", "/static/%2e%2e%2fapp.py", "/static/vendor.json", "/app.js"],
    ids=["folder", "dot-dot", "encoded-dot-dot", "unserved-type", "outside-static"],
)
async def test_only_the_served_files_are_reachable(
    gateway_at: GatewayFactory, http: httpx.AsyncClient, path: str
) -> None:
    async with gateway_at() as url:
        response = await http.get(f"{url}{path}")
    assert response.status_code == 404


async def test_page_needs_no_key(gateway_at: GatewayFactory, http: httpx.AsyncClient) -> None:
    async with gateway_at() as url:
        page = await http.get(f"{url}/")
        models = await http.get(f"{url}/v1/models")
    assert page.status_code == 200
    assert models.status_code == 401


async def test_the_mcp_and_key_guards_leave_the_page_alone(
    gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    # The Origin check of /mcp and the key check of the API sit in front of every route;
    # the page and its files are served past both, with their own headers only.
    foreign = {"Origin": "https://evil.example"}
    async with gateway_at() as url:
        responses = [
            await http.get(f"{url}/", headers=foreign),
            await http.get(f"{url}/static/app.js", headers=foreign),
            await http.get(f"{url}/", headers={"Authorization": "Bearer wrong-key-0123456789"}),
        ]
        mcp_foreign = await http.post(f"{url}/mcp", headers=foreign, json={})
        mcp_no_key = await http.post(f"{url}/mcp", json={})
    assert [r.status_code for r in responses] == [200, 200, 200]
    for response in responses:
        for name, value in security_headers().items():
            assert response.headers[name] == value
        assert "access-control-allow-origin" not in response.headers
        assert "www-authenticate" not in response.headers
    assert mcp_foreign.status_code == 403
    assert mcp_no_key.status_code == 401


def test_only_known_types_are_loaded(tmp_path: Path) -> None:
    for name in ("a.js", "b.css", "c.json", "d.py", "e.html"):
        (tmp_path / name).write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.js").write_text("x")
    assert sorted(load_assets(tmp_path)) == ["a.js", "b.css", "e.html"]
    assert set(TYPES) == {".html", ".css", ".js", ".svg", ".txt"}


# --- Validators and gzip (pure) ---------------------------------------------------------


def test_first_get_sends_validators_and_the_body() -> None:
    reply = respond(BIG)
    assert reply.status == 200
    assert reply.body == BIG.body
    assert reply.headers["ETag"] == f'"{hashlib.sha256(BIG.body).hexdigest()[:20]}"'
    assert reply.headers["Last-Modified"] == "Fri, 02 Jan 2026 03:04:05 GMT"
    assert reply.headers["Vary"] == "Accept-Encoding"


@pytest.mark.parametrize(
    ("if_none_match", "status"),
    [
        (BIG.etag(False), 304),
        (BIG.etag(True), 304),
        (f"W/{BIG.etag(False)}", 304),
        (f'"other", {BIG.etag(False)}', 304),
        ("*", 304),
        ('"other"', 200),
        (BIG.etag(False)[:-2] + '"', 200),
        ("", 200),
    ],
    ids=["same", "gzip-copy", "weak", "in-list", "star", "other", "prefix", "empty"],
)
def test_if_none_match(if_none_match: str, status: int) -> None:
    reply = respond(BIG, if_none_match=if_none_match)
    assert reply.status == status
    assert (reply.body == b"") is (status == 304)


@pytest.mark.parametrize(
    ("since", "status"),
    [
        (format_datetime(MODIFIED, usegmt=True), 304),
        (format_datetime(MODIFIED + timedelta(seconds=1), usegmt=True), 304),
        (format_datetime(MODIFIED - timedelta(seconds=1), usegmt=True), 200),
        ("yesterday", 200),
        ("Fri, 02 Jan 2026 03:04:05", 200),
    ],
    ids=["same-second", "later", "earlier", "not-a-date", "no-zone"],
)
def test_if_modified_since(since: str, status: int) -> None:
    assert respond(BIG, if_modified_since=since).status == status


def test_if_none_match_wins_over_if_modified_since() -> None:
    reply = respond(
        BIG,
        if_none_match='"other"',
        if_modified_since=format_datetime(MODIFIED, usegmt=True),
    )
    assert reply.status == 200


@pytest.mark.parametrize(
    ("accept", "gzipped"),
    [
        ("gzip", True),
        ("gzip, deflate, br", True),
        ("br;q=1.0, gzip;q=0.8", True),
        ("GZIP", True),
        ("gzip;q=0", False),
        ("identity", False),
        ("", False),
    ],
)
def test_gzip_copy_goes_only_to_clients_that_accept_it(accept: str, gzipped: bool) -> None:
    reply = respond(BIG, accept_encoding=accept)
    assert ("Content-Encoding" in reply.headers) is gzipped
    assert reply.headers["ETag"] == BIG.etag(gzipped)
    body = gzip.decompress(reply.body) if gzipped else reply.body
    assert body == BIG.body


def test_small_files_have_no_gzip_copy() -> None:
    reply = respond(SMALL, accept_encoding="gzip")
    assert "Content-Encoding" not in reply.headers
    assert "Vary" not in reply.headers
    assert reply.body == SMALL.body


def test_not_modified_carries_no_content_type_or_body() -> None:
    reply = respond(BIG, if_none_match=BIG.etag(False), accept_encoding="gzip")
    assert reply.status == 304
    assert reply.body == b""
    assert "Content-Type" not in reply.headers
    assert reply.headers["ETag"] == BIG.etag(True)


# --- The vendored markdown-it -----------------------------------------------------------


def test_vendored_markdown_it_matches_its_record() -> None:
    record = json.loads((STATIC / "vendor.json").read_text())["markdown-it"]
    assert record["license"] == "MIT"
    assert re.fullmatch(r"\d+\.\d+\.\d+", record["version"])
    assert record["integrity"].startswith("sha512-")
    for name, digest in record["files"].items():
        assert hashlib.sha256((STATIC / name).read_bytes()).hexdigest() == digest, name
    assert set(record["files"]) == {"markdown-it.min.js", "markdown-it.LICENSE.txt"}
    assert "Permission is hereby granted" in (STATIC / "markdown-it.LICENSE.txt").read_text()


def test_readme_states_the_page_weight_within_2_kb() -> None:
    # Everything the page loads (the licence file is served, not loaded).
    loaded = [a for a in load_assets().values() if not a.content_type.startswith("text/plain")]
    raw = sum(len(a.body) for a in loaded) / 1000
    sent = sum(len(a.gzipped or a.body) for a in loaded) / 1000
    readme = (STATIC.parents[1] / "README.md").read_text()
    found = re.search(r"The page weighs (\d+) kB \((\d+) kB sent gzipped\)", readme)
    assert found is not None, "README states the page weight"
    assert abs(int(found[1]) - raw) <= 2, raw
    assert abs(int(found[2]) - sent) <= 2, sent
