"""The shared extraction corpus and its scores, for the quality test and the benchmark.

The corpus (``../shared/corpus/extraction`` beside the repository, see its README) holds real
pages with the article text people (``aeb``) or Readability.js (``readability``) found in them.
``../shared/corpus/wcxb-dev`` (:data:`WCXB_ROOT`) has the same layout and holds the page types
articles leave out (forums, docs, listings, collections, products, services), each page with
its ``page_type`` and two lists of snippets: ``with`` (must appear in a good reading) and
``without`` (boilerplate that must not).
The scores (``shared/notes/extraction.md``) count words as a bag of lower-cased ``\\w+`` tokens:

* *budget recall*: the share of the article's words found in the first 12,000 characters of a
  reader's text;
* *budget precision*: the share of the words in those 12,000 characters that are article words;
* the *oracle*: the budget recall of the article text itself, whitespace collapsed. Long
  articles do not fit in 12,000 characters, so it is the ceiling for each page;
* *snippets*: a snippet is in a text when its words, in order, are a run of the words of the
  text's first 12,000 characters (:func:`holds_snippet`): markup the reader adds (``#``,
  ``|``, fences) and line breaks do not hide a snippet, a word cut in two does.

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
from typing import Any

from lxml import etree
from lxml.html import document_fromstring

__all__ = [
    "CORPUS_ROOT",
    "HALVES",
    "WCXB_ROOT",
    "Page",
    "budget_precision",
    "budget_recall",
    "holds_snippet",
    "load_pages",
    "oracle_text",
    "tokens",
]


def _shared_corpora(repository: Path) -> Path:
    """``shared/corpus`` beside the repository, or beside a folder above it.

    A clone sits next to ``shared`` (CI); a git worktree sits one level further down
    (``wt/<name>``), so the nearest ancestor that has ``shared/corpus`` beside it wins.
    """
    for folder in repository.parents:
        if (folder / "shared" / "corpus").is_dir():
            return folder / "shared" / "corpus"
    return repository.parent / "shared" / "corpus"


CORPUS_ROOT = _shared_corpora(Path(__file__).resolve().parents[1]) / "extraction"
WCXB_ROOT = CORPUS_ROOT.parent / "wcxb-dev"
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
        id: The manifest id (``aeb/<sha>``, ``rdb/<name>`` or ``wcxb-dev/<n>``).
        set: ``aeb``, ``readability`` or ``wcxb-dev``.
        url: The page's address.
        html: The page as served (UTF-8).
        truth: The article's tokens.
        oracle: The budget recall of the article text itself.
        half: ``dev`` or ``check``: a fixed split of the pages in two.
        page_type: The manifest's ``page_type`` (``forum``, ``listing`` ...); ``article``
            for a set without one.
        with_: Snippets a good reading holds (``wcxb-dev`` only).
        without: Boilerplate snippets a good reading leaves out (``wcxb-dev`` only).
    """

    id: str
    set: str
    url: str
    html: bytes
    truth: collections.Counter[str]
    oracle: float
    half: str
    page_type: str = "article"
    with_: tuple[str, ...] = ()
    without: tuple[str, ...] = ()


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


def _word_run(text: str) -> str:
    """The text's lower-cased words, each between single spaces, for whole-word search."""
    return " " + " ".join(_TOKEN.findall(text.lower())) + " "


def holds_snippet(snippet: str, text: str, budget: int = BUDGET) -> bool:
    """Whether a snippet's words appear, in order and adjacent, in the first ``budget`` characters.

    Args:
        snippet: A ``with`` or ``without`` snippet.
        text: A reader's output.
        budget: How many leading characters of ``text`` count.

    Returns:
        True when the snippet's word run is a run of the text's words; False for a snippet
        without words.
    """
    words = _word_run(snippet)
    return words.strip() != "" and words in _word_run(text[:budget])


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
    truth_files: dict[str, dict[str, dict[str, Any]]] = {}
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
            entry = truth_files[path][key]
            truth_text = entry["articleBody"]
            with_, without = tuple(entry.get("with", ())), tuple(entry.get("without", ()))
        else:
            markup = gzip.decompress((root / path).read_bytes()).decode("utf-8", "replace")
            truth_text = _html_text(markup)
            with_, without = (), ()
        truth = tokens(truth_text)
        oracle = budget_recall(truth, oracle_text(truth_text))
        pages.append(
            Page(
                row["id"],
                row["set"],
                row["url"],
                html,
                truth,
                oracle,
                _half(row["id"]),
                row.get("page_type", "article"),
                with_,
                without,
            )
        )
    return pages
