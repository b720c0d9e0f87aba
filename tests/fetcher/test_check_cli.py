"""``python -m fetcher check``: one JSON line per URL, exit codes, --resolve answers checked."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run_check(*args: str) -> tuple[int, list[dict[str, object]], str]:
    done = subprocess.run(
        [sys.executable, "-m", "fetcher", "check", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return done.returncode, lines, done.stderr


def test_all_allowed_exits_zero_with_one_line_per_url() -> None:
    code, lines, _ = run_check(
        "--resolve", "example.com:93.184.216.34", "https://example.com/a", "https://8.8.8.8/"
    )
    assert code == 0
    assert lines == [
        {
            "url": "https://example.com/a",
            "allowed": True,
            "reason": "allowed",
            "addresses": ["93.184.216.34"],
        },
        {"url": "https://8.8.8.8/", "allowed": True, "reason": "allowed", "addresses": ["8.8.8.8"]},
    ]


CASES = [
    ("https://private.test/", "not_public", ["10.0.0.1"]),
    ("https://mixed.test/", "not_public", ["1.1.1.1", "127.0.0.1"]),
    ("https://v6.test/", "not_public", ["fd00::1"]),
    ("https://2130706433/", "not_public", ["127.0.0.1"]),
    ("https://[::ffff:169.254.169.254]/", "not_public", ["::ffff:a9fe:a9fe"]),
    ("https://[64:ff9b::a00:1]/", "not_public", ["64:ff9b::a00:1"]),
    ("https://[64:ff9b::808:808]/", "allowed", ["64:ff9b::808:808"]),
    ("http://public.test/", "allowed", ["1.1.1.1"]),
    ("https://public.test:8443/", "port", []),
    ("ftp://public.test/", "scheme", []),
    ("https://u:p@public.test/", "userinfo", []),
    ("https://public.test\\@127.0.0.1/", "malformed", []),
]
RESOLVES = [
    f"--resolve={entry}"
    for entry in (
        "private.test:10.0.0.1",
        "mixed.test:1.1.1.1",
        "mixed.test:127.0.0.1",
        "v6.test:fd00::1",
        "public.test:1.1.1.1",
    )
]


def test_refusals_in_order_with_reasons_and_addresses() -> None:
    code, lines, _ = run_check(*RESOLVES, *[url for url, _, _ in CASES])
    assert code == 3
    assert [(line["url"], line["reason"], line["addresses"]) for line in lines] == CASES
    assert [line["allowed"] for line in lines] == [r == "allowed" for _, r, _ in CASES]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--resolve", "nocolon", "https://a.test/"],
        ["--resolve", "a.test:300.1.1.1", "https://a.test/"],
        ["--resolve", "a.test:not-an-ip", "https://a.test/"],
    ],
    ids=["no-urls", "resolve-without-colon", "resolve-bad-ip", "resolve-not-an-ip"],
)
def test_usage_errors_exit_two(args: list[str]) -> None:
    code, lines, stderr = run_check(*args)
    assert code == 2
    assert lines == []
    assert "usage" in stderr


def test_resolve_cannot_make_a_private_answer_allowed() -> None:
    code, lines, _ = run_check("--resolve", "example.com:127.0.0.1", "https://example.com/")
    assert code == 3
    assert lines[0]["reason"] == "not_public"


def test_resolve_names_are_normalised_like_urls() -> None:
    code, lines, _ = run_check("--resolve", "MÜNCHEN.de.:1.1.1.1", "https://münchen.de/")
    assert code == 0
    assert lines[0]["addresses"] == ["1.1.1.1"]


def test_hundreds_of_urls_in_one_call() -> None:
    urls = [f"https://host{i}.test/page" for i in range(300)]
    resolves = [
        arg for i in range(300) for arg in ("--resolve", f"host{i}.test:1.0.{i // 256}.{i % 256}")
    ]
    code, lines, _ = run_check(*resolves, *urls, "https://127.0.0.1/")
    assert code == 3
    assert len(lines) == 301
    assert all(line["allowed"] for line in lines[:300])
    assert [line["url"] for line in lines[:300]] == urls


def test_options_and_urls_may_be_interleaved() -> None:
    code, lines, _ = run_check(
        "--resolve",
        "a.test:1.1.1.1",
        "https://a.test/",
        "--resolve",
        "b.test:10.1.1.1",
        "https://b.test/",
    )
    assert code == 3
    assert [(line["url"], line["reason"]) for line in lines] == [
        ("https://a.test/", "allowed"),
        ("https://b.test/", "not_public"),
    ]


def test_curls_name_port_ip_form_is_read_too() -> None:
    code, lines, _ = run_check(
        "--resolve",
        "a.test:443:1.1.1.1",
        "--resolve",
        "b.test:443:[fd00::1]",
        "https://a.test/",
        "https://b.test/",
    )
    assert code == 3
    assert [(line["reason"], line["addresses"]) for line in lines] == [
        ("allowed", ["1.1.1.1"]),
        ("not_public", ["fd00::1"]),
    ]
