"""Suite-wide settings: hypothesis runs without per-example deadlines (shared, noisy machines),
and coverage combines only the data files that were written whole."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Generator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=200
)
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")

pytest_plugins = ["tests.support.fixtures"]


def _written_whole(path: Path) -> bool:
    """Whether ``path`` is a coverage data file that coverage can read, as its combine
    reads it."""
    from coverage import CoverageData
    from coverage.exceptions import CoverageException

    try:
        CoverageData(str(path), read_only=True).read()
    except (CoverageException, sqlite3.Error):
        return False
    return True


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    """After the tests, before pytest-cov combines the data files (its own wrapper of this
    hook encloses this one): drop the files that processes killed while saving left half
    written. The render pool kills each worker as soon as it has answered (a security
    rule: ``fetcher.isolation.workers``), sometimes while coverage is saving the worker's data at
    its exit; tests also kill PDF workers and ``fetcher serve`` on purpose. Such a file
    holds no usable data, and combining it only prints "isn't a coverage data file"."""
    try:
        return (yield)
    finally:
        for path in session.config.rootpath.glob(".coverage.*"):
            if path.name.endswith("-journal") or not path.is_file() or _written_whole(path):
                continue
            path.unlink(missing_ok=True)
            path.with_name(f"{path.name}-journal").unlink(missing_ok=True)
