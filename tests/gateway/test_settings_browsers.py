"""The settings of issue 22 (browsers, hosts, fair share): defaults, the file, the
environment, and bad values refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.settings import SettingsError, load_settings


def test_defaults() -> None:
    settings = load_settings({})
    assert settings.allowed_origins == ()
    assert settings.trusted_proxies == ()
    assert settings.limits.connections_per_client == 256
    assert settings.limits.max_answer_bytes == 64 * 1024 * 1024
    assert settings.mcp.sessions_per_client == 16
    assert settings.timeouts.answer == 1800.0


def test_the_file_then_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "t.toml"
    config.write_text(
        'allowed_origins = ["https://chat.example.org"]\n'
        'trusted_proxies = ["127.0.0.1", "10.0.0.0/8"]\n'
        "[limits]\nconnections_per_client = 8\nmax_answer_bytes = 65536\n"
        "[mcp]\nsessions_per_client = 2\n"
        "[timeouts]\nanswer = 60\n"
    )
    env = {"TIGRESS_CONFIG": str(config)}
    settings = load_settings(env)
    assert settings.allowed_origins == ("https://chat.example.org",)
    assert settings.trusted_proxies == ("127.0.0.1", "10.0.0.0/8")
    assert settings.limits.connections_per_client == 8
    assert settings.limits.max_answer_bytes == 65536
    assert settings.mcp.sessions_per_client == 2
    assert settings.timeouts.answer == 60.0
    env |= {
        "TIGRESS_ALLOWED_ORIGINS": "https://a.example, http://localhost:5173",
        "TIGRESS_TRUSTED_PROXIES": "::1",
    }
    settings = load_settings(env)
    assert settings.allowed_origins == ("https://a.example", "http://localhost:5173")
    assert settings.trusted_proxies == ("::1",)


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("allowed_origins = 'https://a.example'", "allowed_origins"),
        ("allowed_origins = ['https://a.example/path']", "allowed_origins"),
        ("allowed_origins = ['*']", "allowed_origins"),
        ("trusted_proxies = '127.0.0.1'", "trusted_proxies"),
        ("trusted_proxies = ['proxy.example']", "trusted_proxies"),
        ("trusted_proxies = ['10.0.0.0/33']", "trusted_proxies"),
        ("[limits]\nconnections_per_client = 0", "limits.connections_per_client"),
        ("[limits]\nmax_answer_bytes = 65535", "limits.max_answer_bytes"),
        ("[mcp]\nsessions_per_client = 0", "mcp.sessions_per_client"),
        ("[timeouts]\nanswer = 0", "timeouts.answer"),
    ],
    ids=[
        "origins-not-a-list",
        "origin-path",
        "origin-wildcard",
        "proxies-not-a-list",
        "proxy-name",
        "proxy-prefix",
        "connections-zero",
        "answer-bytes-below-64k",
        "sessions-zero",
        "answer-zero",
    ],
)
def test_bad_values_name_the_setting(tmp_path: Path, toml: str, named: str) -> None:
    config = tmp_path / "t.toml"
    config.write_text(toml)
    with pytest.raises(SettingsError) as caught:
        load_settings({"TIGRESS_CONFIG": str(config)})
    assert named in str(caught.value)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("TIGRESS_TRUSTED_PROXIES", "not-an-address"), ("TIGRESS_ALLOWED_ORIGINS", "null")],
)
def test_bad_environment_values_name_the_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({variable: value})
    assert variable in str(caught.value)
