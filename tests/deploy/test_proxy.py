"""The guide's reverse-proxy examples (deploy/proxy/) are valid for the real tools, and
the units leave ``listen`` to tigress.toml.

nginx and caddy come from Debian (``make test-deps`` installs them as root); where one is
missing its test is skipped and says so.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import trustme

from tests.deploy.test_units import directives

ROOT = Path(__file__).resolve().parents[2]
PROXY = ROOT / "deploy" / "proxy"
GUIDE = ROOT / "deploy" / "systemd" / "README.md"
SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"


def tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=SBIN)
    if found is None:
        pytest.skip(f"{name} is not installed (Debian's {name}: make test-deps installs it)")
    return found


def nginx_check(site: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``nginx -t`` of ``site`` inside a minimal main config, in a prefix of its own."""
    nginx = tool("nginx")
    ca = trustme.CA()
    cert = ca.issue_cert("tigress.example.org")
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    site = site.replace("/etc/ssl/tigress/fullchain.pem", str(tmp_path / "cert.pem"))
    site = site.replace("/etc/ssl/tigress/privkey.pem", str(tmp_path / "key.pem"))
    (tmp_path / "site.conf").write_text(site)
    (tmp_path / "logs").mkdir(exist_ok=True)
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\n    access_log off;\n    include {tmp_path}/site.conf;\n}}\n"
    )
    return subprocess.run(
        [nginx, "-t", "-q", "-c", str(tmp_path / "nginx.conf"), "-p", f"{tmp_path}/"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def caddy_check(caddyfile: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    caddy = tool("caddy")
    (tmp_path / "Caddyfile").write_text(caddyfile)
    home = str(tmp_path)
    return subprocess.run(
        [caddy, "validate", "--config", str(tmp_path / "Caddyfile"), "--adapter", "caddyfile"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"HOME": home, "XDG_DATA_HOME": home, "XDG_CONFIG_HOME": home, "PATH": SBIN},
    )


def test_the_nginx_example_is_valid(tmp_path: Path) -> None:
    done = nginx_check((PROXY / "nginx.conf").read_text(), tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_broken_nginx_example_would_fail(tmp_path: Path) -> None:
    broken = (PROXY / "nginx.conf").read_text().replace("proxy_buffering off;", "proxy_buffering")
    assert nginx_check(broken, tmp_path).returncode != 0


def test_the_caddy_example_is_valid(tmp_path: Path) -> None:
    done = caddy_check((PROXY / "Caddyfile").read_text(), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_broken_caddy_example_would_fail(tmp_path: Path) -> None:
    broken = (PROXY / "Caddyfile").read_text().replace("flush_interval -1", "flush_interval")
    assert caddy_check(broken, tmp_path).returncode != 0


def test_the_examples_stream_and_are_in_the_guide() -> None:
    nginx = (PROXY / "nginx.conf").read_text()
    assert "proxy_buffering off;" in nginx  # SSE token by token
    assert "proxy_pass http://127.0.0.1:8000;" in nginx
    assert "flush_interval -1" in (PROXY / "Caddyfile").read_text()
    guide = GUIDE.read_text()
    assert "deploy/proxy/Caddyfile" in guide
    assert "deploy/proxy/nginx.conf" in guide


def test_listen_comes_from_tigress_toml() -> None:
    # An Environment=TIGRESS_LISTEN would silently win over `listen` in the file.
    assert not [e for e in directives("gateway.service", "Environment") if "TIGRESS_LISTEN" in e]
    assert "#listen = " in (ROOT / "deploy" / "etc" / "tigress.toml").read_text()


def test_the_fetchers_socket_comes_from_tigress_toml_for_both_processes() -> None:
    # A --listen flag or an Environment=TIGRESS_FETCHER would win over [fetcher] listen,
    # and the two processes would look in different places once an operator changed it.
    assert not [e for e in directives("gateway.service", "Environment") if "TIGRESS_FETCHER=" in e]
    assert not [e for e in directives("fetcher.service", "ExecStart") if "--listen" in e]
    toml = tomllib.loads((ROOT / "deploy" / "etc" / "tigress.toml").read_text())
    assert toml["fetcher"]["listen"] == "unix:/run/fetcher/fetcher.sock"
    assert (
        "RuntimeDirectory=fetcher" in (ROOT / "deploy" / "systemd" / "fetcher.service").read_text()
    )


def test_the_guide_makes_keys_and_ends_with_a_web_on_chat() -> None:
    guide = GUIDE.read_text()
    assert "tigress-gateway keygen --env-file /etc/tigress/gateway.env" in guide
    assert '"thor_web_search": true' in guide
    assert "/v1/models" in guide
    assert "IPAddressAllow=" in guide
    assert "make uninstall PURGE=1" in guide
