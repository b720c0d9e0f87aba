"""Which IP addresses and ports the fetcher may connect to (rule 2), as pure code.

The table below is written out by hand from the IANA special-purpose address registries
(IPv4 and IPv6), plus multicast and the deprecated IPv6 site-local block. It is the rule;
:attr:`ipaddress.IPv4Address.is_global` is not consulted, because its answers differ
between Python builds (the CVE-2024-4032 fix changed them in 3.11.10 and 3.12.4).

IPv6 is judged by an allow-list: only the global unicast space ``2000::/3`` can be public
(RFC 4291; everything else is reserved, local or multicast), minus the special blocks
inside it. Two IPv4-inside-IPv6 forms carry a real IPv4 destination and are judged by
their payload: IPv4-mapped ``::ffff:0:0/96`` and the well-known NAT64 prefix
``64:ff9b::/96``. Every other form (IPv4-compatible and SIIT inside ``::/8``, local-use
NAT64, 6to4, Teredo) is refused whatever its payload, because its own prefix is not
globally reachable. ISATAP addresses (RFC 5214: an IPv4 address in the interface
identifier ``[02]00:5efe:a.b.c.d`` under any prefix) are global when their prefix is, but
a host that is itself an ISATAP node sends them straight to the embedded IPv4 address,
past any IPv6 deny list: they also need a public payload.
"""

from __future__ import annotations

import dataclasses
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network


@dataclasses.dataclass(frozen=True, slots=True)
class Block:
    """One special-purpose block: the network, what it is, and where it is defined."""

    network: IPNetwork
    name: str
    source: str


def _block(cidr: str, name: str, source: str) -> Block:
    return Block(ip_network(cidr), name, source)


#: IPv4 blocks that are not globally reachable (IANA IPv4 Special-Purpose Address Registry,
#: "Globally Reachable" False or N/A), plus multicast. Globally reachable entries of the
#: registry (AS112 192.31.196.0/24 and 192.175.48.0/24, AMT 192.52.193.0/24) are absent on
#: purpose. 192.0.0.9 and 192.0.0.10 are marked reachable inside 192.0.0.0/24, but they are
#: anycast service addresses, never web servers, so the whole /24 is refused.
IPV4_BLOCKS: tuple[Block, ...] = (
    _block("0.0.0.0/8", "this network", "RFC 791"),
    _block("10.0.0.0/8", "private use", "RFC 1918"),
    _block("100.64.0.0/10", "shared address space (CGNAT)", "RFC 6598"),
    _block("127.0.0.0/8", "loopback", "RFC 1122"),
    _block("169.254.0.0/16", "link local", "RFC 3927"),
    _block("172.16.0.0/12", "private use", "RFC 1918"),
    _block("192.0.0.0/24", "IETF protocol assignments", "RFC 6890"),
    _block("192.0.2.0/24", "documentation (TEST-NET-1)", "RFC 5737"),
    _block("192.88.99.0/24", "deprecated 6to4 relay anycast", "RFC 7526"),
    _block("192.168.0.0/16", "private use", "RFC 1918"),
    _block("198.18.0.0/15", "benchmarking", "RFC 2544"),
    _block("198.51.100.0/24", "documentation (TEST-NET-2)", "RFC 5737"),
    _block("203.0.113.0/24", "documentation (TEST-NET-3)", "RFC 5737"),
    _block("224.0.0.0/4", "multicast", "RFC 5771"),
    _block("240.0.0.0/4", "reserved", "RFC 1112"),
    _block("255.255.255.255/32", "limited broadcast", "RFC 919"),
)

#: The only IPv6 space that can hold public addresses (IANA IPv6 Address Space registry).
IPV6_GLOBAL_UNICAST = IPv6Network("2000::/3")

#: IPv6 blocks inside 2000::/3 that are not globally reachable (IANA IPv6 Special-Purpose
#: Address Registry), plus the forms outside it that the module docstring names, so that
#: :func:`classify` can say which block an address hit.
IPV6_BLOCKS: tuple[Block, ...] = (
    _block("::/128", "unspecified", "RFC 4291"),
    _block("::1/128", "loopback", "RFC 4291"),
    _block("::/96", "IPv4-compatible (deprecated)", "RFC 4291"),
    _block("::ffff:0:0:0/96", "SIIT IPv4-translated", "RFC 6052"),
    _block("::/8", "reserved by IETF", "RFC 4291"),
    _block("64:ff9b:1::/48", "local-use IPv4/IPv6 translation", "RFC 8215"),
    _block("100::/64", "discard-only", "RFC 6666"),
    _block("100:0:0:1::/64", "dummy IPv6 prefix", "RFC 9780"),
    _block("2001::/32", "Teredo", "RFC 4380"),
    _block("2001::/23", "IETF protocol assignments", "RFC 2928"),
    _block("2001:db8::/32", "documentation", "RFC 3849"),
    _block("2002::/16", "6to4", "RFC 3056"),
    _block("3fff::/20", "documentation", "RFC 9637"),
    _block("5f00::/16", "segment routing (SRv6) SIDs", "RFC 9602"),
    _block("fc00::/7", "unique local", "RFC 4193"),
    _block("fe80::/10", "link local", "RFC 4291"),
    _block("fec0::/10", "site local (deprecated)", "RFC 3879"),
    _block("ff00::/8", "multicast", "RFC 4291"),
)

_IPV4_MAPPED = IPv6Network("::ffff:0:0/96")
_NAT64_WELL_KNOWN = IPv6Network("64:ff9b::/96")
_OUTSIDE_GLOBAL_UNICAST = Block(IPv6Network("::/0"), "not global unicast", "RFC 4291")
#: ISATAP interface identifiers: ``0000:5efe`` or ``0200:5efe`` (the u bit set when the
#: IPv4 address is global; the g bit is masked too), then the IPv4 address (RFC 5214 6.1).
_ISATAP_MASK = 0xFCFF_FFFF
_ISATAP_MARK = 0x0000_5EFE


def _isatap_payload(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address inside an ISATAP interface identifier, if ``address`` has one."""
    identifier = int(address) & 0xFFFF_FFFF_FFFF_FFFF
    if (identifier >> 32) & _ISATAP_MASK != _ISATAP_MARK:
        return None
    return IPv4Address(identifier & 0xFFFF_FFFF)


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """The classification of one address.

    Attributes:
        address: The address judged.
        block: The special-purpose block that makes it non-public, or None when public.
        payload: For IPv4-mapped, NAT64 and ISATAP addresses, the IPv4 address that was
            judged.
    """

    address: IPAddress
    block: Block | None
    payload: IPv4Address | None = None

    @property
    def public(self) -> bool:
        """True when the address is globally reachable."""
        return self.block is None


def _ipv4_block(address: IPv4Address) -> Block | None:
    for block in IPV4_BLOCKS:
        if address in block.network:
            return block
    return None


def classify(address: IPAddress) -> Verdict:
    """Say whether ``address`` is public, and if not, which block it falls in.

    Args:
        address: An IPv4 or IPv6 address, e.g. from DNS or an IP-literal host.

    Returns:
        A :class:`Verdict`; ``verdict.public`` is the answer.

    # Security
    Rule 2: the fetcher opens connections to globally reachable unicast addresses only.
    This stops a page, a redirect or the model from steering the fetcher at loopback,
    private networks, cloud metadata (169.254.169.254, 100.100.100.200), or a local
    service reached through an IPv4-inside-IPv6 spelling (``::ffff:127.0.0.1``,
    ``64:ff9b::a00:1``, ``2002:7f00:1::``, ``2001:db8:1::5efe:a00:1``). Callers may rely
    on: a public verdict means the address is outside every block of :data:`IPV4_BLOCKS`
    and :data:`IPV6_BLOCKS`, inside ``2000::/3`` when IPv6, and, for the judged embedded
    forms (IPv4-mapped, NAT64, ISATAP), that the IPv4 payload is itself public. Proved by
    ``tests/fetcher/net/test_policy.py`` (a table with both sides of every boundary, and
    hypothesis properties over the whole address space).
    """
    if isinstance(address, IPv4Address):
        return Verdict(address, _ipv4_block(address))
    if address in _IPV4_MAPPED or address in _NAT64_WELL_KNOWN:
        payload = IPv4Address(int(address) & 0xFFFF_FFFF)
        return Verdict(address, _ipv4_block(payload), payload)
    for block in IPV6_BLOCKS:
        if address in block.network:
            return Verdict(address, block)
    if address not in IPV6_GLOBAL_UNICAST:
        return Verdict(address, _OUTSIDE_GLOBAL_UNICAST)
    isatap = _isatap_payload(address)
    if isatap is not None:
        return Verdict(address, _ipv4_block(isatap), isatap)
    return Verdict(address, None)


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    """The network rules one fetcher applies. The shipped programs only use ``Policy()``.

    Tests reach their loopback origins by building a policy object that names them
    explicitly; no setting, flag or environment variable of the programs can do that.

    Attributes:
        ports: The ports an address may name. Production: 443 only (rule 2, SPEC 7 step 1).
        exempt: Networks treated as public although the table says otherwise. Production:
            none. Only tests set it, e.g. to ``127.0.0.1/32`` for a local HTTPS origin.
    """

    ports: frozenset[int] = frozenset({443})
    exempt: tuple[IPNetwork, ...] = ()

    def allows_address(self, address: IPAddress) -> bool:
        """True when ``address`` may be connected to.

        # Security
        Rule 2 as applied: :func:`classify` decides, except for networks listed in
        ``exempt``, which only test code fills. Every resolved address of every hop passes
        through here before any connection is opened (see ``fetcher.net.download``).
        """
        if any(address in network for network in self.exempt):
            return True
        return classify(address).public
