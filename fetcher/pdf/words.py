"""Word-level repairs of text read from PDFs (pure).

PDF readers hand back words the way they were set, not the way they were written:

- **line-end hyphens**: a word broken across two lines (``extrac-`` / ``tion``) must be
  joined, but a compound that happens to break at its own hyphen (``so-`` / ``many``,
  ``BPA-`` / ``free``) must keep it. PDFium marks both kinds alike (U+FFFE), so the choice
  is made on the words: what the document itself writes elsewhere (``extraction`` or
  ``BPA-free`` in the middle of a line) first, then an English word list (SCOWL, see
  ``fetcher/pdf/data/README.md``), then the habit of this very document (does it hyphenate
  words at line ends, or only break compounds?);
- **ligatures**: the presentation forms U+FB00-U+FB06 become their letters;
- **loose accents**: :data:`COMBINING` maps the spacing accents TeX fonts draw over a
  letter to the combining mark that, after NFC, makes the accented letter
  (:mod:`fetcher.pdf.text` finds which letter, from the glyphs' positions).
"""

from __future__ import annotations

import collections
import functools
import gzip
import re
from collections.abc import Container, Iterable
from importlib import resources

__all__ = [
    "COMBINING",
    "WordList",
    "Words",
    "fold_ligatures",
    "join_lines",
    "strip_note_number",
    "word_list",
]

#: Spacing accent (as PDFium reads a TeX accent glyph) → combining mark.
COMBINING: dict[str, str] = {
    "\u0060": "\u0300",  # ` grave
    "\u02cb": "\u0300",  # ˋ modifier grave
    "\u00b4": "\u0301",  # ´ acute
    "\u02ca": "\u0301",  # ˊ modifier acute
    "\u005e": "\u0302",  # ^ circumflex
    "\u02c6": "\u0302",  # ˆ
    "\u007e": "\u0303",  # ~ tilde
    "\u02dc": "\u0303",  # ˜
    "\u00af": "\u0304",  # ¯ macron
    "\u02c9": "\u0304",  # ˉ
    "\u02d8": "\u0306",  # ˘ breve
    "\u02d9": "\u0307",  # ˙ dot above
    "\u00a8": "\u0308",  # ¨ diaeresis
    "\u02da": "\u030a",  # ˚ ring above
    "\u02dd": "\u030b",  # ˝ double acute
    "\u02c7": "\u030c",  # ˇ caron
    "\u00b8": "\u0327",  # ¸ cedilla
    "\u02db": "\u0328",  # ˛ ogonek
}
#: Accents drawn under their letter rather than over it.
BELOW = frozenset("\u00b8\u02db")
#: Letters TeX accents in their dotless form.
DOTLESS = {"\u0131": "i", "\u0237": "j"}

_LIGATURES = str.maketrans(
    {
        "\ufb00": "ff",
        "\ufb01": "fi",
        "\ufb02": "fl",
        "\ufb03": "ffi",
        "\ufb04": "ffl",
        "\ufb05": "st",
        "\ufb06": "st",
    }
)
_ANY_LIGATURE = re.compile("[\ufb00-\ufb06]")
_LETTERS = re.compile(r"[^\W\d_]+")
_FRAGMENT = re.compile(r"[^\W\d_]+-\n")
# Every "first-second" pair in a compound, overlapping ("a-b-c": "a-b" and "b-c").
_COMPOUND_PAIR = re.compile(r"(?<![^\W\d_])(?=([^\W\d_]+-[^\W\d_]+))")
_TAIL = re.compile(r"(\S*?)([^\W\d_]+)[-\u2010]$")
_HEAD = re.compile(r"([^\W\d_]+)")
# Han, kana and full-width punctuation: scripts written without spaces between words.
_UNSPACED = re.compile("[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
_NOTE_NUMBER = re.compile(r"^\s*(?:\d{1,3}|[*†‡§])(?:[.)]\s*|\s+|(?=[^\W\d_]|[\"“‘(]))(?=\S)")
_URL_CHARS = frozenset("/.:@_=?&#%")


def fold_ligatures(text: str) -> str:
    """Replace ligature presentation forms (U+FB00-U+FB06) by their letters."""
    return text.translate(_LIGATURES) if _ANY_LIGATURE.search(text) else text


def strip_note_number(text: str) -> str:
    """Remove a footnote's or list item's leading number (``1.``, ``2)``, ``3 ``, ``*``)."""
    return _NOTE_NUMBER.sub("", text, count=1)


class WordList:
    """A sorted word list, one word a line, searched by bisection in its text.

    A document asks a few dozen words; building a set of 75,000 strings would cost the
    worker process more than all its lookups (and it reads one document in its life).
    """

    def __init__(self, text: str) -> None:
        self._text = text if text.endswith("\n") else text + "\n"

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str) or not word or "\n" in word:
            return False
        text = self._text
        low, high = 0, len(text)
        while low < high:
            middle = (low + high) // 2
            start = text.rfind("\n", 0, middle) + 1
            end = text.index("\n", middle)
            line = text[start:end]
            if line == word:
                return True
            if line < word:
                low = end + 1
            else:
                high = start
        return False


@functools.cache
def word_list() -> WordList:
    """The shipped English word list (about 75,000 lower-cased words; loaded once)."""
    data = resources.files("fetcher").joinpath("data/words.txt.gz").read_bytes()
    return WordList(gzip.decompress(data).decode("utf-8"))


class Words:
    """What one document says about its own words: the evidence for hyphen decisions.

    Args:
        lines: Every line of the document (the furniture included does no harm).
        known: The word list (defaults to the shipped one, loaded on first need).
    """

    def __init__(self, lines: Iterable[str], known: Container[str] | None = None) -> None:
        self._known = known
        # The word before a line-end hyphen is a fragment ("extrac-"): not a word.
        text = _FRAGMENT.sub(" ", "\n".join(lines).lower())
        self._counts = collections.Counter(_LETTERS.findall(text))
        self._counts.update(_COMPOUND_PAIR.findall(text))
        self._votes = collections.Counter[bool]()

    def _known_word(self, word: str) -> bool:
        known = self._known if self._known is not None else word_list()
        return word in known

    def _by_list(self, left: str, right: str) -> str:
        """What the word list says about ``left-right`` at a line end.

        ``join``: the joined word is known and a part is not (``extrac`` + ``tion``);
        ``keep``: both parts are known words and the joined one is not (``so-many``);
        ``either``: all three are known (``non-alcoholic`` / ``nonalcoholic``);
        ``""``: the list does not know these words (a name, another language).
        """
        joined = self._known_word(left + right)
        parts = (
            len(left) > 1 and len(right) > 1 and self._known_word(left) and self._known_word(right)
        )
        if joined:
            return "either" if parts else "join"
        return "keep" if parts else ""

    def learn(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Learn this document's habit from its line-end hyphens (word-part pairs).

        A document set with hyphenation breaks words anywhere (``impor-tant``); one
        without it breaks only at the hyphens of compounds. The pairs the word list is sure
        about tell which; that habit then decides the pairs nothing else decides.
        """
        for left, right in pairs:
            verdict = self._by_list(left.lower(), right.lower())
            if verdict in ("join", "keep"):
                self._votes[verdict == "join"] += 1

    def join_hyphen(self, left: str, right: str) -> bool:
        """Whether ``left-`` at a line end and ``right`` on the next are one word.

        Args:
            left: The letters before the hyphen (the word's first part).
            right: The letters starting the next line.

        Returns:
            True to join without the hyphen, False to keep the hyphen (and no space).
        """
        if right[:1].isupper():
            return False  # pro-Morales, Anglo-Saxon: a name after the hyphen
        if any(c.isupper() for c in left[1:]):
            return False  # BPA-free, MacBook-like: an acronym or a brand before it
        lower_left, lower_right = left.lower(), right.lower()
        joined = self._counts[lower_left + lower_right]
        kept = self._counts[f"{lower_left}-{lower_right}"]
        if joined != kept:
            return joined > kept
        verdict = self._by_list(lower_left, lower_right)
        if verdict in ("join", "keep"):
            return verdict == "join"
        # The document's habit; a known joined word wins a tie.
        if self._votes[True] != self._votes[False]:
            return self._votes[True] > self._votes[False]
        return verdict == "either" or not self._votes[False]


def hyphen_pair(left_line: str, right_line: str) -> tuple[str, str] | None:
    """The two word parts around a line-end hyphen, or None when it is not a word break.

    A hyphen after a URL, a number or a path (``https://a.b/c-``) is part of that token.
    """
    tail = _TAIL.search(left_line[left_line.rfind(" ") + 1 :])
    head = _HEAD.match(right_line.lstrip())
    if tail is None or head is None:
        return None
    if any(c in _URL_CHARS or c.isdigit() for c in tail.group(1)):
        return None
    return tail.group(2), head.group(1)


def join_lines(left: str, right: str, words: Words) -> str:
    """Join two lines of one paragraph, deciding about a hyphen at the first one's end.

    Args:
        left: The paragraph so far (its last line ends it).
        right: The next line.
        words: The document's word evidence.

    Returns:
        ``left`` and ``right`` joined by a space, or with a line-end hyphen removed or
        kept (both without a space).
    """
    left = left.rstrip()
    right = right.lstrip()
    if not left:
        return right
    if not right:
        return left
    if left.endswith(("-", "\u2010")):
        pair = hyphen_pair(left, right)
        if pair is None:
            # A hyphen after a number or inside a URL: keep it, and keep the token whole.
            return left + right if not left[-2:-1].isspace() else f"{left} {right}"
        if words.join_hyphen(*pair):
            return left[:-1] + right
        return left + right
    if _UNSPACED.match(left[-1]) and _UNSPACED.match(right[0]):
        return left + right  # Chinese and Japanese put no space between words
    return f"{left} {right}"
