"""Sources that were read told apart from those known only by their search result (the
``read`` field of the ``sources`` event)."""

from __future__ import annotations

from gateway.tools.events import Sources
from gateway.tools.ledger import Found, Ledger


def test_a_source_is_read_once_a_read_reached_its_page() -> None:
    ledger = Ledger()
    ledger.add("https://a.example/", "A", found=Found.SEARCH)  # a result, not read
    ledger.add("https://b.example/", "B", found=Found.SEARCH)
    ledger.add("https://B.example:443/#top", "", found=Found.PAGE)  # then its page read
    ledger.add("https://c.example/", "C", found=Found.PAGE)  # a link a read followed
    ledger.add("https://c.example/", "C again", found=Found.SEARCH)  # found later: still read
    assert Sources(tuple(ledger.sources())).payload() == {
        "type": "sources",
        "sources": [
            {"n": 1, "url": "https://a.example/", "title": "A", "read": False},
            {"n": 2, "url": "https://b.example/", "title": "B", "read": True},
            {"n": 3, "url": "https://c.example/", "title": "C", "read": True},
        ],
    }
    assert [s.searched for s in ledger.sources()] == [True, True, True]
