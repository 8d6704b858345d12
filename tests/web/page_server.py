"""``agentloop web`` as a real process, for the page's tests; and the system's Chromium."""

from __future__ import annotations

import os
import re
import selectors
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

#: The skip reason that ``AGENTLOOP_REQUIRE_CHROMIUM=1`` turns into a failure (conftest.py).
CHROMIUM_MISSING = "Chromium or Playwright is not available"
_URL = re.compile(r"the page is at (http://127\.0\.0\.1:\d+/\?token=\S+)")


def chromium() -> str:
    """The system's Chromium (Debian's ``chromium``); skips when it or Playwright is missing."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip(f"{CHROMIUM_MISSING}: pip install playwright")
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip(f"{CHROMIUM_MISSING}: apt-get install chromium")
    return found


@contextmanager
def page_server(home: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run ``agentloop web ARGS`` (sessions under ``home``); yield the URL it prints."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.endswith("_API_KEY") and not key.startswith("AGENTLOOP_")
    }
    environ.update(AGENTLOOP_HOME=str(home), HOME=str(home), **(env or {}))
    process = subprocess.Popen(
        [sys.executable, "-m", "agentloop", "web", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ,
        cwd=home,
    )
    assert process.stdout is not None
    try:
        selector = selectors.DefaultSelector()
        selector.register(process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + 30
        line = b""
        while (found := _URL.search(line.decode())) is None:
            left = deadline - time.monotonic()
            assert left > 0, "agentloop web printed no URL"
            assert selector.select(left), "agentloop web printed no URL"
            chunk = process.stdout.readline()
            assert chunk, process.stderr.read().decode() if process.stderr else "exited"
            line = chunk
        yield found.group(1)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
