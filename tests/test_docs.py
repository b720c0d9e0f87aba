"""The reference in docs/ and the code agree: every setting, metric, reason and event the
docs name exists in the code, and every one the code has is documented.

A new setting without its row, a renamed metric or a reason the docs never heard of fails
here, naming what is missing on which side.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from fetcher.metrics import STOP_REASONS, Metrics
from fetcher.pagecache import PageCache
from fetcher.reasons import Reason
from fetcher.settings import ENV_PREFIX, OTHER_VARIABLES, SETTING_NAMES
from gateway.metrics import GatewayMetrics
from gateway.settings import TABLE_KEYS, TOP_KEYS, VARIABLES
from gateway.tools.events import SPEC_EVENTS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def table_rows(text: str, heading: str) -> list[str]:
    """The first cells of the Markdown table whose header line starts with ``heading``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    rows: list[str] = []
    for line in lines[start + 1 :]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        rows.append(line.split("|")[1].strip())
    return rows[1:]  # after the header's rule


def names_in(cells: list[str]) -> set[str]:
    return {name for cell in cells for name in re.findall(r"`([^`]+)`", cell)}


def test_every_variable_is_documented_and_every_documented_one_is_read() -> None:
    text = (DOCS / "settings.md").read_text()
    fetcher_variables = {ENV_PREFIX + name.upper() for name in SETTING_NAMES}
    known = set(VARIABLES) | set(OTHER_VARIABLES) | fetcher_variables
    documented = set(re.findall(r"TIGRESS_[A-Z0-9_]*[A-Z0-9]", text))
    # TIGRESS_FETCHER_<NAME> stands for the fetcher's own variables.
    assert "TIGRESS_FETCHER_<NAME>" in text
    assert documented - known == set(), "documented but not read"
    assert (set(VARIABLES) | set(OTHER_VARIABLES)) - documented == set(), "read but undocumented"


def test_every_fetcher_setting_has_its_row_and_every_row_is_a_setting() -> None:
    rows = table_rows((DOCS / "settings.md").read_text(), "| setting |")
    assert names_in(rows) == set(SETTING_NAMES)


def test_every_gateway_toml_key_is_documented() -> None:
    text = (DOCS / "settings.md").read_text()
    keys = set(TOP_KEYS) | {key for table in TABLE_KEYS.values() for key in table}
    assert {key for key in keys if f"`{key}`" not in text and f"[{key}]" not in text} == set()


def registered(registry: CollectorRegistry) -> set[str]:
    text = generate_latest(registry).decode()
    names = set(re.findall(r"^# TYPE (\S+) ", text, flags=re.MULTILINE))
    # *_created series are off in production (prometheus_client.disable_created_metrics).
    return {name for name in names if not name.endswith("_created")}


def test_every_metric_is_documented_and_every_documented_one_exists() -> None:
    gateway = GatewayMetrics(CollectorRegistry())
    fetcher = Metrics(CollectorRegistry())
    # Stand-ins with what the pool and the PDF reader show at each scrape.
    pool: Any = SimpleNamespace(
        busy=0, waiting=0, workers=2, stopped=dict.fromkeys(STOP_REASONS, 0)
    )
    fetcher.watch_pool(pool)
    fetcher.watch_pdfs(SimpleNamespace(busy=0, waiting=0, workers=2))  # type: ignore[arg-type]
    fetcher.watch_cache(PageCache(max_bytes=1 << 20))
    code = registered(gateway.registry) | registered(fetcher.registry)
    text = (DOCS / "metrics.md").read_text()
    documented = names_in(
        table_rows(text, "| gateway metric |") + table_rows(text, "| fetcher metric |")
    )
    documented = {name for name in documented if name.startswith("tigress_")}
    assert code - documented == set(), "registered but undocumented"
    assert documented - code == set(), "documented but not registered"


def test_every_reason_is_in_the_table_and_nothing_else() -> None:
    rows = table_rows((DOCS / "reasons.md").read_text(), "| reason |")
    assert names_in(rows) == {str(reason) for reason in Reason}


def event_types() -> set[str]:
    found: set[str] = set()
    for kind in SPEC_EVENTS:
        found |= set(re.findall(r'"type": "(\w+)"', inspect.getsource(kind)))
    return found


def test_every_event_is_in_the_contract_and_nothing_else() -> None:
    rows = table_rows((DOCS / "behaviour.md").read_text(), "| event |")
    assert event_types() == {"working", "searched", "read", "sources", "citations"}
    assert names_in(rows) == event_types()


def test_the_readme_stays_short_and_its_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 400
    # Pages other changes add (engines, security, sources and cache) may not exist yet.
    pending = {"docs/engines.md", "docs/security.md", "docs/sources-and-cache.md"}
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if target.startswith("http") or target in pending:
            continue
        assert (ROOT / target).exists(), target
    assert "SPEC.md" not in readme


def test_the_docs_links_resolve() -> None:
    pending = {"engines.md", "security.md", "sources-and-cache.md"}
    for page in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text()):
            if target.startswith("http") or target in pending:
                continue
            assert (page.parent / target).exists(), f"{page.name}: {target}"
