"""Lookups through c-ares against a real DNS server on loopback (issue 15, item B)."""

from __future__ import annotations

import asyncio
from ipaddress import ip_address

import pytest

from fetcher.cli import check_urls
from fetcher.errors import ResolveError
from fetcher.net.policy import Policy
from fetcher.net.resolver import DnsResolver
from testkit.dns import running_dns

TABLE = {"good.test": ["192.0.2.10", "2001:db8::10"]}


async def test_a_name_resolves_to_its_ipv4_and_ipv6_addresses() -> None:
    async with running_dns(TABLE) as server:
        resolver = DnsResolver(nameservers=[server.address], timeout=2.0)
        try:
            answers = await resolver.resolve("good.test")
        finally:
            await resolver.aclose()
    assert set(answers) == {ip_address("192.0.2.10"), ip_address("2001:db8::10")}


async def test_a_name_that_is_never_answered_fails_with_a_timeout() -> None:
    async with running_dns(TABLE) as server:
        resolver = DnsResolver(nameservers=[server.address], timeout=0.5)
        try:
            with pytest.raises(ResolveError, match="timed out"):
                await resolver.resolve("hung.test")
        finally:
            await resolver.aclose()
    assert "hung.test" in server.queries


async def test_names_that_never_resolve_delay_only_themselves() -> None:
    """Eight lookups that hang do not hold up a ninth, nor the resolver's close."""
    async with running_dns(TABLE) as server:
        resolver = DnsResolver(nameservers=[server.address], timeout=30.0)
        hung = [asyncio.create_task(resolver.resolve(f"hung{n}.test")) for n in range(8)]
        try:
            while len(set(server.queries)) < 8:  # every hung lookup is out on the wire
                await asyncio.sleep(0.01)
            good = await asyncio.wait_for(resolver.resolve("good.test"), 5.0)
            assert ip_address("192.0.2.10") in good
            assert not any(task.done() for task in hung)
        finally:
            await asyncio.wait_for(resolver.aclose(), 5.0)
            for task in hung:
                task.cancel()
            await asyncio.gather(*hung, return_exceptions=True)


async def test_the_system_configuration_reads_etc_hosts() -> None:
    """As the system resolver does: /etc/hosts names resolve without DNS."""
    resolver = DnsResolver(timeout=2.0)
    try:
        answers = await resolver.resolve("localhost")
    finally:
        await resolver.aclose()
    assert ip_address("127.0.0.1") in answers or ip_address("::1") in answers


CHECKED = {
    "chain.test": ["CNAME:c1.test.", "CNAME:c2.test.", "CNAME:c3.test.", "c3.test.=10.0.0.1"],
    "chain-public.test": ["CNAME:c9.test.", "c9.test.=93.184.216.34"],
    "dual.test": ["93.184.216.34", "fd00::1"],
    "dual-public.test": ["93.184.216.34", "2606:4700::1111"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "big.test": [*(f"93.184.{n // 200}.{n % 200 + 1}" for n in range(150)), "169.254.169.254"],
    "big-public.test": [f"93.184.{n // 200}.{n % 200 + 1}" for n in range(150)],
    "stray.test": ["other.test.=10.0.0.1", "93.184.216.34"],
}


@pytest.mark.parametrize(
    ("name", "reason", "count"),
    [
        ("chain.test", "not_public", 1),
        ("chain-public.test", "allowed", 1),
        ("dual.test", "not_public", 2),
        ("dual-public.test", "allowed", 2),
        ("mapped.test", "not_public", 1),
        ("big.test", "not_public", 151),
        ("big-public.test", "allowed", 150),
        ("stray.test", "not_public", 2),
        ("unknown.test", "dns", 0),
    ],
)
async def test_every_answer_of_a_real_lookup_is_checked(name: str, reason: str, count: int) -> None:
    """CNAME chains, A and AAAA together, answers too big for UDP (fetched over TCP), and
    records for another name in the answer: whatever c-ares returns is judged, all of it."""
    async with running_dns(CHECKED) as server:
        resolver = DnsResolver(nameservers=[server.address], timeout=1.0)
        try:
            (result,) = await check_urls([f"https://{name}/"], resolver=resolver, policy=Policy())
        finally:
            await resolver.aclose()
    assert result["reason"] == reason
    assert len(result["addresses"]) == count
