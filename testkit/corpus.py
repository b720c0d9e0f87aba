"""The shared extraction corpus and its scores, for the quality test and the benchmark.

The corpus (``../shared/corpus/extraction`` beside the repository, see its README) holds real
pages with the article text people (``aeb``) or Readability.js (``readability``) found in them.
The scores (``shared/notes/extraction.md``) count words as a bag of lower-cased ``\\w+`` tokens:

* *budget recall*: the share of the article's words found in the first 12,000 characters of a
  reader's text;
* *budget precision*: the share of the words in those 12,000 characters that are article words;
* the *oracle*: the budget recall of the article text itself, whitespace collapsed. Long
  articles do not fit in 12,000 characters, so it is the ceiling for each page.

Each page also belongs to one of two fixed halves (``dev`` or ``check``, by a hash of its id),
so a change tuned on one half can be confirmed on the other.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import hashlib
import json
import re
from pathlib import Path

from lxml import etree
from lxml.html import document_fromstring

__all__ = [
    "CORPUS_ROOT",
    "HALVES",
    "Page",
    "budget_precision",
    "budget_recall",
    "load_pages",
    "oracle_text",
    "tokens",
]

CORPUS_ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "extraction"
BUDGET = 12_000
HALVES = ("dev", "check")

_TOKEN = re.compile(r"\w+")
_BLOCKS = frozenset(
    [
        "address",
        "article",
        "blockquote",
        "br",
        "dd",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "footer",
        "hr",
        "li",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "td",
        "th",
        "tr",
        "ul",
    ]
)


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    """One corpus page: its HTML bytes, the words of its article, and that article's own score.

    Attributes:
        id: The manifest id (``aeb/<sha>`` or ``rdb/<name>``).
        set: ``aeb`` or ``readability``.
        url: The page's address.
        html: The page as served (UTF-8).
        truth: The article's tokens.
        oracle: The budget recall of the article text itself.
        half: ``dev`` or ``check``: a fixed split of the pages in two.
    """

    id: str
    set: str
    url: str
    html: bytes
    truth: collections.Counter[str]
    oracle: float
    half: str


def tokens(text: str) -> collections.Counter[str]:
    """Count the lower-cased ``\\w+`` tokens of a text."""
    return collections.Counter(_TOKEN.findall(text.lower()))


def _matched(truth: collections.Counter[str], got: collections.Counter[str]) -> int:
    return sum(min(count, got[word]) for word, count in truth.items())


def budget_recall(truth: collections.Counter[str], text: str, budget: int = BUDGET) -> float:
    """Share of the truth's tokens (as a bag) found in the first ``budget`` characters of text.

    Args:
        truth: The article's tokens.
        text: A reader's output.
        budget: How many leading characters of ``text`` count.

    Returns:
        A value in [0, 1]; 1.0 for an empty truth.
    """
    total = sum(truth.values())
    if not total:
        return 1.0
    return _matched(truth, tokens(text[:budget])) / total


def budget_precision(truth: collections.Counter[str], text: str, budget: int = BUDGET) -> float:
    """Share of the tokens in the first ``budget`` characters of text that are article tokens.

    Args:
        truth: The article's tokens.
        text: A reader's output.
        budget: How many leading characters of ``text`` count.

    Returns:
        A value in [0, 1]; 0.0 for a text without tokens.
    """
    got = tokens(text[:budget])
    total = sum(got.values())
    return _matched(truth, got) / total if total else 0.0


def oracle_text(truth_text: str) -> str:
    """The article text as the ideal reader would return it: one line per line, spaces collapsed."""
    lines = (" ".join(line.split()) for line in truth_text.splitlines())
    return "\n".join(line for line in lines if line)


def _half(page_id: str) -> str:
    return HALVES[hashlib.sha256(page_id.encode()).digest()[-1] % 2]


def _html_text(markup: str) -> str:
    """The text of truth HTML, with a space at every block edge so words never merge."""
    root = document_fromstring(markup)
    parts: list[str] = []
    for event, element in etree.iterwalk(root, events=("start", "end")):
        block = isinstance(element.tag, str) and element.tag in _BLOCKS
        if event == "start":
            if block:
                parts.append(" ")
            if isinstance(element.tag, str) and element.text:
                parts.append(element.text)
        else:
            if block:
                parts.append(" ")
            if element.tail and element is not root:
                parts.append(element.tail)
    return "".join(parts)


def load_pages(root: Path = CORPUS_ROOT, *, synthetic: bool = False) -> list[Page]:
    """Read the corpus manifest and every page with its truth tokens.

    Args:
        root: The corpus folder.
        synthetic: Whether to include the tiny hand-written readability fixtures.

    Returns:
        The pages in manifest order.
    """
    truth_files: dict[str, dict[str, dict[str, str]]] = {}
    pages: list[Page] = []
    with (root / "manifest.jsonl").open(encoding="utf-8") as manifest:
        rows = [json.loads(line) for line in manifest if line.strip()]
    for row in rows:
        if row["synthetic"] and not synthetic:
            continue
        html = gzip.decompress((root / row["html"]).read_bytes())
        path, _, key = row["truth"].partition("#")
        if row["truth_kind"] == "text":
            if path not in truth_files:
                truth_files[path] = json.loads(gzip.decompress((root / path).read_bytes()))
            truth_text = truth_files[path][key]["articleBody"]
        else:
            markup = gzip.decompress((root / path).read_bytes()).decode("utf-8", "replace")
            truth_text = _html_text(markup)
        truth = tokens(truth_text)
        oracle = budget_recall(truth, oracle_text(truth_text))
        pages.append(Page(row["id"], row["set"], row["url"], html, truth, oracle, _half(row["id"])))
    return pages
