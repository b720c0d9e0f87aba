"""Fixtures of the page tests: one headless Chromium per run, fresh servers per test.

Every test module here is marked ``browser`` (a quick run can say ``-m 'not browser'``; ``make
test`` runs them). Without Chromium the tests fail with the reason, never skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trustme
from selenium import webdriver

from tests.page.browser import Page, chromium, console, missing
from tests.page.stack import Stack


@pytest.fixture(scope="session")
def driver() -> Iterator[webdriver.Chrome]:
    reason = missing()
    if reason is not None:
        pytest.fail(reason, pytrace=False)
    with chromium() as browser:
        yield browser


@pytest.fixture
def stack(request: pytest.FixtureRequest, ca: trustme.CA) -> Iterator[Stack]:
    """The real gateway and research tools, the SearXNG stand-in, the fetcher service,
    the origin, the scripted engine and the canary. Gateway settings to change come as
    the indirect parameter (a dict), if any."""
    settings: dict[str, Any] = getattr(request, "param", {})
    with Stack(ca, **settings) as servers:
        yield servers


@pytest.fixture
def page(driver: webdriver.Chrome, stack: Stack) -> Iterator[Page]:
    """The page of this test's gateway. Each gateway has its own port, so its own origin
    and its own local storage: tests do not see each other's keys or conversations."""
    page = Page(driver, stack.url)
    console(driver)  # drop what earlier tests left
    yield page
    errors = page.script_errors()
    alert = page.alert_text()
    if alert is not None:
        driver.switch_to.alert.dismiss()
    driver.get("about:blank")
    assert alert is None, f"a dialog opened: {alert!r}"
    assert errors == []
