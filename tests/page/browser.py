"""Debian's Chromium, headless, driven by Debian's chromedriver through Selenium.

Nothing is downloaded: both binaries come from Debian packages (``make browser``), and
Selenium is given their paths, so it never looks for a driver of its own. The machine's
network is closed, so Chromium starts with everything that phones home switched off, and
with a fresh profile.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ROOT = Path(__file__).resolve().parents[2]
#: Screenshots and other things a person looks at after a run.
OUTPUT = Path(os.environ.get("TIGRESS_TEST_OUTPUT", ROOT / "test-output")) / "page"
#: Condition waits: generous for a loaded machine, and they end when the condition holds.
WAIT = 20.0
DESKTOP = (1280, 900)
PHONE = (390, 844)

#: Runs before any page script, outside the CSP: records what a test must never see.
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__violations.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""

T = TypeVar("T")


def missing() -> str | None:
    """Why the browser cannot run here, or None when it can."""
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if absent:
        return (
            f"{' and '.join(absent)} not found: the page tests need Debian's chromium and "
            "chromium-driver (`make browser` installs them as root)"
        )
    return None


def console(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    """The browser console entries since the last call (and forgets them)."""
    entries: list[dict[str, Any]] = driver.get_log("browser")  # type: ignore[no-untyped-call]
    return entries


@contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    """A headless Chromium with a fresh profile, closed at the end."""
    profile = tempfile.mkdtemp(prefix="tigress-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--no-first-run",
        "--no-default-browser-check",
        "--lang=en-US",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


class Page:
    """The chat page in one browser, with the waits and reads the tests share."""

    def __init__(self, driver: webdriver.Chrome, url: str) -> None:
        self.driver = driver
        self.url = url

    # --- Waiting ----------------------------------------------------------------------

    def until(self, condition: Callable[[], T | bool | None], what: str) -> T:
        """Wait until ``condition()`` is truthy; its value."""
        result: Any = WebDriverWait(self.driver, WAIT, poll_frequency=0.05).until(
            lambda _: condition(), message=f"waited {WAIT:.0f} s for {what}"
        )
        return result  # type: ignore[no-any-return]

    def find(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def text(self, css: str) -> str:
        """The rendered text of the first match ("" when none)."""
        found = self.all(css)
        return found[0].text if found else ""

    def visible(self, css: str) -> bool:
        found = self.all(css)
        return bool(found) and found[0].is_displayed()

    def wait_text(self, css: str, text: str) -> WebElement:
        """Wait until an element matching ``css`` shows ``text``; that element."""
        return self.until(
            lambda: next((e for e in self.all(css) if text in e.text), None),
            f"{text!r} in {css}",
        )

    # --- Doing ------------------------------------------------------------------------

    def open(self) -> None:
        self.driver.get(self.url + "/")
        self.until(
            lambda: self.driver.execute_script("return document.readyState") == "complete", "load"
        )

    def enter_key(self, key: str) -> None:
        """Type the key in the key dialog (which must be open) and submit it."""
        field = self.until(lambda: self.displayed("#key-input"), "the key dialog")
        field.clear()
        field.send_keys(key)
        self.find("#key-form button[type=submit]").click()

    def wait_models(self) -> None:
        self.until(lambda: self.find("#model").is_enabled(), "the model list")

    def set_web(self, on: bool) -> None:
        box = self.find("#web")
        if box.is_selected() != on:
            self.find(".switch").click()
        assert self.find("#web").is_selected() is on

    def ask(self, question: str) -> None:
        """Type the question and press Enter."""
        box = self.find("#prompt")
        box.send_keys(question)
        box.send_keys("\n")

    def wait_answer_done(self) -> WebElement:
        """The last answer, once it finished (its action buttons show)."""
        return self.until(
            lambda: self.displayed(".msg.assistant:last-child .actions"), "the answer to finish"
        )

    def last_answer(self) -> WebElement:
        return self.find(".msg.assistant:last-child")

    def displayed(self, css: str) -> WebElement | None:
        found = self.all(css)
        return found[0] if found and found[0].is_displayed() else None

    # --- What must never happen -------------------------------------------------------

    def alert_text(self) -> str | None:
        """The text of an open dialog (alert/confirm/prompt), or None."""
        try:
            return self.driver.switch_to.alert.text
        except NoAlertPresentException:
            return None

    def violations(self) -> list[str]:
        """Content-Security-Policy violations seen since the page loaded."""
        found = self.driver.execute_script("return window.__violations || []")
        return [str(v) for v in found]

    def script_errors(self) -> list[str]:
        """Console errors other than failed requests (a 401 is logged by Chromium too)."""
        return [
            str(entry["message"])
            for entry in console(self.driver)
            if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]
        ]

    # --- Looks ------------------------------------------------------------------------

    @contextmanager
    def emulating(self, *, phone: bool, dark: bool) -> Iterator[None]:
        """Inside the block the viewport is a phone's or a desktop's, light or dark."""
        width, height = PHONE if phone else DESKTOP
        self.driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": phone},
        )
        scheme = "dark" if dark else "light"
        self.driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
        )
        try:
            # Let layout and the colour scheme settle: two animation frames.
            self.driver.execute_async_script(
                "const done = arguments[0];"
                "requestAnimationFrame(() => requestAnimationFrame(() => done(true)));"
            )
            yield
        finally:
            self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
            self.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})

    def screenshot(self, name: str) -> Path:
        """Write a PNG of the viewport to the test output folder."""
        OUTPUT.mkdir(parents=True, exist_ok=True)
        path = OUTPUT / f"{name}.png"
        path.write_bytes(self.driver.get_screenshot_as_png())
        return path

    def overflows_horizontally(self) -> bool:
        """Whether the page is wider than its viewport (a phone would scroll sideways)."""
        return bool(
            self.driver.execute_script(
                "return document.documentElement.scrollWidth > document.documentElement.clientWidth"
            )
        )
