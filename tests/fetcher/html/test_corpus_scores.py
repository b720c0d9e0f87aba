"""The corpus scores the quality test and the benchmark rely on (``testkit/corpus.py``)."""

from __future__ import annotations

import pytest

from testkit.corpus import budget_precision, budget_recall, holds_snippet, tokens


@pytest.mark.parametrize(
    ("snippet", "text", "held"),
    [
        pytest.param("Contact Us", "Home\nContact us\n", True, id="case-and-lines-ignored"),
        pytest.param("Price: $120/Hour", "| Price | $120 / hour |", True, id="markup-between"),
        pytest.param("Chat Live", "Live chat", False, id="order-matters"),
        pytest.param("Apply Now", "Apply\nNowhere", False, id="whole-words-only"),
        pytest.param("our tuition", "We keep our\n\n## tuition low", True, id="across-a-heading"),
        pytest.param("...", "...", False, id="no-words"),
        pytest.param("end", "x" * 12_000 + " end", False, id="past-the-budget"),
        pytest.param("end", "x" * 11_990 + " end", True, id="inside-the-budget"),
    ],
)
def test_a_snippet_is_held_when_its_words_run_in_the_budget(
    snippet: str, text: str, held: bool
) -> None:
    assert holds_snippet(snippet, text) is held


def test_budget_scores_count_words_as_a_bag_in_the_first_characters() -> None:
    truth = tokens("the cat sat on the mat")
    assert budget_recall(truth, "The cat sat.") == pytest.approx(3 / 6)
    assert budget_precision(truth, "The cat sat. Buy now") == pytest.approx(3 / 5)
    assert budget_recall(truth, "menu " * 3_000 + "the cat sat on the mat") == 0.0
