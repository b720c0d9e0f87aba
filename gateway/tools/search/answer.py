"""What one SearXNG answer means, as plain values. Pure: decides, never does I/O.

``gateway.tools.search.searxng`` hands over what came back (status, content type, body, the
``Server-Timing`` header); :func:`read_answer` turns it into a :class:`SearchAnswer` or a
:class:`SearchFailure`. The facts it relies on are in ``shared/notes/searxng.md`` and the
recorded answers in ``tests/fixtures/searxng/``:

- two result shapes share one list (legacy dicts with 14 keys, typed results with 23):
  every field is read with a default;
- ``publishedDate`` is null, naive (read as UTC) or has an offset; ``pubdate`` is the
  fallback;
- ``content`` may hold raw HTML and entities;
- ``unresponsive_engines`` is ``[[name, reason], ...]``, deduplicated here by name;
- which engines answered is said only by ``Server-Timing`` (``total_<i>_<engine>``), the
  one way to tell "no hits" from "no engine was asked".
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from html.parser import HTMLParser

from gateway import prompts

#: Characters kept of a snippet and of a title: enough to judge a result, short enough
#: that a round of results fits a small model's context.
SNIPPET_CHARS = 400
TITLE_CHARS = 200
#: Characters kept of SearXNG's own explanation in a failure sentence.
DETAIL_CHARS = 200
#: Instant answers (calculator, hash...) kept per search.
MAX_INSTANT_ANSWERS = 3

_TIMING_ENGINE = re.compile(r"total_\d+_(.+)")
_SPACE = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
# A lone surrogate: JSON may escape one ("\ud800"), UTF-8 cannot carry it.
_SURROGATE = re.compile("[\ud800-\udfff]")


class FailureCause(enum.StrEnum):
    """Why a search got no answer from SearXNG (the metric label of SearXNG errors)."""

    UNREACHABLE = "unreachable"  # no connection: refused, name unknown
    TIMEOUT = "timeout"  # no complete answer within the gateway's timeout
    BROKEN = "broken"  # the connection broke or the HTTP was not valid
    BAD_REQUEST = "bad_request"  # 400: SearXNG rejected a parameter
    JSON_DISABLED = "json_disabled"  # 403: json is not in search.formats
    RATE_LIMITED = "rate_limited"  # 429: SearXNG's limiter refused the gateway
    SERVER_ERROR = "server_error"  # 5xx: an error inside SearXNG
    HTTP_STATUS = "http_status"  # another status (302 from the limiter, 404 wrong URL)
    CONTENT_TYPE = "content_type"  # 200, but not JSON by its Content-Type
    NOT_JSON = "not_json"  # the body is not SearXNG's JSON


@dataclass(frozen=True)
class SearchFailure:
    """A search that got no usable answer.

    Attributes:
        cause: Why, as a vocabulary word.
        message: One sentence naming the cause and what the operator should change.
        status: The HTTP status, when one came back.
    """

    cause: FailureCause
    message: str
    status: int | None = None


class Coverage(enum.StrEnum):
    """What an answer says about the engines, as far as SearXNG's answer allows."""

    RESULTS = "results"  # at least one result
    NO_HITS = "no_hits"  # engines answered and found nothing
    ALL_FAILED = "all_failed"  # no engine answered; the ones asked all failed
    NONE_ASKED = "none_asked"  # no engine answered and none failed: none was asked
    UNKNOWN = "unknown"  # nothing found, and SearXNG did not say which engines answered


@dataclass(frozen=True)
class SearchHit:
    """One search result, cleaned.

    Attributes:
        url: The address as SearXNG gave it (http or https only).
        title: Plain text, one line.
        snippet: Plain text, one line, cut to :data:`SNIPPET_CHARS`.
        published: When SearXNG knows it; naive dates are read as UTC.
    """

    url: str
    title: str
    snippet: str
    published: datetime | None = None


@dataclass(frozen=True)
class EngineTrouble:
    """An engine SearXNG lists as unresponsive, with its reason (English with locale=en)."""

    name: str
    reason: str


@dataclass(frozen=True)
class SearchAnswer:
    """One SearXNG answer (HTTP 200 with its JSON).

    Attributes:
        hits: At most the configured number of results, in SearXNG's order.
        unresponsive: Engines that failed or are suspended, one per name.
        answered: Engines that answered (from ``Server-Timing``), or None when the header
            is absent (a proxy may strip it).
        instant_answers: Plain-text answers of SearXNG's answerers and plugins.
    """

    hits: tuple[SearchHit, ...]
    unresponsive: tuple[EngineTrouble, ...] = ()
    answered: frozenset[str] | None = None
    instant_answers: tuple[str, ...] = ()

    @property
    def coverage(self) -> Coverage:
        """Results, or which kind of nothing."""
        if self.hits:
            return Coverage.RESULTS
        if self.answered is None:
            return Coverage.UNKNOWN
        if self.answered:
            return Coverage.NO_HITS
        return Coverage.ALL_FAILED if self.unresponsive else Coverage.NONE_ASKED


def read_answer(
    status: int,
    content_type: str,
    body: bytes,
    server_timing: str | None,
    *,
    limit: int,
    origin: str,
) -> SearchAnswer | SearchFailure:
    """Read one answer of ``GET /search?format=json``.

    Args:
        status: The HTTP status.
        content_type: The Content-Type header ("" when absent).
        body: The whole body.
        server_timing: The Server-Timing header, or None.
        limit: The most results kept.
        origin: SearXNG's base URL, named in failure sentences.

    Returns:
        The answer, or a failure naming its cause; never raises.
    """
    if status != 200:
        return _status_failure(status, body, origin)
    media_type = content_type.partition(";")[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        return failure(
            FailureCause.CONTENT_TYPE, origin=origin, status=status, detail=media_type or "none"
        )
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return failure(FailureCause.NOT_JSON, origin=origin, status=status, detail="not JSON")
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        return failure(
            FailureCause.NOT_JSON, origin=origin, status=status, detail="no results list"
        )
    hits: list[SearchHit] = []
    for item in document["results"]:
        hit = _hit(item)
        if hit is not None and len(hits) < limit:
            hits.append(hit)
    return SearchAnswer(
        hits=tuple(hits),
        unresponsive=_unresponsive(document.get("unresponsive_engines")),
        answered=answered_engines(server_timing),
        instant_answers=_instant_answers(document.get("answers")),
    )


def failure(
    cause: FailureCause,
    *,
    origin: str,
    status: int | None = None,
    detail: str = "",
    timeout: float = 0.0,
) -> SearchFailure:
    """A failure with its sentence (wording in ``gateway.prompts``)."""
    template = prompts.SEARXNG_FAILURES[cause.value]
    detail = one_line(detail, DETAIL_CHARS)
    status_detail = f"HTTP {status}" if status is not None else "no status"
    message = template.format(
        url=origin,
        status_detail=f"{status_detail}: {detail}" if detail else status_detail,
        detail=detail or "no detail",
        seconds=f"{timeout:g}",
    )
    return SearchFailure(cause=cause, message=message, status=status)


def _status_failure(status: int, body: bytes, origin: str) -> SearchFailure:
    detail = _error_text(body)
    if status == 400:
        return failure(FailureCause.BAD_REQUEST, origin=origin, status=status, detail=detail)
    if status == 403:
        return failure(FailureCause.JSON_DISABLED, origin=origin, status=status)
    if status == 429:
        return failure(FailureCause.RATE_LIMITED, origin=origin, status=status)
    if 500 <= status <= 599:
        return failure(FailureCause.SERVER_ERROR, origin=origin, status=status, detail=detail)
    return failure(FailureCause.HTTP_STATUS, origin=origin, status=status)


def _error_text(body: bytes) -> str:
    """SearXNG's ``{"error": "..."}``, or the body's first line."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body[:DETAIL_CHARS].decode("utf-8", "replace").strip().partition("\n")[0]
    if isinstance(document, dict) and isinstance(document.get("error"), str):
        return str(document["error"])
    return ""


def _hit(item: object) -> SearchHit | None:
    if not isinstance(item, dict):
        return None
    url = item.get("url")
    if not isinstance(url, str) or not _usable_url(url):
        return None
    return SearchHit(
        url=url,
        title=plain_text(_str(item.get("title")), TITLE_CHARS),
        snippet=plain_text(_str(item.get("content")), SNIPPET_CHARS),
        published=published_date(item.get("publishedDate")) or published_date(item.get("pubdate")),
    )


def _usable_url(url: str) -> bool:
    """An http(s) address on one line: the model can cite it and the fetcher can try it."""
    scheme, sep, rest = url.partition("://")
    return (
        bool(sep)
        and scheme.lower() in ("http", "https")
        and bool(rest)
        and _SPACE_OR_CONTROL.search(url) is None
        and _SURROGATE.search(url) is None
    )


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def published_date(value: object) -> datetime | None:
    """``publishedDate`` (or ``pubdate``) in any form SearXNG sends, as an aware datetime.

    Accepts ``datetime.isoformat()`` with or without offset and microseconds, and
    ``%Y-%m-%d %H:%M:%S%z`` (``pubdate``). Naive values are read as UTC; the offset, when
    present, is kept, so ``.date()`` is the date the publisher wrote. Anything else: None.
    """
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        try:
            parsed = datetime.strptime(text, "%Y-%m-%d %H:%M:%S%z")
        except ValueError:
            return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _unresponsive(value: object) -> tuple[EngineTrouble, ...]:
    """``[[name, reason], ...]``, once per engine (a timing race can list one twice)."""
    if not isinstance(value, list):
        return ()
    seen: dict[str, EngineTrouble] = {}
    for entry in value:
        if not isinstance(entry, list | tuple) or len(entry) != 2:
            continue
        name, reason = entry
        if not isinstance(name, str) or not isinstance(reason, str):
            continue
        name = one_line(name, 60)
        if name and name not in seen:
            seen[name] = EngineTrouble(name, one_line(reason, 100))
    return tuple(seen.values())


def _instant_answers(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    answers: list[str] = []
    for entry in value:
        text = entry.get("answer") if isinstance(entry, dict) else None
        if isinstance(text, str) and (clean := plain_text(text, SNIPPET_CHARS)):
            answers.append(clean)
    return tuple(answers[:MAX_INSTANT_ANSWERS])


def answered_engines(server_timing: str | None) -> frozenset[str] | None:
    """The engines that answered, from SearXNG's ``Server-Timing`` header.

    SearXNG lists ``total_<i>_<engine>;dur=...`` for every engine that answered, even with
    no hits, and nothing for failed, suspended or skipped ones. A header without SearXNG's
    overall ``total`` entry is not SearXNG's (or was rewritten): None, as when absent.
    """
    if server_timing is None:
        return None
    names = [entry.partition(";")[0].strip() for entry in server_timing.split(",")]
    if "total" not in names:
        return None
    return frozenset(m.group(1) for name in names if (m := _TIMING_ENGINE.fullmatch(name)))


class _TextCollector(HTMLParser):
    """Collects the text of an HTML fragment; entities decoded, scripts and styles dropped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skipping += 1
        elif tag in ("br", "p", "div", "li"):
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skipping:
            self._skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def plain_text(value: str, max_chars: int) -> str:
    """HTML stripped, entities decoded, whitespace folded to single spaces, cut at a word.

    One line always: a title or snippet cannot start a line of its own in the tool text,
    so it cannot pass itself off as another numbered result.
    """
    if "<" in value or "&" in value:
        collector = _TextCollector()
        collector.feed(value)
        collector.close()
        value = "".join(collector.parts)
    return one_line(value, max_chars)


def one_line(value: str, max_chars: int) -> str:
    """Whitespace (line breaks included) folded to single spaces, cut to ``max_chars``."""
    text = _SPACE.sub(" ", value).strip()
    # Control characters (Cc: C0, DEL, C1) carry no meaning for the model and could hide
    # text.
    text = _CONTROL.sub("", text)
    # A lone surrogate (escaped in SearXNG's JSON, from whatever an engine or page held)
    # cannot be written as UTF-8: an MCP result holding one could not be sent at all, and
    # engines that check their JSON (llama-server) refuse a request holding one.
    text = _SURROGATE.sub("\ufffd", text)
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    if " " in cut[max_chars // 2 :]:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip() + "…"
