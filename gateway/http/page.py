"""The chat page (SPEC 2a): ``GET /`` and ``GET /static/{name}``, served from memory.

The files of ``gateway/http/static`` are read once when the app is built, with their
validators (ETag, Last-Modified) and a gzip copy when it is smaller, so a request costs a
dictionary look-up. Every page response carries the headers of `security_headers`: the
page holds an access key, so nothing but the gateway's own files may run in it or frame
it. Only files with a known type are served; anything else under ``/static/`` is a 404.

`respond` decides (pure: the status, headers and body for one asset and one request's
conditional headers); `page_routes` does the I/O (reads the folder, builds the routes).
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

#: The folder shipped with the package (``package-data`` in pyproject.toml).
STATIC = Path(__file__).parent / "static"

#: Served types, by file suffix. Other files of the folder (the vendoring record) are not
#: served.
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}

#: The page's Content-Security-Policy: its own scripts, styles, images and API only.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)

#: Smaller files are not worth a gzip copy.
_GZIP_FROM = 512


def security_headers() -> dict[str, str]:
    """The headers every page response carries.

    # Security

    Rule: the page that holds the access key runs only the gateway's own files and talks
    only to the gateway. The CSP allows scripts, styles and images from the page's own
    origin only, no inline script or style, no ``eval``, no plugins, no forms posting
    elsewhere, no ``<base>`` rewriting, and no framing (``frame-ancestors 'none'``, with
    ``X-Frame-Options: DENY`` for older browsers). ``nosniff`` stops a file being run as
    another type; ``no-referrer`` keeps the gateway's address (and anything in it) out of
    the requests of links opened from answers.

    Threat: a page or a model writing markup that the renderer let through would still
    find no way to run script, load a remote image (a beacon carrying the conversation),
    or post the key elsewhere; a hostile site cannot frame the page to click-jack it.

    Callers may rely on: the same headers on the page, every static file, 304s and 404s.

    Proven by: ``test_every_page_response_carries_the_security_headers`` and
    ``test_csp_allows_only_the_pages_own_origin_and_no_framing`` in
    ``tests/gateway/http/test_page.py``, and in a browser by
    ``test_hostile_answer_is_shown_as_text_and_nothing_runs`` in
    ``tests/page/test_browser.py``.
    """
    return {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
    }


@dataclass(frozen=True)
class Asset:
    """One served file, ready to send.

    Attributes:
        body: The file's bytes.
        gzipped: A gzip copy, when it is smaller.
        content_type: The ``Content-Type``.
        digest: The sha256 of ``body`` (hex); the ETag is made from it.
        modified: The file's modification time, to the second.
    """

    body: bytes
    gzipped: bytes | None
    content_type: str
    digest: str
    modified: datetime

    def etag(self, encoded: bool) -> str:
        """The strong ETag of one representation (the gzip copy has its own)."""
        return f'"{self.digest[:20]}{"-gz" if encoded else ""}"'


@dataclass(frozen=True)
class Reply:
    """What `respond` decided: status, headers and body."""

    status: int
    headers: dict[str, str]
    body: bytes


def make_asset(body: bytes, content_type: str, modified: datetime) -> Asset:
    """An `Asset` with its digest and, when it pays, its gzip copy."""
    gzipped = None
    if len(body) >= _GZIP_FROM:
        # mtime=0: the same file always gives the same bytes (and so the same ETag).
        packed = gzip.compress(body, compresslevel=9, mtime=0)
        if len(packed) < len(body):
            gzipped = packed
    return Asset(
        body=body,
        gzipped=gzipped,
        content_type=content_type,
        digest=hashlib.sha256(body).hexdigest(),
        modified=modified.replace(microsecond=0),
    )


def load_assets(folder: Path = STATIC) -> dict[str, Asset]:
    """Read every servable file of ``folder`` (not its subfolders), by name."""
    assets = {}
    for path in sorted(folder.iterdir()):
        content_type = TYPES.get(path.suffix)
        if content_type is None or not path.is_file():
            continue
        modified = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        assets[path.name] = make_asset(path.read_bytes(), content_type, modified)
    return assets


def _accepts_gzip(accept_encoding: str) -> bool:
    for part in accept_encoding.split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip().lower() in ("gzip", "x-gzip"):
            quality = params.strip().lower().removeprefix("q=").strip()
            return quality == "" or _quality(quality) > 0
    return False


def _quality(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


def _matches(if_none_match: str, tags: set[str]) -> bool:
    # Weak comparison (RFC 9110 13.1.2): a W/ prefix does not matter.
    for listed in if_none_match.split(","):
        tag = listed.strip().removeprefix("W/")
        if tag == "*" or tag in tags:
            return True
    return False


def _not_modified_since(if_modified_since: str, modified: datetime) -> bool:
    try:
        since = parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError):
        return False
    if since.tzinfo is None:
        return False
    return modified <= since


def respond(
    asset: Asset,
    *,
    if_none_match: str | None = None,
    if_modified_since: str | None = None,
    accept_encoding: str = "",
) -> Reply:
    """The reply to a GET of ``asset``: 200 with the body, or 304 when the client's copy
    is current. Pure.

    ``If-None-Match`` wins over ``If-Modified-Since`` when both are sent (RFC 9110
    13.2.2). The gzip copy is sent to clients that accept gzip; both copies have their own
    ETag and either one validates the client's copy, since they hold the same file.
    """
    encoded = asset.gzipped is not None and _accepts_gzip(accept_encoding)
    headers = security_headers()
    headers["ETag"] = asset.etag(encoded)
    headers["Last-Modified"] = format_datetime(asset.modified, usegmt=True)
    # Revalidate every time: a 304 costs one round trip, and an upgraded gateway's page is
    # never mixed with the old one's script.
    headers["Cache-Control"] = "no-cache"
    if asset.gzipped is not None:
        headers["Vary"] = "Accept-Encoding"
    if if_none_match is not None:
        fresh = _matches(if_none_match, {asset.etag(False), asset.etag(True)})
    else:
        fresh = if_modified_since is not None and _not_modified_since(
            if_modified_since, asset.modified
        )
    if fresh:
        return Reply(304, headers, b"")
    headers["Content-Type"] = asset.content_type
    if encoded:
        assert asset.gzipped is not None
        headers["Content-Encoding"] = "gzip"
        return Reply(200, headers, asset.gzipped)
    return Reply(200, headers, asset.body)


def not_found() -> Reply:
    """The reply for a name that is not a served file."""
    headers = security_headers()
    headers["Content-Type"] = "text/plain; charset=utf-8"
    return Reply(404, headers, b"Not found.\n")


def page_routes(folder: Path = STATIC) -> list[Route]:
    """The routes of the page: ``/`` (``index.html``) and ``/static/{name}``.

    Args:
        folder: Where the files are (the package's ``static`` folder).
    """
    assets = load_assets(folder)

    def send(asset: Asset | None, request: Request) -> Response:
        if asset is None:
            reply = not_found()
        else:
            reply = respond(
                asset,
                if_none_match=request.headers.get("if-none-match"),
                if_modified_since=request.headers.get("if-modified-since"),
                accept_encoding=request.headers.get("accept-encoding", ""),
            )
        return Response(reply.body, status_code=reply.status, headers=reply.headers)

    async def index(request: Request) -> Response:
        return send(assets.get("index.html"), request)

    async def static(request: Request) -> Response:
        return send(assets.get(request.path_params["name"]), request)

    return [
        Route("/", index, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
    ]
