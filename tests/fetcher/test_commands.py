"""The fetcher's command line as an operator meets it: ``--version``, a flag for every
setting, ``check``'s detail, and one start-up line of what differs from the defaults."""

from __future__ import annotations

import argparse
import json
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fetcher.cli import build_parser, program_name, version
from fetcher.errors import ConfigError
from fetcher.names import suggestion, unknown_names
from fetcher.report import Report
from fetcher.server import add_serve_arguments
from fetcher.settings import (
    SETTING_NAMES,
    Settings,
    changes,
    load_settings,
    parse_listen,
    unknown_variables,
)
from testkit.fetcher import running_fetcher


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fetcher", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_version_prints_the_version_and_exits_zero() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"python -m fetcher {version()}"


def test_help_lists_the_commands() -> None:
    done = run("--help")
    assert done.returncode == 0
    for command in ("check", "get", "text", "read", "serve"):
        assert command in done.stdout


def test_the_console_script_names_itself() -> None:
    assert program_name("/opt/tigress/venv/bin/tigress-fetcher") == "tigress-fetcher"
    assert program_name("/x/fetcher/__main__.py") == "python -m fetcher"


def test_every_setting_is_a_serve_flag() -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    flags = {
        option.dest for option in parser._actions if option.option_strings and option.dest != "help"
    }
    assert flags == {*SETTING_NAMES, "config"}
    _, commands = build_parser()
    text = commands["serve"].format_help()
    assert all(f"--{name.replace('_', '-')}" in text for name in SETTING_NAMES)


def test_each_serve_flag_reaches_its_setting(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    args = parser.parse_args(
        ["--pdf-max-bytes", "1048576", "--crawl-concurrency", "2", "--read-deadline-seconds", "9"]
    )
    settings = load_settings(
        environ={}, overrides={name: getattr(args, name) for name in SETTING_NAMES}
    )
    assert settings.pdf_max_bytes == 1048576
    assert settings.crawl_concurrency == 2
    assert settings.read_deadline_seconds == 9.0


def test_check_gives_the_detail_get_gives() -> None:
    done = run(
        "check", "--resolve", "private.test:10.0.0.1", "https://private.test/", "ftp://a.test/"
    )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 3
    assert [line["reason"] for line in lines] == ["not_public", "scheme"]
    assert "private.test" in lines[0]["detail"]
    # Rule 2: the detail never carries the resolved address (that is in "addresses").
    assert "10.0.0.1" not in lines[0]["detail"]
    assert "ftp" in lines[1]["detail"]


def test_the_defaults_are_one_line() -> None:
    assert changes(load_settings(environ={})) == "settings: the defaults"


def test_one_line_names_only_what_differs_from_the_defaults() -> None:
    settings = load_settings(
        environ={"TIGRESS_FETCHER_RENDER_WORKERS": "4", "TIGRESS_FETCHER_LOG_SINK": "json"},
        overrides={"listen": "unix:/tmp/elsewhere.sock"},
    )
    assert changes(settings) == (
        "settings changed from the defaults: render_workers = 4, log_sink = json"
    )
    assert parse_listen("unix:/tmp/elsewhere.sock") in settings.listen


def test_every_unknown_key_is_named_with_what_it_likely_meant(tmp_path: Path) -> None:
    config = tmp_path / "tigress.toml"
    config.write_text("[fetcher]\nrender_worker = 2\npdf_max_byte = 1\nzzz = 1\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={}, config_file=config)
    message = str(caught.value)
    assert "unknown settings in [fetcher]" in message
    assert "'render_worker' (did you mean 'render_workers'?)" in message
    assert "'pdf_max_byte' (did you mean 'pdf_max_bytes'?)" in message
    assert message.endswith("'zzz'")


def test_unknown_variables_are_named_and_known_ones_are_not() -> None:
    environ = {
        "TIGRESS_FETCHER_RENDER_WORKER": "2",
        "TIGRESS_FETCHER_CONFIG": "/etc/tigress/tigress.toml",
        "TIGRESS_FETCHER_LOG_SINK": "json",
        "TIGRESS_FETCHER": "unix:/run/fetcher/fetcher.sock",  # the gateway's
        "TIGRESS_ENGINE_URL": "http://127.0.0.1:8080/v1",  # the gateway's
    }
    assert unknown_variables(environ) == [
        "'TIGRESS_FETCHER_RENDER_WORKER' (did you mean 'TIGRESS_FETCHER_RENDER_WORKERS'?)"
    ]


@pytest.mark.parametrize(
    ("name", "known", "expected"),
    [
        ("enigne_url", ["engine_url", "listen"], "engine_url"),
        ("LISTEN", ["listen"], "listen"),
        ("colour", ["engine_url", "listen"], ""),
    ],
    ids=["transposed", "case", "nothing-close"],
)
def test_suggestions(name: str, known: list[str], expected: str) -> None:
    assert suggestion(name, known) == expected


def test_unknown_names_keep_their_order_and_skip_known_ones() -> None:
    assert unknown_names(["b", "listen", "lisen"], ["listen"]) == [
        "'b'",
        "'lisen' (did you mean 'listen'?)",
    ]


async def never(*args: object, **kwargs: object) -> Report:
    raise AssertionError("nothing is read here")


async def test_a_socket_another_fetcher_serves_on_is_left_alone(sock_dir: Path) -> None:
    path = sock_dir / "run" / "f.sock"
    settings = Settings(listen=(parse_listen(f"unix:{path}"),))
    async with running_fetcher(settings, never):
        inode = path.stat().st_ino
        with pytest.raises(ConfigError, match="another process serves on") as caught:
            async with running_fetcher(settings, never):
                pass
        assert "TIGRESS_FETCHER_LISTEN" in str(caught.value)
        assert path.stat().st_ino == inode  # the first fetcher's socket is still there


async def test_a_dead_socket_is_replaced(sock_dir: Path) -> None:
    path = sock_dir / "run" / "f.sock"
    path.parent.mkdir(mode=0o750)
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(path))  # bound, never listening: what a killed process leaves
    settings = Settings(listen=(parse_listen(f"unix:{path}"),))
    async with running_fetcher(settings, never):
        assert stat.S_ISSOCK(path.lstat().st_mode)
