"""Rule 2's classifier: both sides of every boundary, every embedded form (a table test)."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fetcher.net.policy import IPV4_BLOCKS, IPV6_BLOCKS, IPV6_GLOBAL_UNICAST, Policy, classify

# (address, public?) written out by hand from the IANA registries: first and last address of
# each block, and the neighbours just outside it.
IPV4_TABLE = [
    ("0.0.0.0", False),
    ("0.255.255.255", False),
    ("1.0.0.0", True),
    ("1.1.1.1", True),
    ("8.8.8.8", True),
    ("9.255.255.255", True),
    ("10.0.0.0", False),
    ("10.255.255.255", False),
    ("11.0.0.0", True),
    ("100.63.255.255", True),
    ("100.64.0.0", False),
    ("100.100.100.200", False),  # Alibaba Cloud metadata, inside shared space
    ("100.127.255.255", False),
    ("100.128.0.0", True),
    ("126.255.255.255", True),
    ("127.0.0.0", False),
    ("127.0.0.1", False),
    ("127.255.255.255", False),
    ("128.0.0.0", True),
    ("169.253.255.255", True),
    ("169.254.0.0", False),
    ("169.254.169.254", False),  # cloud metadata
    ("169.254.255.255", False),
    ("169.255.0.0", True),
    ("172.15.255.255", True),
    ("172.16.0.0", False),
    ("172.31.255.255", False),
    ("172.32.0.0", True),
    ("191.255.255.255", True),
    ("192.0.0.0", False),
    ("192.0.0.8", False),
    ("192.0.0.9", False),  # global anycast, refused on purpose (never a web server)
    ("192.0.0.170", False),
    ("192.0.0.255", False),
    ("192.0.1.0", True),
    ("192.0.2.0", False),
    ("192.0.2.255", False),
    ("192.0.3.0", True),
    ("192.31.196.1", True),  # AS112, globally reachable
    ("192.52.193.1", True),  # AMT, globally reachable
    ("192.88.98.255", True),
    ("192.88.99.0", False),
    ("192.88.99.255", False),
    ("192.88.100.0", True),
    ("192.167.255.255", True),
    ("192.168.0.0", False),
    ("192.168.255.255", False),
    ("192.169.0.0", True),
    ("192.175.48.1", True),  # AS112 direct delegation, globally reachable
    ("198.17.255.255", True),
    ("198.18.0.0", False),
    ("198.19.255.255", False),
    ("198.20.0.0", True),
    ("198.51.99.255", True),
    ("198.51.100.0", False),
    ("198.51.100.255", False),
    ("198.51.101.0", True),
    ("203.0.112.255", True),
    ("203.0.113.0", False),
    ("203.0.113.255", False),
    ("203.0.114.0", True),
    ("223.255.255.255", True),
    ("224.0.0.0", False),
    ("239.255.255.255", False),
    ("240.0.0.0", False),
    ("255.255.255.254", False),
    ("255.255.255.255", False),
]

IPV6_TABLE = [
    ("::", False),
    ("::1", False),
    ("::2", False),
    ("::7f00:1", False),  # IPv4-compatible, loopback payload
    ("::808:808", False),  # IPv4-compatible, public payload: refused whatever the payload
    ("::ffff:0:808:808", False),  # SIIT, public payload
    ("::ffff:0:7f00:1", False),  # SIIT, loopback payload
    ("::fffe:ffff:ffff", False),  # just below IPv4-mapped
    ("::ffff:0.0.0.0", False),  # IPv4-mapped, judged by payload
    ("::ffff:127.0.0.1", False),
    ("::ffff:10.1.2.3", False),
    ("::ffff:100.64.0.1", False),
    ("::ffff:169.254.169.254", False),
    ("::ffff:8.8.8.8", True),
    ("::ffff:255.255.255.255", False),
    ("::1:0:0:0", False),  # just above IPv4-mapped: still ::/8
    ("ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", False),  # last of ::/8
    ("64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", False),  # not global unicast
    ("64:ff9b::", False),  # NAT64 well-known, payload 0.0.0.0
    ("64:ff9b::7f00:1", False),
    ("64:ff9b::a00:1", False),
    ("64:ff9b::c0a8:101", False),
    ("64:ff9b::808:808", True),
    ("64:ff9b::101:101", True),
    ("64:ff9b::ffff:ffff", False),
    ("64:ff9b::1:0:0", False),  # past the /96, outside 2000::/3
    ("64:ff9b:1::", False),  # local-use NAT64
    ("64:ff9b:1::808:808", False),
    ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", False),
    ("100::", False),
    ("100::ffff:ffff:ffff:ffff", False),
    ("100:0:0:1::", False),
    ("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", False),  # just below 2000::/3
    ("2000::", True),
    ("2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", True),
    ("2001::", False),  # Teredo
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo with a public client
    ("2001:0:ffff:ffff:ffff:ffff:ffff:ffff", False),
    ("2001:1::1", False),
    ("2001:2::", False),  # benchmarking
    ("2001:db8::", False),
    ("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", False),  # last of 2001::/23
    ("2001:200::", True),  # first after 2001::/23
    ("2001:4860:4860::8888", True),
    ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", True),
    ("2001:db8::1", False),
    ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", False),
    ("2001:db9::", True),
    ("2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", True),
    ("2002::", False),  # 6to4
    ("2002:7f00:1::", False),
    ("2002:808:808::", False),  # 6to4 with a public payload: refused whatever the payload
    ("2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", False),
    ("2003::", True),
    ("2606:4700:4700::1111", True),
    # ISATAP (RFC 5214): judged by the IPv4 address in the interface identifier.
    ("2606:4700::5efe:7f00:1", False),  # loopback payload
    ("2606:4700::200:5efe:a00:1", False),  # private payload, u bit set
    ("2606:4700::100:5efe:a9fe:a9fe", False),  # link-local payload, g bit set
    ("2606:4700::300:5efe:6440:1", False),  # shared (CGNAT) payload, both bits set
    ("2606:4700::5efe:808:808", True),  # public payload
    ("2606:4700::200:5efe:808:808", True),
    ("2606:4700::400:5efe:7f00:1", True),  # not an ISATAP identifier
    ("2606:4700::5eff:7f00:1", True),  # not an ISATAP identifier
    ("2606:4700:0:5efe::7f00:1", True),  # 5efe outside the identifier
    ("2620:4f:8000::1", True),  # AS112, globally reachable
    ("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", True),
    ("3fff::", False),  # documentation, RFC 9637
    ("3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", False),
    ("3fff:1000::", True),
    ("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", True),  # last of 2000::/3
    ("4000::", False),  # reserved (is_global says True on some builds)
    ("5f00::", False),  # SRv6 SIDs
    ("5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", False),
    ("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", False),
    ("fc00::", False),
    ("fd00::1", False),
    ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", False),
    ("fe80::", False),
    ("fe80::1", False),
    ("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", False),
    ("fec0::", False),  # site-local, deprecated
    ("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", False),
    ("ff00::", False),
    ("ff02::1", False),
    ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", False),
]


@pytest.mark.parametrize(("text", "public"), IPV4_TABLE, ids=[a for a, _ in IPV4_TABLE])
def test_ipv4_table(text: str, public: bool) -> None:
    assert classify(IPv4Address(text)).public is public


@pytest.mark.parametrize(("text", "public"), IPV6_TABLE, ids=[a for a, _ in IPV6_TABLE])
def test_ipv6_table(text: str, public: bool) -> None:
    assert classify(IPv6Address(text)).public is public


def test_embedded_forms_report_their_payload() -> None:
    verdict = classify(IPv6Address("::ffff:169.254.169.254"))
    assert verdict.payload == IPv4Address("169.254.169.254")
    assert verdict.block is not None
    assert verdict.block.name == "link local"
    assert classify(IPv6Address("64:ff9b::808:808")).payload == IPv4Address("8.8.8.8")
    isatap = classify(IPv6Address("2606:4700::5efe:a00:1"))
    assert isatap.payload == IPv4Address("10.0.0.1")
    assert isatap.block is not None
    assert isatap.block.name == "private use"


@pytest.mark.parametrize("block", [*IPV4_BLOCKS, *IPV6_BLOCKS], ids=lambda b: str(b.network))
def test_first_and_last_address_of_every_block_is_refused(block: object) -> None:
    network = block.network  # type: ignore[attr-defined]
    for address in (network[0], network[-1]):
        verdict = classify(address)
        # IPv4-mapped and NAT64 forms are judged by payload; the rest of the block is not.
        assert not verdict.public, address


def test_default_policy_allows_only_port_443_and_no_exemptions() -> None:
    policy = Policy()
    assert policy.ports == frozenset({443})
    assert not policy.allows_address(IPv4Address("127.0.0.1"))
    assert policy.allows_address(IPv4Address("93.184.216.34"))


def test_test_policy_exemption_is_exactly_the_named_network() -> None:
    policy = Policy(exempt=(ip_network("127.0.0.1/32"),))
    assert policy.allows_address(IPv4Address("127.0.0.1"))
    assert not policy.allows_address(IPv4Address("127.0.0.2"))
    assert not policy.allows_address(IPv6Address("::1"))
    assert not policy.allows_address(IPv6Address("::ffff:127.0.0.2"))


ipv4 = st.integers(0, 2**32 - 1).map(IPv4Address)
ipv6 = st.integers(0, 2**128 - 1).map(IPv6Address)


@given(ipv4)
def test_every_allowed_ipv4_address_is_outside_every_block(address: IPv4Address) -> None:
    if classify(address).public:
        assert all(address not in block.network for block in IPV4_BLOCKS)


@given(st.one_of(ipv6, ipv4.map(lambda a: IPv6Address(0xFFFF_0000_0000 | int(a)))))
def test_every_allowed_ipv6_address_is_global_unicast_or_a_public_payload(
    address: IPv6Address,
) -> None:
    verdict = classify(address)
    if not verdict.public:
        return
    if verdict.payload is not None:
        assert all(verdict.payload not in block.network for block in IPV4_BLOCKS)
    else:
        assert address in IPV6_GLOBAL_UNICAST
        assert all(address not in block.network for block in IPV6_BLOCKS)


@given(st.integers(0, 2**32 - 1))
def test_ipv4_and_its_mapped_and_nat64_forms_agree(number: int) -> None:
    plain = classify(IPv4Address(number)).public
    assert classify(IPv6Address(0xFFFF_0000_0000 | number)).public is plain
    assert classify(ip_address(int(IPv6Address("64:ff9b::")) | number)).public is plain
