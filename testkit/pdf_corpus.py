"""The shared PDF corpus and its five measures, for the PDF benchmark and the quality test.

The corpus (``../shared/corpus/pdf`` beside the repository, see its README) holds 80 text
PDFs by four producers with their exact body text, the page furniture (running headers,
footers, page numbers, stamps) listed apart, and 5 hostile files. The measures follow the
README's suggestions, all on lower-cased ``\\w+`` tokens of NFC text:

- **recall**: share of the truth's tokens (a bag) found in the output;
- **order**: share of the truth's distinct word 4-grams found in the output, where a word
  split at a line-end hyphen counts both joined and split (so hyphenation is not scored
  twice: that is what *damage* is for);
- **damage**: damaged words per truth word: a word left split at a line-end hyphen
  (PDFium's U+FFFE counts as one) or by a space, two truth words glued into one
  (``somany``), a token holding a ligature code point (U+FB00-U+FB06), or a spacing accent
  left loose beside a letter (``Poke´mon``);
- **furniture**: furniture strings (page numbers aside, which cannot be told from other
  numbers) whose token sequence occurs in the output more often than in the truth, per page;
- **ms per page**: measured by the caller.

The corpus is split in two fixed halves by document number (odd: ``dev``, even:
``confirm``): post-processing is developed on one and confirmed on the other.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import itertools
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = [
    "PDF_CORPUS_ROOT",
    "PdfCase",
    "Score",
    "load_cases",
    "mean_scores",
    "score",
]

PDF_CORPUS_ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "pdf"

_TOKEN = re.compile(r"\w+")
_LIGATURES = re.compile("[\ufb00-\ufb06]")
# Spacing accents a reader leaves beside the letter they belong on (TeX OT1/T1 builds
# accented letters from a base letter and one of these).
_SPACING_ACCENTS = "\u00a8\u00af\u00b4\u00b8\u02c6\u02c7\u02d8\u02d9\u02da\u02db\u02dc\u02dd"
_LOOSE_ACCENT = re.compile(rf"\w ?[{_SPACING_ACCENTS}]|[{_SPACING_ACCENTS}] ?\w")
_HYPHENS = "-\u2010\u2011\u00ad\ufffe"
_LINE_END_HYPHEN = re.compile(rf"[{_HYPHENS}][ \t]*(?:\r?\n[ \t]*)|\ufffe")
_PAGE = "{page}"
_PAGES = "{pages}"


@dataclasses.dataclass(frozen=True, slots=True)
class Furniture:
    """One furniture string of the manifest: ``{page}``/``{pages}`` stand for numbers."""

    text: str
    expected: int


@dataclasses.dataclass(frozen=True, slots=True)
class PdfCase:
    """One corpus PDF with its truth.

    Attributes:
        id: The manifest id (``tex2col-01``).
        kind: ``quality`` or ``robustness``.
        producer: Which program made it (``pdflatex-twocolumn`` ...).
        half: ``dev`` (odd document numbers) or ``confirm`` (even ones).
        pages: The page count.
        data: The PDF's bytes.
        truth: The body text in reading order.
        furniture: The page furniture printed outside the body (page numbers left out).
        expect: For robustness files, what the README expects of a reader.
    """

    id: str
    kind: str
    producer: str
    half: str
    pages: int
    data: bytes
    truth: str
    furniture: tuple[Furniture, ...]
    expect: str


@dataclasses.dataclass(frozen=True, slots=True)
class Score:
    """The four text measures of one output against its truth (time is the caller's)."""

    recall: float
    precision: float
    order: float
    damage: float
    furniture_per_page: float


def tokens(text: str) -> list[str]:
    """The lower-cased ``\\w+`` tokens of NFC text, in order."""
    return _TOKEN.findall(unicodedata.normalize("NFC", text).lower())


def _bag_share(truth: collections.Counter[str], got: collections.Counter[str]) -> float:
    total = sum(truth.values())
    if not total:
        return 1.0
    return sum(min(count, got[word]) for word, count in truth.items()) / total


def _grams(words: Sequence[str], n: int = 4) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _order(truth_words: Sequence[str], text: str) -> float:
    wanted = _grams(truth_words)
    if not wanted:
        return 1.0
    found = _grams(tokens(text)) | _grams(tokens(_LINE_END_HYPHEN.sub("", text)))
    return len(wanted & found) / len(wanted)


def _damage(truth_words: Sequence[str], text: str) -> int:
    """Damaged words in ``text`` (see the module docstring)."""
    vocabulary = set(truth_words)
    pairs = {a + b for a, b in itertools.pairwise(truth_words)}
    text = unicodedata.normalize("NFC", text)
    found = list(_TOKEN.finditer(text))
    damaged = len(_LOOSE_ACCENT.findall(text))
    for match in found:
        word = match.group().lower()
        if _LIGATURES.search(word):
            damaged += 1
        elif word not in vocabulary and word in pairs:
            damaged += 1  # two truth words glued into one
    for left, right in itertools.pairwise(found):
        between = text[left.end() : right.start()]
        joined = (left.group() + right.group()).lower()
        if joined not in vocabulary:
            continue
        if _LINE_END_HYPHEN.fullmatch(between) or (
            between.strip(" ") in ("", "\n")
            and not (left.group().lower() in vocabulary and right.group().lower() in vocabulary)
        ):
            damaged += 1
    return damaged


def _occurrences(words: Sequence[str], needle: Sequence[str]) -> int:
    if not needle:
        return 0
    count = 0
    at = 0
    first = needle[0]
    size = len(needle)
    while at <= len(words) - size:
        if words[at] == first and list(words[at : at + size]) == list(needle):
            count += 1
            at += size
        else:
            at += 1
    return count


def _furniture_leaked(
    furniture: Sequence[Furniture], pages: int, truth_words: Sequence[str], words: Sequence[str]
) -> int:
    leaked = 0
    for item in furniture:
        texts = (
            {
                item.text.replace(_PAGE, str(n)).replace(_PAGES, str(pages))
                for n in range(1, 1 + pages)
            }
            if _PAGE in item.text
            else {item.text.replace(_PAGES, str(pages))}
        )
        for text in texts:
            needle = tokens(text)
            leaked += max(0, _occurrences(words, needle) - _occurrences(truth_words, needle))
    return leaked


def score(case: PdfCase, text: str) -> Score:
    """Score one reader's output for one PDF.

    Args:
        case: The corpus PDF.
        text: What the reader made of it.

    Returns:
        Recall, precision, order, damage (a share of the truth's words) and furniture
        leaked per page.
    """
    truth_words = tokens(case.truth)
    words = tokens(text)
    truth_bag = collections.Counter(truth_words)
    got = collections.Counter(words)
    return Score(
        recall=_bag_share(truth_bag, got),
        precision=_bag_share(got, truth_bag),
        order=_order(truth_words, text),
        damage=_damage(truth_words, text) / max(1, len(truth_words)),
        furniture_per_page=_furniture_leaked(case.furniture, case.pages, truth_words, words)
        / max(1, case.pages),
    )


def mean_scores(scores: Iterable[Score]) -> Score:
    """The mean of each measure over documents."""
    rows = list(scores)
    if not rows:
        return Score(0.0, 0.0, 0.0, 0.0, 0.0)
    return Score(
        *(
            sum(getattr(row, field.name) for row in rows) / len(rows)
            for field in dataclasses.fields(Score)
        )
    )


def load_cases(root: Path = PDF_CORPUS_ROOT) -> list[PdfCase]:
    """Read the manifest, every PDF and its truth, in manifest order."""
    cases: list[PdfCase] = []
    with (root / "manifest.jsonl").open(encoding="utf-8") as manifest:
        rows = [json.loads(line) for line in manifest if line.strip()]
    for row in rows:
        number = int(row["id"].rsplit("-", 1)[-1]) if row["id"][-1].isdigit() else 0
        cases.append(
            PdfCase(
                id=row["id"],
                kind=row["kind"],
                producer=row["producer"],
                half="dev" if number % 2 else "confirm",
                pages=int(row["pages"]),
                data=(root / row["file"]).read_bytes(),
                truth=gzip.decompress((root / row["truth"]).read_bytes()).decode("utf-8"),
                furniture=tuple(
                    Furniture(item["text"], int(item["expected"]))
                    for item in row["furniture"]
                    if item.get("kind") != "page_number"
                ),
                expect=row.get("expect", ""),
            )
        )
    return cases
