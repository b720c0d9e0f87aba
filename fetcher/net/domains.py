"""The operator's lists of sources: ``deny_domains`` and ``allow_domains`` (SPEC 6, 7 step 2).

The operator, never the model, chooses which sites may be read. A listed domain covers
itself and every name under it (``example.com`` covers ``www.example.com`` and
``a.b.example.com``, never ``evilexample.com``). Entries are normalised exactly as the
address parser normalises hosts (``fetcher.net.urls.normalise_host``: case, trailing dot,
IDNA/UTS 46, IP literals), so an entry and an address that name the same host compare
equal whichever way either was written. An IP address in a list matches only itself.

Pure code: :func:`parse_domains` reads a list once at start-up, :func:`domain_refusal`
decides one host. The gateway uses the same two functions on the same lists to drop
search results before they are numbered (``gateway/tools/search/source_lists.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from fetcher.net.urls import Refused, normalise_host
from fetcher.reasons import Reason


@dataclasses.dataclass(frozen=True, slots=True)
class DomainLists:
    """The operator's two lists, each entry a normalised host (see :func:`parse_domains`).

    Attributes:
        deny: Hosts that are never read, nor anything under them.
        allow: When not empty, the only hosts (and what is under them) that may be read.
    """

    deny: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    # The same entries as sets: a host is looked up by its own suffixes, so a decision
    # costs the host's labels, not the list's length (block lists run to 100,000 entries).
    _deny: frozenset[str] = dataclasses.field(init=False, repr=False, compare=False)
    _allow: frozenset[str] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_deny", frozenset(self.deny))
        object.__setattr__(self, "_allow", frozenset(self.allow))

    @property
    def empty(self) -> bool:
        """True when neither list says anything (every host passes)."""
        return not self.deny and not self.allow


#: No lists: every host passes (the default of every setting that holds them).
NO_LISTS = DomainLists()


def parse_domains(entries: Iterable[str]) -> tuple[str, ...] | Refused:
    """Normalises a list of domains as the address parser normalises hosts.

    Args:
        entries: Domains as the operator wrote them (``Example.COM.``, ``bücher.de``,
            ``xn--bcher-kva.de``, ``192.0.2.1``, ``[2001:db8::1]``); blank entries are
            skipped.

    Returns:
        The normalised entries, deduplicated, in the order first written; or a
        :class:`Refused` (reason ``malformed``) naming the first entry that is not a
        host, a wildcard (``*.example.com``: a domain already covers its subdomains), or
        an address with a scheme, port or path.
    """
    seen: dict[str, None] = {}
    for entry in entries:
        text = entry.strip()
        if not text:
            continue
        if text.startswith(("*", ".")):
            return Refused(
                Reason.MALFORMED,
                f"{text!r}: write the domain alone (example.com); it covers its subdomains",
            )
        if "/" in text or "@" in text or (text.count(":") == 1 and not text.startswith("[")):
            return Refused(Reason.MALFORMED, f"{text!r}: a domain, not an address")
        if ":" in text and not text.startswith("["):
            text = f"[{text}]"  # a bare IPv6 address
        result = normalise_host(text)
        if isinstance(result, Refused):
            return Refused(Reason.MALFORMED, f"{text!r}: {result.detail}")
        seen.setdefault(result[0], None)
    return tuple(seen)


def covers(domain: str, host: str) -> bool:
    """Whether ``host`` is ``domain`` or a name under it (both normalised).

    A label boundary is required: ``example.com`` covers ``www.example.com`` but not
    ``evilexample.com``. IP literals (they hold ``.`` or ``:`` but no labels to
    climb) match only themselves, because a domain ending can never be an IP address's.
    """
    if host == domain:
        return True
    if _is_ip(host) or _is_ip(domain):
        return False
    return host.endswith("." + domain)


def covering(host: str, domains: frozenset[str]) -> str | None:
    """The entry of ``domains`` that covers ``host``, or None (see :func:`covers`).

    Looks up the host itself, then each name it is under (``a.b.example.com``,
    ``b.example.com``, ``example.com``, ``com``): at most 127 look-ups of a 253-character
    name, whatever the size of the list.
    """
    if host in domains:
        return host
    if _is_ip(host):
        return None
    rest = host
    while "." in rest:
        rest = rest.partition(".")[2]
        if rest in domains:
            return rest
    return None


def _is_ip(host: str) -> bool:
    # Normalised hosts are IPv6 text (with ":") or names whose last label is never all
    # digits (urls.py reads such hosts as IPv4 numbers).
    return ":" in host or host.rpartition(".")[2].isdigit()


def domain_refusal(host: str, lists: DomainLists) -> Refused | None:
    """Decides whether the operator's lists let ``host`` be read.

    Args:
        host: A host as :class:`fetcher.net.urls.Address` holds it (normalised).
        lists: The operator's lists, normalised by :func:`parse_domains`.

    Returns:
        ``None`` when the host may be read, else a :class:`Refused` with reason
        ``denied`` and which list refused it.

    # Security
    SPEC 7 step 2: the operator's lists only ever tighten. A host under a ``deny``
    entry is refused; with a non-empty ``allow`` list, a host under no entry is refused;
    empty lists refuse nothing and nothing here can let through what rules 1-7 refuse
    (the caller applies this after rule 1 and before DNS, for the first address, every
    redirect hop and every crawl link: ``Downloader._hop``). Matching is on label
    boundaries of normalised hosts, so case, a trailing dot, Unicode or Punycode
    spellings and look-alike suffixes (``evilexample.com``) cannot slip past a deny
    entry, nor ride on an allow entry. Proved by the tables in
    ``tests/fetcher/net/test_domains.py`` and, on the wire, ``test_download_denied.py``.
    """
    denied_by = covering(host, lists._deny)
    if denied_by is not None:
        return Refused(Reason.DENIED, f"{host} is on the operator's deny list ({denied_by})")
    if lists.allow and covering(host, lists._allow) is None:
        return Refused(Reason.DENIED, f"{host} is not on the operator's allow list")
    return None


def written_host_refusal(written: str, lists: DomainLists) -> Refused | None:
    """:func:`domain_refusal` for a host as written (the gateway's search results).

    Args:
        written: A host as an address holds it, before normalisation (``Bücher.DE``,
            ``www.example.com.``, ``2001:db8::1`` with or without brackets).
        lists: The operator's lists.

    Returns:
        As :func:`domain_refusal`. A host the address parser refuses passes a deny list
        (the fetcher refuses it anyway, as ``malformed``) but never an allow list.

    # Security
    The gateway's copy of SPEC 6's filter: results are dropped by the same decision the
    fetcher makes, on the same normalisation, so what the model is shown is what the
    fetcher would open. It is advice, never the rule: the fetcher enforces the lists on
    every address it opens whatever the gateway shows. Proved by
    ``tests/fetcher/net/test_domains.py::test_written_hosts_are_judged_as_the_fetcher_judges``.
    """
    if lists.empty:
        return None
    text = f"[{written}]" if ":" in written and not written.startswith("[") else written
    result = normalise_host(text)
    if isinstance(result, Refused):
        return Refused(Reason.DENIED, "not a host") if lists.allow else None
    return domain_refusal(result[0], lists)
