"""``extra_ca_file``: certificate authorities added to, never replacing, the system store.

Read once at start-up, named on the start line, and a file that is not readable PEM
stops start-up naming the setting.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
import trustme

from fetcher.client import FetcherClient
from fetcher.errors import ConfigError
from fetcher.net.download import Downloader
from fetcher.net.resolver import StaticResolver
from fetcher.net.transport import default_ssl_context
from fetcher.outcome import Downloaded, Failed
from fetcher.reasons import Reason
from fetcher.settings import CaBundle, load_settings
from testkit.origin import Origin, html
from tests.fetcher.test_service_process import ROOT, clean_environ, kill, stop, wait_serving
from tests.support.fixtures import policy_for

VARIABLE = "TIGRESS_FETCHER_EXTRA_CA_FILE"


def _ca_file(tmp_path: Path, *cas: trustme.CA) -> Path:
    path = tmp_path / "extra-ca.pem"
    path.write_bytes(b"".join(ca.cert_pem.bytes() for ca in cas))
    return path


def test_extra_ca_file_is_read_at_start_and_counted(tmp_path: Path) -> None:
    path = _ca_file(tmp_path, trustme.CA(), trustme.CA())
    settings = load_settings(environ={VARIABLE: str(path)})
    bundle = settings.extra_ca_file
    assert isinstance(bundle, CaBundle)
    assert bundle.certificates == 2
    assert str(bundle) == f"{path} (2 certificates)"
    # The text is kept from the start-up read: a later change to the file is not seen.
    path.write_text("changed")
    assert "BEGIN CERTIFICATE" in bundle.pem
    assert "BEGIN" not in repr(bundle)


def test_extra_ca_file_is_unset_by_default_and_by_an_empty_value() -> None:
    assert load_settings(environ={}).extra_ca_file is None
    assert load_settings(environ={VARIABLE: ""}).extra_ca_file is None


def test_extra_ca_file_comes_from_the_fetcher_table(tmp_path: Path) -> None:
    path = _ca_file(tmp_path, trustme.CA())
    config = tmp_path / "tigress.toml"
    config.write_text(f'[fetcher]\nextra_ca_file = "{path}"\n')
    bundle = load_settings(environ={}, config_file=config).extra_ca_file
    assert bundle is not None
    assert bundle.path == path


_PEM = trustme.CA().cert_pem.bytes()
_BROKEN = _PEM.replace(b"\n", b"\n!", 3)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "cannot be read"),
        ("directory", "cannot be read"),
        (b"", "no PEM certificate"),
        (b"just some text\n", "no PEM certificate"),
        (b"\x30\x82\x03\x0b\xff\xfe", "not a PEM file"),
        (_BROKEN, "not a valid PEM certificate bundle"),
    ],
    ids=["missing", "directory", "empty", "text", "der", "corrupt-pem"],
)
def test_bad_extra_ca_file_stops_start_up_naming_it(
    tmp_path: Path, content: bytes | str | None, why: str
) -> None:
    path = tmp_path / "ca.pem"
    if content == "directory":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=f"{VARIABLE}: bad value .* for extra_ca_file: {why}"):
        load_settings(environ={VARIABLE: str(path)})


def test_extra_certificates_are_added_to_the_system_store_never_replacing_it() -> None:
    system = default_ssl_context().cert_store_stats()["x509_ca"]
    if system == 0:
        pytest.skip("this machine has no system trust store to keep")
    extra = (trustme.CA().cert_pem.bytes() + trustme.CA().cert_pem.bytes()).decode()
    widened = default_ssl_context(extra_cadata=extra).cert_store_stats()["x509_ca"]
    assert widened == system + 2


@pytest.mark.parametrize("trusted", [True, False], ids=["extra-ca-set", "system-store-only"])
async def test_a_page_signed_by_the_extra_ca_is_read_only_when_it_is_set(
    origin: Origin, resolver: StaticResolver, ca: trustme.CA, trusted: bool
) -> None:
    origin.routes["/"] = html("<p>behind the proxy</p>")
    extra = ca.cert_pem.bytes().decode() if trusted else None
    async with Downloader(
        policy=policy_for(origin),
        resolver=resolver,
        ssl_context=default_ssl_context(extra_cadata=extra),
    ) as downloader:
        outcome = await downloader.download(origin.url(), allowed_hosts=("origin.test",))
    if trusted:
        assert isinstance(outcome, Downloaded), outcome
    else:
        assert isinstance(outcome, Failed), outcome
        assert outcome.reason is Reason.TLS


async def test_serve_names_the_extra_ca_file_on_its_start_line(tmp_path: Path) -> None:
    path = _ca_file(tmp_path, trustme.CA())
    sock = tmp_path / "f.sock"
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "fetcher", "serve", "--listen", f"unix:{sock}"],
        cwd=ROOT,
        env=clean_environ(**{VARIABLE: str(path)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        async with FetcherClient(f"unix:{sock}", timeout=2) as client:
            await wait_serving(client, process)
        err = (await stop(process)).decode()
    finally:
        await kill(process)
    assert process.returncode == 0, err
    start_line = next(line for line in err.splitlines() if "serving on" in line)
    assert f"TLS trust: system store + extra_ca_file {path} (1 certificate)" in start_line


def test_serve_with_a_bad_extra_ca_file_exits_2_naming_it(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fetcher", "serve", "--listen", f"unix:{tmp_path / 'f.sock'}"],
        cwd=ROOT,
        env=clean_environ(**{VARIABLE: str(tmp_path / "absent.pem")}),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert f"{VARIABLE}: bad value".encode() in result.stderr
    assert b"for extra_ca_file: cannot be read" in result.stderr
