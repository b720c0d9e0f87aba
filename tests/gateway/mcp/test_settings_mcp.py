"""The [mcp] settings: defaults like the chat API's per-key limits, and bad values named."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.settings import McpSettings, SettingsError, load_settings

KEY = "0123456789abcdef-key"


def test_defaults_without_and_with_keys() -> None:
    assert load_settings({}).mcp == McpSettings(sessions_per_key=0)
    keyed = load_settings({"TIGRESS_API_KEYS": KEY}).mcp
    assert keyed.sessions_per_key == 8
    assert (keyed.max_sessions, keyed.session_idle, keyed.allowed_origins) == (256, 900.0, ())


def test_the_file_then_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "t.toml"
    config.write_text(
        "[mcp]\nsessions_per_key = 2\nmax_sessions = 10\nsession_idle = 30\n"
        'allowed_origins = ["http://127.0.0.1:8080"]\n'
    )
    env = {"TIGRESS_CONFIG": str(config)}
    mcp = load_settings(env).mcp
    assert mcp == McpSettings(2, 10, 30.0, ("http://127.0.0.1:8080",))
    env["TIGRESS_MCP_ALLOWED_ORIGINS"] = "https://ui.example, http://localhost:5173"
    origins = load_settings(env).mcp.allowed_origins
    assert origins == ("https://ui.example", "http://localhost:5173")


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[mcp]\nsessions_per_key = -1", "mcp.sessions_per_key"),
        ("[mcp]\nmax_sessions = 0", "mcp.max_sessions"),
        ("[mcp]\nsession_idle = 0", "mcp.session_idle"),
        ("[mcp]\nallowed_origins = 'http://a'", "mcp.allowed_origins"),
        ("[mcp]\nallowed_origins = ['http://a/path']", "mcp.allowed_origins"),
        ("[mcp]\nallowed_origins = ['*']", "mcp.allowed_origins"),
        ("[mcp]\nallowed_origins = ['null']", "mcp.allowed_origins"),
        ("[mcp]\nbogus = 1", "bogus"),
    ],
    ids=["per-key", "max", "idle", "not-a-list", "path", "wildcard", "null", "unknown"],
)
def test_bad_values_name_the_setting(tmp_path: Path, toml: str, named: str) -> None:
    config = tmp_path / "t.toml"
    config.write_text(toml)
    with pytest.raises(SettingsError) as caught:
        load_settings({"TIGRESS_CONFIG": str(config)})
    assert named in str(caught.value)
