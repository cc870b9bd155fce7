"""Pages rendered as a person would see them: headless Chromium (Debian's `chromium`,
which .ci/run installs), for the tests of shoal's HTML reports."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["chromium", "rendered", "screenshot"]

#: Chromium's flags: headless, no sandbox (CI runs as root), the page's scripts given 5 s
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000")


def chromium() -> str:
    """Chromium's path; the test is skipped, saying why, on a machine without it."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no Chromium on this machine (chromium/chromium-browser not on PATH): "
                    "the page is not rendered in a headless browser here")
    return browser


def rendered(page: Path) -> str:
    """The DOM of ``page`` once its scripts ran; fails the test on a script error."""
    dom = subprocess.run([chromium(), *FLAGS, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not [line for line in console if "rror" in line or "Uncaught" in line], console
    return dom.stdout


def screenshot(page: Path, shot: Path, size: str = "1200,1600") -> None:
    """A screenshot of ``page`` in ``shot`` (PNG), the window ``size`` pixels."""
    taken = subprocess.run([chromium(), *FLAGS, f"--window-size={size}", f"--screenshot={shot}", page.as_uri()],
                           capture_output=True, text=True, timeout=120)
    assert shot.exists(), taken.stderr
