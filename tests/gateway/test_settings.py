"""Settings: defaults, the TOML file, the environment, and refusals that name the setting."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from gateway.settings import (
    DEFAULT_ENGINE_URL,
    Budgets,
    EngineSettings,
    SettingsError,
    load_settings,
)

KEY = "0123456789abcdef-key"


def test_defaults_follow_spec_nine() -> None:
    settings = load_settings({})
    assert (settings.listen_host, settings.listen_port) == ("127.0.0.1", 8000)
    assert settings.engines == (EngineSettings(DEFAULT_ENGINE_URL),)
    assert settings.searxng_url == "http://127.0.0.1:8888"
    assert settings.max_body_bytes == 1024 * 1024
    assert settings.budgets == Budgets(searches=16, pages=12)
    assert settings.api_keys == ()


def test_toml_file_then_environment(tmp_path: Path) -> None:
    config = tmp_path / "tigress.toml"
    config.write_text(
        """
listen = "127.0.0.1:9000"
max_body_bytes = 2048
api_keys = ["from-the-toml-file-0001"]
[[engines]]
url = "http://127.0.0.1:8001/v1/"
models = ["qwen3-coder"]
[budgets]
searches = 4
[timeouts]
keepalive = 3
""",
        encoding="utf-8",
    )
    settings = load_settings({"TIGRESS_CONFIG": str(config), "TIGRESS_LISTEN": "127.0.0.1:9100"})
    assert settings.listen_port == 9100  # the environment wins
    assert settings.engines == (EngineSettings("http://127.0.0.1:8001/v1", ("qwen3-coder",)),)
    assert settings.max_body_bytes == 2048
    assert settings.budgets == Budgets(searches=4, pages=12)
    assert settings.timeouts.keepalive == 3.0
    assert settings.api_keys == ("from-the-toml-file-0001",)


def test_engine_url_variable_adds_the_default_engine(tmp_path: Path) -> None:
    config = tmp_path / "t.toml"
    config.write_text('[[engines]]\nurl = "http://127.0.0.1:8001/v1"\nmodels = ["a"]\n')
    env = {"TIGRESS_CONFIG": str(config), "TIGRESS_ENGINE_URL": "http://127.0.0.1:9999/v1"}
    urls = [e.url for e in load_settings(env).engines]
    assert urls == ["http://127.0.0.1:9999/v1", "http://127.0.0.1:8001/v1"]


def test_keys_file_one_per_line(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"# comment\n{KEY}\n\nsecond-key-abcdefgh\n")
    settings = load_settings({"TIGRESS_API_KEYS_FILE": str(keys)})
    assert settings.api_keys == (KEY, "second-key-abcdefgh")


def test_keys_are_not_in_the_repr() -> None:
    settings = load_settings({"TIGRESS_API_KEYS": KEY})
    assert KEY not in repr(settings)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"TIGRESS_LISTEN": "nohost"}, "TIGRESS_LISTEN"),
        ({"TIGRESS_LISTEN": "127.0.0.1:99999"}, "TIGRESS_LISTEN"),
        ({"TIGRESS_ENGINE_URL": "ftp://x/"}, "TIGRESS_ENGINE_URL"),
        ({"TIGRESS_SEARXNG_URL": "localhost:8888"}, "TIGRESS_SEARXNG_URL"),
        ({"TIGRESS_API_KEYS": "short"}, "TIGRESS_API_KEYS"),
        ({"TIGRESS_API_KEYS_FILE": "/nonexistent/keys"}, "TIGRESS_API_KEYS_FILE"),
        ({"TIGRESS_CONFIG": "/nonexistent.toml"}, "TIGRESS_CONFIG"),
    ],
    ids=[
        "listen-no-port",
        "listen-port-range",
        "engine-scheme",
        "searxng-no-scheme",
        "short-key",
        "keys-file",
        "config-file",
    ],
)
def test_bad_values_stop_start_up_naming_the_setting(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        load_settings(env)


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("max_body_bytes = -1", "max_body_bytes"),
        ("[budgets]\nsearches = 'many'", "budgets.searches"),
        ("[timeouts]\ntool = 0", "timeouts.tool"),
        ("[timeouts]\nbogus = 1", "bogus"),
        ("colour = 'red'", "colour"),
        ("[[engines]]\nurl = 3", "engines[0].url"),
        ("listen = [", "not valid TOML"),
        ("media_urls = 'sometimes'", "media_urls"),
        ("[limits]\nmax_chats = 0", "limits.max_chats"),
        ("[limits]\nchats_per_key = -1", "limits.chats_per_key"),
        ("[[engines]]\nurl = 'http://127.0.0.1:1/v1'\nname = 3", "engines[0].name"),
    ],
    ids=[
        "negative-size",
        "budget-type",
        "zero-timeout",
        "unknown-timeout",
        "unknown-key",
        "engine-url",
        "bad-toml",
        "media-urls",
        "max-chats",
        "chats-per-key",
        "engine-name",
    ],
)
def test_bad_toml_values_name_the_setting(tmp_path: Path, toml: str, named: str) -> None:
    config = tmp_path / "t.toml"
    config.write_text(toml)
    with pytest.raises(SettingsError) as caught:
        load_settings({"TIGRESS_CONFIG": str(config)})
    assert named in str(caught.value)


@pytest.mark.parametrize(
    "listen", ["0.0.0.0:8000", "192.168.1.5:8000", "[::]:8000", "example.org:80"]
)
def test_non_loopback_address_without_keys_is_refused(listen: str) -> None:
    with pytest.raises(SettingsError, match="without access keys"):
        load_settings({"TIGRESS_LISTEN": listen})


@pytest.mark.parametrize(
    "listen", ["127.0.0.1:8000", "127.8.9.1:1", "[::1]:8000", "localhost:8000"]
)
def test_loopback_address_may_run_without_keys(listen: str) -> None:
    load_settings({"TIGRESS_LISTEN": listen})


def test_non_loopback_address_with_keys_is_allowed() -> None:
    settings = load_settings({"TIGRESS_LISTEN": "0.0.0.0:8000", "TIGRESS_API_KEYS": KEY})
    assert settings.listen_host == "0.0.0.0"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIGRESS_")}
    env.update(extra)
    return env


def test_python_m_gateway_refuses_a_bad_setting() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gateway"],
        env=_env(TIGRESS_LISTEN="0.0.0.0:8000"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "TIGRESS_LISTEN" in done.stderr


def test_python_m_gateway_serves(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway"],
        env=_env(
            TIGRESS_LISTEN=f"127.0.0.1:{port}",
            TIGRESS_ENGINE_URL="http://127.0.0.1:9/v1",
            TIGRESS_FETCHER=f"unix:{tmp_path / 'no-fetcher.sock'}",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        body = None
        for _ in range(300):
            try:
                body = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()
                break
            except httpx.TransportError:
                time.sleep(0.05)
        assert body is not None
        assert [(e["engine"], e["ok"]) for e in body["engines"]] == [
            ("http://127.0.0.1:9/v1", False)
        ]
        # The real probe asks the fetcher's health service; nothing listens there.
        assert body["fetcher"]["checked"] is True
        assert body["fetcher"]["ok"] is False
        assert body["status"] == "degraded"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_one_file_serves_both_processes(tmp_path: Path) -> None:
    config = tmp_path / "tigress.toml"
    config.write_text(
        '[fetcher]\nlisten = "unix:/run/fetcher/fetcher.sock"\nmax_concurrent_reads = 8\n',
        encoding="utf-8",
    )
    # The gateway finds the fetcher where the fetcher's own section says it listens.
    assert load_settings({"TIGRESS_CONFIG": str(config)}).fetcher == (
        "unix:/run/fetcher/fetcher.sock",
    )
    config.write_text(
        'fetcher_target = ["unix:/a.sock", "unix:/b.sock"]\n[fetcher]\nlisten = "unix:/a.sock"\n',
        encoding="utf-8",
    )
    assert load_settings({"TIGRESS_CONFIG": str(config)}).fetcher == (
        "unix:/a.sock",
        "unix:/b.sock",
    )
    env = {"TIGRESS_CONFIG": str(config), "TIGRESS_FETCHER": "unix:/c.sock,127.0.0.1:5000"}
    assert load_settings(env).fetcher == ("unix:/c.sock", "127.0.0.1:5000")


def test_default_fetcher_target_is_the_fetchers_development_socket() -> None:
    from fetcher.settings import DEV_SOCKET

    assert load_settings({}).fetcher == (f"unix:{DEV_SOCKET}",)


def test_per_key_limits_are_off_without_keys_and_on_with_them(tmp_path: Path) -> None:
    keyless = load_settings({})
    assert (keyless.limits.chats_per_key, keyless.limits.requests_per_minute_per_key) == (0, 0)
    keyed = load_settings({"TIGRESS_API_KEYS": "k" * 20})
    assert (keyed.limits.chats_per_key, keyed.limits.requests_per_minute_per_key) == (16, 600)
    config = tmp_path / "t.toml"
    config.write_text("[limits]\nchats_per_key = 2\nrequests_per_minute_per_key = 0\n")
    chosen = load_settings({"TIGRESS_CONFIG": str(config), "TIGRESS_API_KEYS": "k" * 20})
    assert (chosen.limits.chats_per_key, chosen.limits.requests_per_minute_per_key) == (2, 0)


def test_media_addresses_are_refused_unless_the_operator_allows_them(tmp_path: Path) -> None:
    assert load_settings({}).allow_media_urls is False
    config = tmp_path / "t.toml"
    config.write_text('media_urls = "allow"\n[timeouts]\nshutdown_grace = 3\n')
    settings = load_settings({"TIGRESS_CONFIG": str(config)})
    assert settings.allow_media_urls is True
    assert settings.timeouts.shutdown_grace == 3.0


@pytest.mark.parametrize(
    "file_keys",
    ['api_keys_file = "/nonexistent/keys"', 'api_keys = ["short"]'],
    ids=["unreadable-keys-file", "short-key-list"],
)
def test_the_keys_variable_wins_and_the_files_keys_are_not_read(
    tmp_path: Path, file_keys: str
) -> None:
    # TIGRESS_API_KEYS wins over the file (SPEC 9): keys the file names but that are not
    # used must not stop start-up (an old keys file removed after `keygen --env-file`).
    config = tmp_path / "tigress.toml"
    config.write_text(file_keys + "\n")
    settings = load_settings({"TIGRESS_CONFIG": str(config), "TIGRESS_API_KEYS": KEY})
    assert settings.api_keys == (KEY,)


def test_a_keys_file_wins_over_the_files_key_list(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    config = tmp_path / "tigress.toml"
    config.write_text('api_keys = ["short"]\n')
    env = {"TIGRESS_CONFIG": str(config), "TIGRESS_API_KEYS_FILE": str(keys)}
    assert load_settings(env).api_keys == (KEY,)


def test_an_empty_fetcher_variable_is_named_as_the_source(tmp_path: Path) -> None:
    # An empty list variable is used (the empty list): the message names it, not the file.
    config = tmp_path / "tigress.toml"
    config.write_text('fetcher_target = ["unix:/a.sock"]\n')
    with pytest.raises(SettingsError) as caught:
        load_settings({"TIGRESS_CONFIG": str(config), "TIGRESS_FETCHER": ""})
    assert str(caught.value) == "TIGRESS_FETCHER: no fetcher target given"


@pytest.mark.parametrize(
    ("toml", "env"),
    [
        ('engine_url = "http://user:hunter2-pass@h:99999/v1"', {}),
        ('searxng_url = "ftp://user:hunter2-pass@h/"', {}),
        ('[[engines]]\nurl = "http://:hunter2-pass@h:x/v1"', {}),
        ("", {"TIGRESS_ENGINE_URL": "http://user:hunter2-pass@h:99999/v1"}),
        # A password holding a character that ends the address's authority (/ ? #): the
        # address parses as host "user", port "hunter2...", and is refused for its port.
        ('engine_url = "http://user:hunter2/pass@h:8080/v1"', {}),
        ('engine_url = "http://user:hunter2#pass@h/v1"', {}),
        ('searxng_url = "http://user:hunter2?pass@h/"', {}),
    ],
    ids=[
        "engine-url",
        "searxng-url",
        "engines-url",
        "engine-url-variable",
        "slash-in-password",
        "hash-in-password",
        "query-in-password",
    ],
)
def test_a_bad_address_is_named_without_its_password(
    tmp_path: Path, toml: str, env: dict[str, str]
) -> None:
    # An address may carry credentials (the engine's label drops them for logs); the
    # start-up message goes to the journal too.
    config = tmp_path / "tigress.toml"
    config.write_text(toml + "\n")
    with pytest.raises(SettingsError) as caught:
        load_settings({"TIGRESS_CONFIG": str(config), **env})
    assert "hunter2" not in str(caught.value)
    assert "@h" in str(caught.value)
