"""The operator's lists and the page cache as fetcher settings: TOML, environment, flags."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from fetcher.errors import ConfigError
from fetcher.net.domains import DomainLists
from fetcher.server import add_serve_arguments, run_serve
from fetcher.settings import changes, load_settings


def test_defaults_have_no_lists_and_a_64_mib_cache_of_ten_minutes() -> None:
    settings = load_settings(environ={})
    assert settings.lists == DomainLists()
    assert settings.lists.empty
    assert (settings.cache_bytes, settings.cache_seconds) == (64 * 1024 * 1024, 600.0)


def test_lists_come_from_toml_environment_and_flags_normalised(tmp_path: Path) -> None:
    config = tmp_path / "tigress.toml"
    config.write_text(
        '[fetcher]\ndeny_domains = ["Ads.Example.COM.", "bücher.de"]\n'
        'allow_domains = ["example.com"]\ncache_bytes = 0\n'
    )
    from_toml = load_settings(environ={"TIGRESS_CONFIG": str(config)})
    assert from_toml.deny_domains == ("ads.example.com", "xn--bcher-kva.de")
    assert from_toml.allow_domains == ("example.com",)
    assert from_toml.cache_bytes == 0
    from_env = load_settings(
        environ={
            "TIGRESS_CONFIG": str(config),
            "TIGRESS_FETCHER_DENY_DOMAINS": "tracker.test, evil.test",
            "TIGRESS_FETCHER_CACHE_SECONDS": "60",
        }
    )
    assert from_env.deny_domains == ("tracker.test", "evil.test")
    assert from_env.allow_domains == ("example.com",)
    assert from_env.cache_seconds == 60.0
    from_flags = load_settings(
        environ={"TIGRESS_FETCHER_DENY_DOMAINS": "tracker.test"},
        overrides={"deny_domains": "", "allow_domains": "example.org"},
    )
    assert from_flags.lists == DomainLists(deny=(), allow=("example.org",))
    # The start-up line names what differs from the defaults: the flag's empty deny list
    # is the default again.
    assert "deny_domains" not in changes(from_flags)
    assert "allow_domains = example.org" in changes(from_flags)


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"TIGRESS_FETCHER_DENY_DOMAINS": "*.example.com"}, "deny_domains"),
        ({"TIGRESS_FETCHER_ALLOW_DOMAINS": "https://example.com/"}, "allow_domains"),
        ({"TIGRESS_FETCHER_ALLOW_DOMAINS": "exa mple.com"}, "TIGRESS_FETCHER_ALLOW_DOMAINS"),
        ({"TIGRESS_FETCHER_CACHE_BYTES": "-1"}, "cache_bytes"),
        ({"TIGRESS_FETCHER_CACHE_SECONDS": "0"}, "cache_seconds"),
    ],
)
def test_a_bad_list_or_cache_value_stops_start_up_naming_it(
    environ: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        load_settings(environ=environ)


def test_a_toml_list_of_other_things_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "tigress.toml"
    config.write_text("[fetcher]\ndeny_domains = [1, 2]\n")
    with pytest.raises(ConfigError, match="deny_domains: expected a list of domains"):
        load_settings(environ={"TIGRESS_CONFIG": str(config)})


def test_serve_takes_the_lists_and_the_cache_as_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    args = parser.parse_args(
        ["--deny-domains", "a.test", "--allow-domains", "*.b.test", "--cache-bytes", "0"]
    )
    assert run_serve(args, environ={}) == 2
    assert "--allow-domains" in capsys.readouterr().err
