"""The systemd units: valid, sandboxed, a kernel deny list that matches the policy table,
and a memory limit that holds every worker at its own limit at once.

``IPAddressDeny=`` is the backstop behind the fetcher's own checks (SPEC 9): every block
``fetcher.net.policy`` refuses must be denied by the kernel too, and public destinations (also
through IPv4-mapped and NAT64 spellings) must not be.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network
from pathlib import Path

import pytest

from fetcher.crawl import MAX_PAGES
from fetcher.isolation.workers import WorkLimits
from fetcher.net.download import Limits
from fetcher.net.policy import IPV4_BLOCKS, IPV6_BLOCKS
from fetcher.pdf.reader import PdfReader
from fetcher.server import PDFS_HELD_PER_WORKER
from fetcher.settings import Settings

UNITS = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
IPNetwork = IPv4Network | IPv6Network
MIB = 1 << 20


def directives(unit: str, name: str) -> list[str]:
    values = []
    for line in (UNITS / unit).read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == name:
            values += value.split()
    return values


def denied() -> list[IPNetwork]:
    return [ip_network(value) for value in directives("fetcher.service", "IPAddressDeny")]


def is_denied(network: IPNetwork) -> bool:
    return any(
        network.version == deny.version and network.subnet_of(deny)  # type: ignore[arg-type]
        for deny in denied()
    )


# ::/8 also holds IPv4-mapped addresses, which are denied by payload instead; the rest of
# ::/8 is not routable. The catch-all outside 2000::/3 is not a table block.
NOT_DENIED_WHOLE = {"::/8"}


@pytest.mark.parametrize("block", IPV4_BLOCKS, ids=lambda b: str(b.network))
def test_every_ipv4_block_of_the_policy_is_denied_by_the_kernel(block: object) -> None:
    network = block.network  # type: ignore[attr-defined]
    assert is_denied(network)
    mapped = ip_network(f"::ffff:{network.network_address}/{96 + network.prefixlen}")
    nat64 = ip_network(f"64:ff9b::{network.network_address}/{96 + network.prefixlen}")
    assert is_denied(mapped)
    assert is_denied(nat64)


@pytest.mark.parametrize(
    "block",
    [b for b in IPV6_BLOCKS if str(b.network) not in NOT_DENIED_WHOLE],
    ids=lambda b: str(b.network),
)
def test_every_ipv6_block_of_the_policy_is_denied_by_the_kernel(block: object) -> None:
    assert is_denied(block.network)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"],
)
def test_public_destinations_are_not_denied(address: str) -> None:
    assert not is_denied(ip_network(ip_address(address)))


def test_the_fetcher_unit_itself_allows_no_denied_address() -> None:
    # The DNS resolvers' holes come from the drop-in deploy/install.sh writes.
    assert directives("fetcher.service", "IPAddressAllow") == []


def test_both_units_read_the_installed_settings_and_hide_the_rest_of_proc() -> None:
    for unit in ("fetcher.service", "gateway.service"):
        assert "TIGRESS_CONFIG=/etc/tigress/tigress.toml" in directives(unit, "Environment")
        assert directives(unit, "ProcSubset") == ["pid"]
        assert directives(unit, "Documentation") == ["file:///opt/tigress/README.md"]
    assert directives("gateway.service", "EnvironmentFile") == ["-/etc/tigress/gateway.env"]


def test_the_gateway_keeps_no_state_directory() -> None:
    assert directives("gateway.service", "StateDirectory") == []


def test_the_gateway_reaches_only_localhost() -> None:
    assert directives("gateway.service", "IPAddressAllow") == ["localhost"]
    assert directives("gateway.service", "IPAddressDeny") == ["any"]


def test_both_services_run_as_dynamic_users_without_capabilities() -> None:
    for unit in ("fetcher.service", "gateway.service"):
        assert directives(unit, "DynamicUser") == ["yes"]
        assert directives(unit, "CapabilityBoundingSet") == []
        assert directives(unit, "ProtectSystem") == ["strict"]


@pytest.fixture
def runnable_units(tmp_path: Path) -> Path:
    """The units with ExecStart's interpreter swapped for this one, so verify can check it."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    for unit in UNITS.iterdir():
        if unit.suffix in (".service", ".socket"):
            text = unit.read_text().replace("/opt/tigress/venv/bin/python", sys.executable)
            (tmp_path / unit.name).write_text(text)
    return tmp_path


def test_units_verify(runnable_units: Path) -> None:
    names = ["fetcher.service", "gateway.service", "fetcher-metrics.socket"]
    done = subprocess.run(
        ["systemd-analyze", "verify", *(str(runnable_units / n) for n in names)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("unit", ["fetcher.service", "gateway.service"])
def test_exposure_score_stays_low(runnable_units: Path, unit: str) -> None:
    done = subprocess.run(
        [
            "systemd-analyze",
            "security",
            "--offline=yes",
            "--threshold=15",  # exposure 1.5 (the scale is 0-100)
            str(runnable_units / unit),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:]


def test_a_bad_setting_is_not_retried() -> None:
    # Both programs exit 2 naming a bad setting; restarting cannot fix it.
    for unit in ("fetcher.service", "gateway.service"):
        assert directives(unit, "RestartPreventExitStatus") == ["2"]


def _size(value: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(value[:-1]) * units[value[-1]] if value[-1] in units else int(value)


#: The fetcher's own processes, measured at rest by bench/memory.py (RSS): the process
#: 61 MiB, the render pool's forkserver 41 MiB, multiprocessing's resource tracker 13 MiB
#: (115 MiB); counted at more than twice that, for the process's own growth under load
#: beyond the bodies counted apart.
FETCHER_OWN = 256 * MIB


def memory_at_the_limits(settings: Settings) -> dict[str, int]:
    """What each part of the fetcher may hold at once, every worker at its own limit."""
    pdfs_held = PDFS_HELD_PER_WORKER * settings.pdf_workers
    return {
        "fetcher processes": FETCHER_OWN,
        # A fresh worker per page, killed after it: never more than render_workers at once.
        "render workers": settings.render_workers * WorkLimits().memory_bytes,
        "PDF workers": settings.pdf_workers * PdfReader().limits.memory_bytes,
        # Held from the first byte until read; twice: a body is copied once when it ends.
        "PDF bodies": pdfs_held * 2 * settings.pdf_max_bytes,
        # Per read: its pages waiting for their turn at the render pool (at most the crawl's
        # pages) and the downloads under way, each copied once when it ends.
        "page bodies": settings.max_concurrent_reads
        * (MAX_PAGES + settings.crawl_concurrency)
        * Limits().max_bytes,
    }


def test_every_worker_at_its_limit_fits_the_units_memory() -> None:
    # Every render and PDF worker at its address-space limit, every body held at its size
    # limit, the rest of the fetcher counted with margin: no read, however hostile, can take
    # the unit to MemoryMax, where OOMPolicy=stop would stop the whole fetcher.
    (memory_max,) = directives("fetcher.service", "MemoryMax")
    (memory_high,) = directives("fetcher.service", "MemoryHigh")
    settings = Settings()
    parts = memory_at_the_limits(settings)
    assert Limits().pdfs_held == PDFS_HELD_PER_WORKER * settings.pdf_workers
    # A tenth kept free: the cgroup also counts kernel memory (page tables, socket buffers)
    # and the page cache of the program's files.
    assert sum(parts.values()) <= _size(memory_max) * 9 // 10, parts
    assert _size(memory_high) < _size(memory_max)
