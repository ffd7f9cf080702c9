"""Outside programs the HTTP tests drive (test_explorer_browser.py,
test_map_clients.py): headless Chromium through selenium, and the rule for
a program that is missing. scripts/ci/setup.sh installs them all; in CI
(`CI` set) a missing one fails its tests, elsewhere it skips them."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# Screenshots and pictures the clients made, kept for a look after the run.
ARTIFACTS = Path(os.environ.get("ZS_ARTIFACTS", REPO_ROOT / "artifacts"))
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def require(present: bool, what: str, *, module: bool = False):
    """Go on only if `present`: in CI a missing program is an error (setup
    should have installed it), elsewhere the test (or `module`) is skipped."""
    if present:
        return
    if os.environ.get("CI"):
        raise RuntimeError(f"{what} is needed: run scripts/ci/setup.sh")
    pytest.skip(f"no {what} here (scripts/ci/setup.sh installs it)", allow_module_level=module)


def have_chromium() -> bool:
    return os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)


@contextlib.contextmanager
def chromium(window: str = "1280,1400"):
    """A headless Chromium (Debian's, with its chromedriver) in a fresh
    profile, keeping the page's console for console_errors()."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="zs-chromium-")
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-quic", "--no-first-run", "--force-device-scale-factor=1",
                 f"--window-size={window}", f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
