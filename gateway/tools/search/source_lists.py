"""The operator's lists on the gateway's side: search results the fetcher would refuse.

Pure. SPEC 6: results whose host is a ``deny_domains`` domain or under one are dropped
before they get ledger numbers, and with a non-empty ``allow_domains`` only results under
one of its domains are kept. The decision is the fetcher's own
(``fetcher.client.written_host_refusal``, on the fetcher's normalisation), applied to the
host the fetcher would check (``gateway.tools.fetch.addresses.host_of``). The lists come from the
``[fetcher]`` table of the shared TOML file (``gateway.settings``); the fetcher enforces
them on every address it opens, so this is what the model is shown, never the rule.
"""

from __future__ import annotations

from fetcher.client import DomainLists, written_host_refusal
from gateway.tools.fetch.addresses import host_of


def denied(url: str, lists: DomainLists) -> bool:
    """Whether the operator's lists remove a search result with this address.

    Args:
        url: The result's address, as SearXNG gave it.
        lists: The operator's lists.

    Returns:
        True when the fetcher would refuse the address as ``denied``; an address with no
        host the fetcher could check is removed only under an allow list (the fetcher
        refuses it anyway).

    # Security
    SPEC 6 and 7 step 2: the model never sees, and so never gets a number for, a result
    the operator excluded, and the count of removed results is said in the tool text.
    Proved by ``tests/gateway/tools/search/test_source_lists.py``.
    """
    if lists.empty:
        return False
    host = host_of(url)
    if host is None:
        return bool(lists.allow)
    return written_host_refusal(host, lists) is not None
