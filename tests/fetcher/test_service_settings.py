"""The service's settings: defaults, TOML, environment, flags; a bad value names itself."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

import pytest

from fetcher.errors import ConfigError
from fetcher.net.download import PDF_MAX_BYTES_CEILING
from fetcher.report import Report
from fetcher.server import add_serve_arguments, run_serve
from fetcher.settings import DEV_SOCKET, Settings, load_settings, parse_listen
from testkit.fetcher import running_fetcher


def test_defaults_listen_on_the_run_folders_socket() -> None:
    settings = load_settings(environ={})
    assert [listen.target for listen in settings.listen] == [f"unix:{Path.cwd() / DEV_SOCKET}"]
    assert settings.max_concurrent_reads == 16
    assert settings.max_message_bytes == 1024 * 1024
    assert settings.read_deadline_seconds == 30.0


def test_toml_then_environment_then_flags_win(tmp_path: Path) -> None:
    config = tmp_path / "tigress.toml"
    config.write_text(
        '[fetcher]\nlisten = ["unix:/run/fetcher/fetcher.sock", "127.0.0.1:7443"]\n'
        "max_concurrent_reads = 8\nshutdown_grace_seconds = 3\nlog_sink = 'json'\n"
        "[gateway]\nanything = 'belongs to the gateway'\n"
    )
    settings = load_settings(
        environ={"TIGRESS_CONFIG": str(config), "TIGRESS_FETCHER_MAX_CONCURRENT_READS": "4"},
        overrides={"log_sink": "journal", "listen": None},
    )
    assert [listen.target for listen in settings.listen] == [
        "unix:/run/fetcher/fetcher.sock",
        "127.0.0.1:7443",
    ]
    assert settings.max_concurrent_reads == 4
    assert settings.shutdown_grace_seconds == 3.0
    assert settings.log_sink == "journal"


def test_fetcher_config_variable_is_preferred_to_the_shared_one(tmp_path: Path) -> None:
    own, shared = tmp_path / "own.toml", tmp_path / "shared.toml"
    own.write_text("[fetcher]\ncrawl_concurrency = 2\n")
    shared.write_text("[fetcher]\ncrawl_concurrency = 3\n")
    settings = load_settings(
        environ={"TIGRESS_FETCHER_CONFIG": str(own), "TIGRESS_CONFIG": str(shared)}
    )
    assert settings.crawl_concurrency == 2


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"TIGRESS_FETCHER_MAX_CONCURRENT_READS": "many"}, "TIGRESS_FETCHER_MAX_CONCURRENT_READS"),
        ({"TIGRESS_FETCHER_MAX_CONCURRENT_READS": "0"}, "max_concurrent_reads"),
        ({"TIGRESS_FETCHER_READ_DEADLINE_SECONDS": "nan"}, "read_deadline_seconds"),
        ({"TIGRESS_FETCHER_LOG_SINK": "syslog"}, "TIGRESS_FETCHER_LOG_SINK"),
        ({"TIGRESS_FETCHER_LISTEN": "unix-abstract:fetcher"}, "listen"),
        ({"TIGRESS_FETCHER_LISTEN": "0.0.0.0:7443"}, "'0.0.0.0:7443'"),
        ({"TIGRESS_FETCHER_LISTEN": "::1:7443"}, "listen"),
        ({"TIGRESS_FETCHER_LISTEN": "127.0.0.1:99999"}, "listen"),
        ({"TIGRESS_FETCHER_METRICS_LISTEN": "0.0.0.0:9464"}, "metrics_listen"),
        ({"TIGRESS_FETCHER_TLS_CERT_FILE": "/nonexistent.pem"}, "tls_cert_file"),
        ({"TIGRESS_CONFIG": "/nonexistent/tigress.toml"}, "/nonexistent/tigress.toml"),
    ],
    ids=[
        "not-a-number",
        "below-minimum",
        "not-finite",
        "unknown-choice",
        "abstract-socket",
        "plain-tcp-beyond-loopback",
        "ipv6-without-brackets",
        "port-out-of-range",
        "metrics-beyond-loopback",
        "tls-alone",
        "missing-file",
    ],
)
def test_bad_value_stops_start_up_naming_it(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        load_settings(environ=environ)


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        pytest.param(str(PDF_MAX_BYTES_CEILING), True, id="64MiB"),
        pytest.param(str(PDF_MAX_BYTES_CEILING + 1), False, id="64MiB+1"),
    ],
)
def test_the_pdf_limit_can_be_raised_to_its_ceiling_and_no_further(
    value: str, allowed: bool
) -> None:
    environ = {"TIGRESS_FETCHER_PDF_MAX_BYTES": value}
    if allowed:
        assert load_settings(environ=environ).pdf_max_bytes == PDF_MAX_BYTES_CEILING
        return
    with pytest.raises(ConfigError) as raised:
        load_settings(environ=environ)
    message = str(raised.value)
    assert "pdf_max_bytes" in message
    assert f"must be at most {PDF_MAX_BYTES_CEILING} (64 MiB, the hard ceiling" in message


def test_pdf_settings_have_their_defaults_and_can_be_lowered(tmp_path: Path) -> None:
    assert (load_settings(environ={}).pdf_max_bytes, load_settings(environ={}).pdf_workers) == (
        16 * 1024 * 1024,
        2,
    )
    config = tmp_path / "tigress.toml"
    config.write_text("[fetcher]\npdf_max_bytes = 1048576\npdf_workers = 1\n")
    settings = load_settings(environ={}, config_file=config)
    assert (settings.pdf_max_bytes, settings.pdf_workers) == (1048576, 1)


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[fetcher]\nmax_concurent_reads = 4\n", "max_concurent_reads"),
        ("[fetcher]\nmax_concurrent_reads = 2.5\n", "max_concurrent_reads"),
        ("[fetcher]\nmax_concurrent_reads = true\n", "max_concurrent_reads"),
        ("[fetcher]\nlisten = [1]\n", "listen"),
        ("fetcher = 3\n", r"\[fetcher\]"),
        ("[fetcher\n", "not valid TOML"),
    ],
    ids=["unknown-key", "not-integer", "boolean", "listen-type", "not-a-table", "bad-syntax"],
)
def test_bad_toml_stops_start_up_naming_it(tmp_path: Path, toml: str, named: str) -> None:
    config = tmp_path / "tigress.toml"
    config.write_text(toml)
    with pytest.raises(ConfigError, match=named):
        load_settings(environ={}, config_file=config)


def test_plain_tcp_on_loopback_is_allowed() -> None:
    settings = load_settings(environ={"TIGRESS_FETCHER_LISTEN": "127.0.0.1:7443,[::1]:7443"})
    assert [listen.target for listen in settings.listen] == ["127.0.0.1:7443", "[::1]:7443"]
    assert all(listen.is_loopback for listen in settings.listen)


def test_relative_unix_path_is_made_absolute(tmp_path: Path) -> None:
    listen = parse_listen("unix:run/f.sock", base=tmp_path)
    assert listen.unix_path == tmp_path / "run" / "f.sock"
    assert (
        parse_listen("unix:///run/fetcher/fetcher.sock").target == "unix:/run/fetcher/fetcher.sock"
    )


def test_serve_with_a_bad_value_exits_2_with_a_message_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    args = parser.parse_args(["--max-concurrent-reads", "-3"])
    assert run_serve(args, environ={}) == 2
    assert "--max-concurrent-reads" in capsys.readouterr().err


def test_settings_value_object_has_safe_defaults() -> None:
    assert Settings().tls is False
    assert Settings().metrics_listen == ""


async def never(*args: object, **kwargs: object) -> Report:
    raise AssertionError("nothing is read here")


async def test_socket_and_folder_modes_hold_under_umask_000(sock_dir: Path) -> None:
    """Issue 15 item E: the modes are set, not left to the umask."""
    socket_path = sock_dir / "run" / "f.sock"
    previous = os.umask(0)
    try:
        settings = Settings(listen=(parse_listen(f"unix:{socket_path}"),))
        async with running_fetcher(settings, never):
            assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o750
            assert stat.S_IMODE(socket_path.stat().st_mode) == 0o660
    finally:
        os.umask(previous)


async def test_a_folder_others_can_write_to_is_refused(sock_dir: Path) -> None:
    loose = sock_dir / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    settings = Settings(listen=(parse_listen(f"unix:{loose / 'f.sock'}"),))
    with pytest.raises(ConfigError, match="writable by others"):
        async with running_fetcher(settings, never):
            pass
    assert not (loose / "f.sock").exists()
