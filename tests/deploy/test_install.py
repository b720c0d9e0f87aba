"""What ``make install`` writes, checked without root: the DNS drop-in, the example files.

The installer itself runs under a real systemd in ``test_systemd.py``.
"""

from __future__ import annotations

import subprocess
from ipaddress import ip_address, ip_network
from pathlib import Path

import pytest
import trustme

from deploy.resolvers import dropin, main, nameservers, notes
from fetcher.net.download import PDF_MAX_BYTES_CEILING
from fetcher.settings import load_settings as fetcher_settings
from gateway.settings import load_settings as gateway_settings
from tests.deploy.test_units import directives, is_denied

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "etc" / "tigress.toml"


@pytest.mark.parametrize(
    ("resolv_conf", "expected"),
    [
        ("nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n", ["127.0.0.53"]),
        ("# cloud\nnameserver 10.0.0.2\n", ["10.0.0.2"]),
        ("nameserver 169.254.169.253\n", ["169.254.169.253"]),
        ("nameserver fe80::1%eth0\nnameserver 192.168.1.1\n", ["fe80::1", "192.168.1.1"]),
        ("nameserver 10.0.0.2\nnameserver 10.0.0.2\nnameserver 1.1.1.1\n", ["10.0.0.2", "1.1.1.1"]),
        ("nameserver 9.9.9.9\nnameserver 8.8.8.8\nnameserver 1.1.1.1\nnameserver 10.0.0.2\n",
         ["9.9.9.9", "8.8.8.8", "1.1.1.1"]),
        ("  nameserver   10.1.2.3  # the router\n", ["10.1.2.3"]),
        ("nameserver\nnameserver resolver.lan\n#nameserver 10.0.0.9\n; nameserver 10.0.0.8\n", []),
        ("domain example.net\n", []),
    ],
    ids=["resolved-stub", "vpc", "link-local", "ipv6-zone", "duplicate", "glibc-asks-three",
         "spacing", "not-addresses", "none"],
)  # fmt: skip
def test_nameservers_are_the_ones_glibc_asks(resolv_conf: str, expected: list[str]) -> None:
    assert [str(server) for server in nameservers(resolv_conf)] == expected


@pytest.mark.parametrize("resolver", ["127.0.0.53", "10.0.0.2", "169.254.169.253", "fd00::53"])
def test_dropin_opens_exactly_the_resolver_the_unit_denies(resolver: str) -> None:
    address = ip_address(resolver)
    assert is_denied(ip_network(address))
    text = dropin([address])
    assert text.splitlines()[3] == "[Service]"
    allows = [
        ip_network(line.partition("=")[2])
        for line in text.splitlines()
        if line.startswith("IPAddressAllow=")
    ]
    assert allows == [ip_network(address)]
    assert allows[0].num_addresses == 1


def test_dropin_for_no_resolver_allows_nothing_and_says_why() -> None:
    assert "\nIPAddressAllow=" not in dropin([])
    (note,) = notes([])
    assert "127.0.0.1" in note


def test_notes_say_the_allow_covers_every_port_and_the_stubs_upstreams_need_none() -> None:
    stub, vpc = notes([ip_address("127.0.0.53"), ip_address("10.0.0.2")])
    assert "upstreams are asked by resolved itself" in stub
    assert "every port" in vpc


def test_main_prints_the_dropin_of_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 10.0.0.2\n")
    assert main([str(resolv)]) == 0
    out, err = capsys.readouterr()
    assert "IPAddressAllow=10.0.0.2/32\n" in out
    assert "allowing 10.0.0.2" in err
    assert main([str(tmp_path / "absent")]) == 1


def test_example_settings_load_in_both_services(tmp_path: Path) -> None:
    gateway = gateway_settings({"TIGRESS_CONFIG": str(EXAMPLE)})
    assert gateway.fetcher == ("unix:/run/fetcher/fetcher.sock",)
    assert gateway.api_keys == ()
    fetcher = fetcher_settings(environ={"TIGRESS_CONFIG": str(EXAMPLE)})
    assert [listen.target for listen in fetcher.listen] == ["unix:/run/fetcher/fetcher.sock"]
    assert fetcher.extra_ca_file is None


def test_example_pdf_lines_show_the_defaults_and_work_once_uncommented(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    config = tmp_path / "tigress.toml"
    config.write_text(
        text.replace("#pdf_max_bytes", "pdf_max_bytes").replace("#pdf_workers", "pdf_workers")
    )
    uncommented = fetcher_settings(environ={"TIGRESS_CONFIG": str(config)})
    defaults = fetcher_settings(environ={})
    assert (uncommented.pdf_max_bytes, uncommented.pdf_workers) == (
        defaults.pdf_max_bytes,
        defaults.pdf_workers,
    )
    assert f"at most\n# {PDF_MAX_BYTES_CEILING}" in text


def test_example_extra_ca_line_works_once_uncommented(tmp_path: Path) -> None:
    ca_file = tmp_path / "extra-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(ca_file))
    text = EXAMPLE.read_text()
    assert '\n#extra_ca_file = "/etc/tigress/extra-ca.pem"\n' in text
    config = tmp_path / "tigress.toml"
    config.write_text(
        text.replace('#extra_ca_file = "/etc/tigress/extra-ca.pem"', f'extra_ca_file = "{ca_file}"')
    )
    bundle = fetcher_settings(environ={"TIGRESS_CONFIG": str(config)}).extra_ca_file
    assert bundle is not None
    assert bundle.certificates == 1


def test_example_environment_file_ships_no_value() -> None:
    lines = (ROOT / "deploy" / "etc" / "gateway.env").read_text().splitlines()
    assert all(not line or line.startswith("#") for line in lines)


def test_units_documentation_is_the_guide_the_installer_puts_there() -> None:
    script = (ROOT / "deploy" / "install.sh").read_text()
    assert '"$SRC/deploy/systemd/README.md" "$PREFIX/README.md"' in script
    assert "PREFIX=/opt/tigress\n" in script
    assert directives("fetcher.service", "Documentation") == ["file:///opt/tigress/README.md"]


def test_install_script_is_valid_shell() -> None:
    subprocess.run(["sh", "-n", str(ROOT / "deploy" / "install.sh")], check=True, timeout=10)
