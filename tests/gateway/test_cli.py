"""The gateway's command line: ``--help`` and ``--version`` print and exit (they never
start the server), and ``keygen`` makes keys the settings accept."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gateway import cli
from gateway.settings import load_settings


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def test_version_prints_and_exits_without_serving() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"python -m gateway {cli.version()}"
    assert done.stderr == ""


def test_help_prints_the_settings_and_commands_and_exits() -> None:
    done = run("--help")
    assert done.returncode == 0
    assert "TIGRESS_LISTEN" in done.stdout
    assert "keygen" in done.stdout
    assert done.stderr == ""


def test_a_bad_option_is_a_usage_error() -> None:
    done = run("--port", "9")
    assert done.returncode == 2
    assert "usage" in done.stderr


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        (("keygen", "--bogus"), "usage: python -m gateway keygen "),
        (("serve", "--bogus"), "usage: python -m gateway serve "),
        (("--bogus",), "usage: python -m gateway [-h]"),
    ],
)
def test_a_bad_option_shows_the_usage_of_its_command(
    args: tuple[str, ...], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.parse(args)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith(usage)
    assert error.rstrip().endswith("error: unrecognized arguments: --bogus")


def test_the_console_script_names_itself() -> None:
    assert cli.program_name("/opt/tigress/venv/bin/tigress-gateway") == "tigress-gateway"
    assert cli.program_name("/src/gateway/__main__.py") == "python -m gateway"


def test_keygen_prints_a_key_the_settings_accept() -> None:
    done = run("keygen")
    assert done.returncode == 0
    key = done.stdout.strip()
    assert len(key) == 43
    settings = load_settings({"TIGRESS_API_KEYS": key})
    assert settings.api_keys == (key,)
    assert run("keygen").stdout.strip() != key


def test_keygen_appends_to_a_keys_file_made_private(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    first = run("keygen", "--keys-file", str(keys)).stdout.strip()
    second = run("keygen", "--keys-file", str(keys)).stdout.strip()
    assert keys.read_text() == f"{first}\n{second}\n"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    settings = load_settings({"TIGRESS_API_KEYS_FILE": str(keys)})
    assert settings.api_keys == (first, second)


def test_keygen_adds_to_the_env_files_variable(tmp_path: Path) -> None:
    env_file = tmp_path / "gateway.env"
    example = Path(__file__).resolve().parents[2] / "deploy" / "etc" / "gateway.env"
    env_file.write_text(example.read_text())
    first = run("keygen", "--env-file", str(env_file)).stdout.strip()
    second = run("keygen", "--env-file", str(env_file)).stdout.strip()
    lines = env_file.read_text().splitlines()
    assert f"TIGRESS_API_KEYS={first},{second}" in lines
    assert "#TIGRESS_API_KEYS=" not in lines
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert "#VLLM_KEY=" in lines  # nothing else changed


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("", "TIGRESS_API_KEYS=k\n"),
        ("#TIGRESS_API_KEYS=\nX=1\n", "TIGRESS_API_KEYS=k\nX=1\n"),
        ("TIGRESS_API_KEYS=a\n#TIGRESS_API_KEYS=\n", "TIGRESS_API_KEYS=a,k\n#TIGRESS_API_KEYS=\n"),
        ("TIGRESS_API_KEYS=\n", "TIGRESS_API_KEYS=k\n"),
        ("X=1", "X=1\nTIGRESS_API_KEYS=k\n"),
    ],
    ids=["empty", "commented", "set", "set-empty", "absent"],
)
def test_with_key_in_env(before: str, after: str) -> None:
    assert cli.with_key_in_env(before, "k") == after


def test_keygen_that_cannot_write_says_so(tmp_path: Path) -> None:
    done = run("keygen", "--keys-file", str(tmp_path / "missing" / "keys"))
    assert done.returncode == 1
    assert "cannot write" in done.stderr
    assert done.stdout == ""


def test_the_console_scripts_are_installed() -> None:
    bin_dir = Path(sys.executable).parent
    for name in ("tigress-gateway", "tigress-fetcher"):
        script = bin_dir / name
        assert script.exists(), f"{name} is not installed (pip install -e . makes it)"
        done = subprocess.run(
            [str(script), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0
        assert done.stdout.startswith(f"{name} ")
    assert os.access(bin_dir / "tigress-gateway", os.X_OK)
