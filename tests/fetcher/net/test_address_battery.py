"""A generated battery of hostile addresses: every verdict right, and every path agreeing.

Rule 2 and SPEC 7 step 1 on about two thousand addresses: both sides of every boundary of
the IANA special-purpose registries, each written in every spelling a resolver or a URL
parser might read as that address (inet_aton numbers, short forms, octal and hex parts,
trailing dots, full-width and other Unicode digits and dots, every IPv4-inside-IPv6
form), the parser tricks of ``shared/notes/ssrf.md``, odd ports, and names whose answers
mix public and private addresses. Three paths must give the same word for each:
``python -m fetcher check`` (a real process), the guard in-process, and the download
(which must refuse before connecting, with the same reason).

The expectations come from this file's own tables, written from the registries
(https://www.iana.org/assignments/iana-ipv4-special-registry and
iana-ipv6-special-registry), not from ``fetcher.net.policy``; Python's ``is_global`` is a
second opinion that must never call public what is refused here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

import pytest

from fetcher.cli import check_urls
from fetcher.net.download import Downloader
from fetcher.net.policy import Policy
from fetcher.net.resolver import StaticResolver
from fetcher.net.urls import Address, parse
from fetcher.outcome import Failed

# Not globally reachable (registry "Globally Reachable" False or N/A), plus multicast,
# reserved and broadcast. AS112 (192.31.196.0/24, 192.175.48.0/24) and AMT
# (192.52.193.0/24) are globally reachable; 192.0.0.0/24 is refused whole (its two
# reachable anycast addresses are never web servers).
NOT_PUBLIC_V4 = [
    IPv4Network(cidr)
    for cidr in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "255.255.255.255/32",
    )
]
# Inside 2000::/3 (the only space with public addresses), the blocks that are not public.
NOT_PUBLIC_V6_IN_GLOBAL = [
    IPv6Network(cidr) for cidr in ("2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20")
]
# Outside 2000::/3, listed for their boundaries (all of it is refused anyway).
V6_BOUNDARIES = [
    IPv6Network(cidr)
    for cidr in (
        "::/128",
        "::1/128",
        "::ffff:0:0/96",
        "64:ff9b::/96",
        "64:ff9b:1::/48",
        "100::/64",
        "100:0:0:1::/64",
        "2000::/3",
        "5f00::/16",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
        *(str(n) for n in NOT_PUBLIC_V6_IN_GLOBAL),
    )
]
MAPPED = IPv6Network("::ffff:0:0/96")
NAT64 = IPv6Network("64:ff9b::/96")
GLOBAL_UNICAST = IPv6Network("2000::/3")


def public_v4(address: IPv4Address) -> bool:
    return not any(address in network for network in NOT_PUBLIC_V4)


def _isatap(address: IPv6Address) -> IPv4Address | None:
    identifier = int(address) & (2**64 - 1)
    if (identifier >> 32) & 0xFCFF_FFFF == 0x5EFE:
        return IPv4Address(identifier & 0xFFFF_FFFF)
    return None


def public_v6(address: IPv6Address) -> bool:
    if address in MAPPED or address in NAT64:
        return public_v4(IPv4Address(int(address) & 0xFFFF_FFFF))
    if address not in GLOBAL_UNICAST or any(address in n for n in NOT_PUBLIC_V6_IN_GLOBAL):
        return False
    isatap = _isatap(address)
    return isatap is None or public_v4(isatap)


def verdict(address: IPv4Address | IPv6Address) -> str:
    public = public_v4(address) if isinstance(address, IPv4Address) else public_v6(address)
    return "allowed" if public else "not_public"


@dataclasses.dataclass(frozen=True)
class Case:
    """One address, the word every path must give, and (for IP hosts) the address meant."""

    url: str
    reason: str
    address: IPv4Address | IPv6Address | None = None


# --- IPv4 in every spelling ----------------------------------------------------------------

FULLWIDTH = str.maketrans("0123456789.", "０１２３４５６７８９．")
IDEOGRAPHIC_DOTS = str.maketrans(".", "。")
HALFWIDTH_DOTS = str.maketrans(".", "｡")
ENCLOSED = str.maketrans("0123456789", "⓪①②③④⑤⑥⑦⑧⑨")
MATH_BOLD = str.maketrans("0123456789", "𝟎𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖𝟗")


def ipv4_spellings(address: IPv4Address) -> Iterator[str]:
    """Host spellings that inet_aton, WHATWG or IDNA read as ``address``."""
    n = int(address)
    a, b, c, d = address.packed
    dotted = str(address)
    yield dotted
    yield dotted + "."
    yield str(n)
    yield f"0x{n:x}"
    yield f"0X{n:08X}"
    yield f"0{n:o}"
    yield f"0{a:o}.0{b:o}.0{c:o}.0{d:o}"
    yield f"0x{a:x}.0x{b:x}.0x{c:x}.0x{d:x}"
    yield f"0x{a:02x}.0{b:o}.{c}.0x{d:x}"
    yield f"{a}.{b}.{c * 256 + d}"
    yield f"{a}.{(b << 16) | (c << 8) | d}"
    yield f"0x{a:x}.0x{(b << 16) | (c << 8) | d:x}"
    yield f"{a:03d}.{b}.{c}.{d}" if a < 8 else f"{a}.{b}.{c}.{d:d}"
    yield dotted.translate(FULLWIDTH)
    yield dotted.translate(IDEOGRAPHIC_DOTS)
    yield dotted.translate(HALFWIDTH_DOTS) + "。"
    yield dotted.translate(ENCLOSED)
    yield dotted.translate(MATH_BOLD)


def ipv4_cases(address: IPv4Address) -> Iterator[Case]:
    expected = verdict(address)
    for host in ipv4_spellings(address):
        yield Case(f"https://{host}/", expected, address)
    yield Case(f"http://{address}:80/x?q", expected, address)
    hi, lo = int(address) >> 16, int(address) & 0xFFFF
    for form in (f"::ffff:{address}", f"::ffff:{hi:x}:{lo:x}", f"64:ff9b::{address}"):
        embedded = IPv6Address(form)
        yield Case(f"https://[{form}]/", verdict(embedded), embedded)
    # Forms whose own prefix is not public are refused whatever they carry.
    for form in (
        f"::{address}",
        f"::ffff:0:{address}",
        f"64:ff9b:1::{address}",
        f"2002:{hi:x}:{lo:x}::1",
        f"2001:0:4136:e378:8000:63bf:{hi ^ 0xFFFF:x}:{lo ^ 0xFFFF:x}",
        f"fe80::5efe:{address}",
    ):
        embedded = IPv6Address(form)
        yield Case(f"https://[{form}]/", "not_public", embedded)
    for form in (f"2606:4700::5efe:{address}", f"2606:4700::200:5efe:{address}"):
        embedded = IPv6Address(form)
        yield Case(f"https://[{form}]/", expected, embedded)


def v4_points() -> list[IPv4Address]:
    points = {
        IPv4Address(text)
        for text in (
            "169.254.169.254",
            "100.100.100.200",
            "8.8.8.8",
            "1.1.1.1",
            "93.184.216.34",
            "192.31.196.1",
            "192.52.193.1",
            "192.175.48.1",
        )
    }
    for network in NOT_PUBLIC_V4:
        first, last = int(network.network_address), int(network.broadcast_address)
        for number in (first - 1, first, last, last + 1):
            if 0 <= number < 2**32:
                points.add(IPv4Address(number))
    return sorted(points)


# --- IPv6 boundaries -------------------------------------------------------------------------


def v6_cases() -> Iterator[Case]:
    points: set[IPv6Address] = {IPv6Address("2606:4700:4700::1111"), IPv6Address("2620:4f:8000::1")}
    for network in V6_BOUNDARIES:
        first, last = int(network.network_address), int(network.broadcast_address)
        for number in (first - 1, first, last, last + 1):
            if 0 <= number < 2**128:
                points.add(IPv6Address(number))
    for address in sorted(points):
        expected = verdict(address)
        yield Case(f"https://[{address.compressed}]/", expected, address)
        yield Case(f"https://[{address.exploded.upper()}]:443/", expected, address)
        yield Case(f"http://[{address.exploded}]:80/", expected, address)


# --- parser tricks, ports and names ------------------------------------------------------

PUBLIC_NAME = "pub.test"
NAMES = {
    PUBLIC_NAME: ["93.184.216.34"],
    "v6.pub.test": ["2606:4700::1111"],
    "both.pub.test": ["93.184.216.34", "2606:4700::1111"],
    "private.test": ["10.0.0.1"],
    "mixed.test": ["93.184.216.34", "127.0.0.1"],
    "mixed6.test": ["2606:4700::1111", "fd00::1"],
    "meta.test": ["169.254.169.254"],
    "cgnat.test": ["100.100.100.200"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "nat64.test": ["64:ff9b::a9fe:a9fe"],
    "isatap.test": ["2606:4700::5efe:a00:1"],
    "zero.test": ["0.0.0.0"],
    "many.test": [*(f"93.184.216.{n}" for n in range(1, 60)), "192.168.1.1"],
}

TRICKS: list[tuple[str, str]] = [
    # Userinfo and @ anywhere
    ("https://user@pub.test/", "userinfo"),
    ("https://user:pass@pub.test/", "userinfo"),
    ("https://:@pub.test/", "userinfo"),
    ("https://pub.test@127.0.0.1/", "userinfo"),
    ("https://pub.test%2f@127.0.0.1/", "userinfo"),
    ("https://pub.test;@127.0.0.1/", "userinfo"),
    ("https://a@b@127.0.0.1/", "malformed"),
    ("https://pub.test/@127.0.0.1", "allowed"),
    ("https://pub.test?@127.0.0.1/", "allowed"),
    ("https://pub.test#@127.0.0.1/", "allowed"),
    ("https://pub.test/path?u=a@127.0.0.1", "allowed"),
    ("https://pub.test＠127.0.0.1/", "malformed"),
    ("https://pub.test／@127.0.0.1/", "userinfo"),
    # Backslashes, whitespace, control characters
    ("https://pub.test\\@127.0.0.1/", "malformed"),
    ("https:\\\\127.0.0.1/", "malformed"),
    ("https://pub.test\\.127.0.0.1/", "malformed"),
    ("https://127.0.0.1\\pub.test/", "malformed"),
    ("https:/\\127.0.0.1/", "malformed"),
    ("https://pub.test/\\", "malformed"),
    ("https://127.0.0.1\t/", "malformed"),
    ("https://127.0.\t0.1/", "malformed"),
    ("https://127.0.0.1\n.pub.test/", "malformed"),
    ("https://pub.test/\r\nX: y", "malformed"),
    (" https://pub.test/", "malformed"),
    ("https://pub.test/ ", "malformed"),
    ("https://pub.test\u200b/", "malformed"),
    ("https://pub\u00ad.test/", "malformed"),
    ("https://pub.test\u2028/", "malformed"),
    ("https://pub.test\u3000/", "malformed"),
    # Percent-encoding in the host
    ("https://%31%32%37.0.0.1/", "malformed"),
    ("https://127.0.0.1%2e/", "malformed"),
    ("https://pub%2etest/", "malformed"),
    ("https://pub.test%3a443/", "malformed"),
    ("https://pub.test%40127.0.0.1/", "malformed"),
    ("https://pub.test%00.evil/", "malformed"),
    ("https://pub.test/%2e%2e/%40", "allowed"),
    # Brackets and zones
    ("https://[::1%25eth0]/", "malformed"),
    ("https://[fe80::1%eth0]/", "malformed"),
    ("https://[fe80::1%25lo]:443/", "malformed"),
    ("https://[::ffff:127.0.0.1%25lo]/", "malformed"),
    ("https://[127.0.0.1]/", "malformed"),
    ("https://[::1/", "malformed"),
    ("https://::1]/", "malformed"),
    ("https://::1/", "malformed"),
    ("https://[::1]]/", "malformed"),
    ("https://[[::1]]/", "malformed"),
    ("https://[::1]pub.test/", "malformed"),
    ("https://[v1.fe80::1]/", "malformed"),
    ("https://[::ffff:0127.0.0.1]/", "malformed"),
    ("https://[::ffff:127.1]/", "malformed"),
    ("https://[0:0:0:0:0:0:0:0:1]/", "malformed"),
    ("https://[::1::]/", "malformed"),
    # Not IPv4 after all: malformed, or a name that goes to DNS
    ("https://1.2.3.4.5/", "malformed"),
    ("https://127.0.0.0.1/", "malformed"),
    ("https://256.0.0.1/", "malformed"),
    ("https://127.0.0.256/", "malformed"),
    ("https://127.0.65536/", "malformed"),
    ("https://127.16777216/", "malformed"),
    ("https://4294967296/", "malformed"),
    ("https://0x100000000/", "malformed"),
    ("https://08.0.0.1/", "malformed"),
    ("https://0x7g.0.0.1/", "malformed"),
    ("https://127..0.1/", "malformed"),
    ("https://127.0.0.1../", "malformed"),
    ("https://.127.0.0.1/", "malformed"),
    ("https://pub.test.1/", "malformed"),
    ("https://1.1.1.1.pub.test/", "dns"),
    ("https://127.0.0.1.pub.test/", "dns"),
    ("https://0x7f.pub/", "dns"),
    ("https://١٢٧.٠.٠.١/", "malformed"),
    # Names: case, trailing dots, IDNA
    ("https://PUB.TEST/", "allowed"),
    ("https://pub.test./", "allowed"),
    ("https://pub.test../", "malformed"),
    ("https://ｐｕｂ．ｔｅｓｔ/", "allowed"),
    ("https://pub。test/", "allowed"),
    ("https://xn--pub-test/", "malformed"),
    ("https://-pub.test/", "malformed"),
    ("https://" + "a" * 64 + ".test/", "malformed"),
    ("https://" + "a." * 127 + "test/", "malformed"),
    # Schemes
    ("ftp://pub.test/", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("gopher://127.0.0.1:70/", "scheme"),
    ("javascript:alert(1)", "scheme"),
    ("data:text/html,x", "scheme"),
    ("ws://pub.test/", "scheme"),
    ("wss://pub.test/", "scheme"),
    ("HTTP://pub.test/", "allowed"),
    ("hTtPs://pub.test/", "allowed"),
    ("https:pub.test", "malformed"),
    ("https:/pub.test", "malformed"),
    ("https:///pub.test", "malformed"),
    ("//pub.test/", "malformed"),
    ("pub.test", "malformed"),
    ("", "malformed"),
    ("https://", "malformed"),
    ("https://:443/", "malformed"),
    # Ports
    ("https://pub.test:443/", "allowed"),
    ("https://pub.test:0443/", "allowed"),
    ("https://pub.test:00443/", "allowed"),
    ("https://pub.test:/", "allowed"),
    ("https://pub.test:/x", "allowed"),
    ("http://pub.test:80/", "allowed"),
    ("http://pub.test:080/", "allowed"),
    ("http://pub.test:443/", "allowed"),
    ("https://pub.test:80/", "port"),
    ("http://pub.test:8080/", "port"),
    ("https://pub.test:442/", "port"),
    ("https://pub.test:444/", "port"),
    ("https://pub.test:0/", "port"),
    ("https://pub.test:22/", "port"),
    ("https://pub.test:65535/", "port"),
    ("https://pub.test:000443/", "malformed"),
    ("https://pub.test:65536/", "malformed"),
    ("https://pub.test:+443/", "malformed"),
    ("https://pub.test:-443/", "malformed"),
    ("https://pub.test:0x1bb/", "malformed"),
    ("https://pub.test:443:443/", "malformed"),
    ("https://pub.test:４４３/", "malformed"),
    ("https://pub.test:443 /", "malformed"),
    ("https://pub.test::443/", "malformed"),
    # Names whose answers are checked, every one of them
    ("https://v6.pub.test/", "allowed"),
    ("https://both.pub.test/", "allowed"),
    ("https://private.test/", "not_public"),
    ("https://mixed.test/", "not_public"),
    ("https://mixed6.test/", "not_public"),
    ("https://meta.test/", "not_public"),
    ("https://cgnat.test/", "not_public"),
    ("https://mapped.test/", "not_public"),
    ("https://nat64.test/", "not_public"),
    ("https://isatap.test/", "not_public"),
    ("https://zero.test/", "not_public"),
    ("https://many.test/", "not_public"),
    ("https://MIXED.test./", "not_public"),
    ("https://unknown.test/", "dns"),
    # Length
    ("https://pub.test/" + "a" * 8200, "malformed"),
    ("https://pub.test/" + "é" * 1400, "malformed"),
    ("https://pub.test/" + "a" * 8000, "allowed"),
]


def all_cases() -> list[Case]:
    cases = [case for point in v4_points() for case in ipv4_cases(point)]
    cases += list(v6_cases())
    cases += [Case(url, reason) for url, reason in TRICKS]
    return cases


CASES = all_cases()
# A process argument cannot hold NUL; those cases are checked in-process only.
CLI_CASES = [case for case in CASES if "\x00" not in case.url]


def test_the_battery_is_big_and_covers_both_verdicts() -> None:
    reasons = {case.reason for case in CASES}
    assert len(CASES) > 1500
    assert {"allowed", "not_public", "malformed", "userinfo", "port", "scheme", "dns"} <= reasons


def _resolver() -> StaticResolver:
    return StaticResolver(NAMES)


async def test_the_guard_gives_every_address_its_word() -> None:
    results = await check_urls([case.url for case in CASES], resolver=_resolver(), policy=Policy())
    wrong = [
        (case.url, case.reason, result["reason"])
        for case, result in zip(CASES, results, strict=True)
        if result["reason"] != case.reason
    ]
    assert wrong == []
    for case, result in zip(CASES, results, strict=True):
        if case.address is not None and case.reason in ("allowed", "not_public"):
            assert result["addresses"] == [str(case.address)], case.url


def test_the_check_command_gives_every_address_its_word() -> None:
    resolves = [f"--resolve={name}:{ip}" for name, ips in NAMES.items() for ip in ips]
    done = subprocess.run(
        [sys.executable, "-m", "fetcher", "check", *resolves, *(c.url for c in CLI_CASES)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 3, done.stderr
    assert [line["url"] for line in lines] == [case.url for case in CLI_CASES]
    wrong = [
        (case.url, case.reason, line["reason"])
        for case, line in zip(CLI_CASES, lines, strict=True)
        if line["reason"] != case.reason or line["allowed"] is not (case.reason == "allowed")
    ]
    assert wrong == []


def _allowed_hosts(url: str) -> list[str]:
    """What a gateway that lets the address through rule 1 passes."""
    address = parse(url, ports=frozenset(range(1, 65536)))
    return [address.host] if isinstance(address, Address) else ["pub.test"]


async def test_the_download_refuses_with_the_same_word_before_connecting() -> None:
    refused = [case for case in CASES if case.reason != "allowed"]
    async with Downloader(resolver=_resolver()) as downloader:
        outcomes = await asyncio.gather(
            *(
                downloader.download(case.url, allowed_hosts=_allowed_hosts(case.url))
                for case in refused
            )
        )
    wrong = []
    for case, outcome in zip(refused, outcomes, strict=True):
        assert isinstance(outcome, Failed), case.url
        if str(outcome.reason) != case.reason or outcome.resolved_ip is not None:
            wrong.append((case.url, case.reason, str(outcome.reason), outcome.resolved_ip))
    assert wrong == []


@pytest.mark.parametrize("case", [c for c in CASES if c.reason == "allowed" and c.address])
def test_python_is_global_never_calls_refused_what_is_allowed_here(case: Case) -> None:
    """The second opinion: an address allowed here is global to Python too (embedded forms
    by their IPv4 payload, which Python does not look at)."""
    address = case.address
    assert address is not None
    if isinstance(address, IPv6Address):
        if address in MAPPED or address in NAT64:
            address = IPv4Address(int(address) & 0xFFFF_FFFF)
        elif (payload := _isatap(address)) is not None:
            assert ip_address(payload).is_global
    assert address.is_global, case.url
