"""Headless Chromium through Selenium for the browser tests (the report's, the view's): Debian's chromium and
chromium-driver, which .ci/run installs; the tests skip with a reason where they are missing."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
NEEDS_CHROMIUM = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs the Debian packages chromium and chromium-driver (.ci/run installs them)",
)


@contextlib.contextmanager
def chromium(window: str = "1280,2000") -> Iterator[Any]:
    """A headless Chromium with its browser and network logs kept, quit afterwards. Chromium makes its singleton
    folder in $TMPDIR, outside any --user-data-dir: one of its own here, removed afterwards, not /tmp. A short
    path: the folder holds a Unix socket (108 bytes at most), and an xdist worker's tmp_path is too long for it
    (Chromium then exits at start)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the dev extra")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"):
        options.add_argument(arg)
    options.add_argument(f"--window-size={window}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    with tempfile.TemporaryDirectory(prefix="raglake-chromium-") as chromium_tmp:
        service = Service(CHROMEDRIVER, env={**os.environ, "TMPDIR": chromium_tmp})
        driver = webdriver.Chrome(service=service, options=options)
        try:
            yield driver
        finally:
            driver.quit()
