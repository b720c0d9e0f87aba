"""``python -m fetcher get | read | text``: JSON shapes, exit codes, and the production policy.

The commands always run the production policy, so against this machine they can only be
refused (loopback is not public); that is exactly what these tests pin down. The downloads
themselves are tested against a real HTTPS origin in ``test_download.py`` and
``test_crawl.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fetcher.pdf.maker import Text, make_pdf


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fetcher", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_get_refuses_loopback_with_the_production_policy() -> None:
    done = run("get", "--allow-host", "127.0.0.1", "https://127.0.0.1/")
    assert done.returncode == 3
    outcome = json.loads(done.stdout)
    assert outcome["ok"] is False
    assert outcome["reason"] == "not_public"
    assert outcome["url"] == "https://127.0.0.1/"


def test_get_refuses_a_host_that_is_not_allowed() -> None:
    done = run("get", "--allow-host", "example.org", "https://example.com/")
    assert done.returncode == 3
    assert json.loads(done.stdout)["reason"] == "not_in_answer"


def test_get_needs_an_allowed_host() -> None:
    done = run("get", "https://example.com/")
    assert done.returncode == 2
    assert done.stdout == ""


def test_read_reports_a_refused_start_page_plainly() -> None:
    done = run("read", "--json", "--allow-host", "0x7f.1", "https://0x7f.1/")
    assert done.returncode == 3
    report = json.loads(done.stdout)
    assert report["pages"] == []
    # The failure names the address as the guard read it.
    assert [(f["url"], f["reason"]) for f in report["failures"]] == [
        ("https://127.0.0.1/", "not_public")
    ]
    done = run("read", "--allow-host", "10.0.0.1", "https://10.0.0.1/")
    assert done.returncode == 3
    assert "Could not read https://10.0.0.1/: not_public" in done.stdout


def test_text_prints_the_reader_output_of_saved_files(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        "<html><head><title>Saved page</title></head><body><nav><a href='/n'>Menu</a></nav>"
        "<main><h1>Heading</h1><p>Body text.</p><a href='/next#x'>next</a>"
        "<a href='https://other.example/'>away</a></main></body></html>",
        encoding="utf-8",
    )
    done = run("text", "--json", "--url", "https://www.example.com/a/", str(page))
    assert done.returncode == 0
    result = json.loads(done.stdout)
    assert result["file"] == str(page)
    assert result["title"] == "Saved page"
    assert "Body text." in result["text"]
    assert "Menu" not in result["text"]
    assert result["links"][0] == "https://www.example.com/next"
    assert "https://other.example/" not in result["links"]
    plain = run("text", str(page))
    assert plain.returncode == 0
    assert "Body text." in plain.stdout


def test_text_reads_pdfs_by_their_content(tmp_path: Path) -> None:
    # A PDF named .html, and HTML named .pdf: the content decides.
    pdf = tmp_path / "saved.html"
    pdf.write_bytes(make_pdf([[Text(72, 600, b"Text of a PDF.")]], title="A PDF"))
    html = tmp_path / "saved.pdf"
    html.write_text("<title>Saved page</title><p>Body text.</p>", encoding="utf-8")
    done = run("text", "--json", str(pdf), str(html))
    assert done.returncode == 0
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first == {"file": str(pdf), "title": "A PDF", "text": "Text of a PDF.", "links": []}
    assert second["title"] == "Saved page"


def test_text_reports_an_unreadable_pdf(tmp_path: Path) -> None:
    scanned = tmp_path / "scan.pdf"
    scanned.write_bytes(make_pdf([[]]))
    done = run("text", "--json", str(scanned))
    assert done.returncode == 3
    assert json.loads(done.stdout)["reason"] == "no_text"
    plain = run("text", str(scanned))
    assert plain.returncode == 3
    assert "no_text" in plain.stderr


def test_text_names_a_missing_file(tmp_path: Path) -> None:
    done = run("text", str(tmp_path / "nope.html"))
    assert done.returncode == 2
    assert "nope.html" in done.stderr


def test_text_of_a_missing_file_shows_the_text_commands_usage(tmp_path: Path) -> None:
    done = run("text", str(tmp_path / "nope.html"))
    assert done.returncode == 2
    assert done.stderr.startswith("usage: python -m fetcher text ")
    assert "no such file" in done.stderr
