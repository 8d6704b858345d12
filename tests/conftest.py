"""Shared test configuration. Tests run under pytest-trio (trio_mode)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import hypothesis
import pytest

hypothesis.settings.register_profile("ci", deadline=None, print_blob=True)
hypothesis.settings.load_profile("ci")


# --------------------------------------------------------------------------- required tools

#: Skips that mean a tool is missing. With ``AGENTLOOP_REQUIRE_RG=1`` (CI sets it) such a
#: skip is a failure: CI installs ripgrep, so its tests must run there.
_RG_MISSING = "ripgrep is not installed"
#: The same for the Node programs of the MCP tests, with ``AGENTLOOP_REQUIRE_NODE=1``.
_NODE_MISSING = "the Node MCP tools could not be installed"
#: The same for the page's browser tests, with ``AGENTLOOP_REQUIRE_CHROMIUM=1``.
_CHROMIUM_MISSING = "Chromium or Playwright is not available"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if not report.skipped:
        return
    reason = str(report.longrepr)
    if os.environ.get("AGENTLOOP_REQUIRE_RG") == "1" and _RG_MISSING in reason:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid}: {_RG_MISSING}, and AGENTLOOP_REQUIRE_RG=1 requires it "
            "(pip install --only-binary :all: ripgrep==14.1.0)"
        )
    elif os.environ.get("AGENTLOOP_REQUIRE_NODE") == "1" and _NODE_MISSING in reason:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid}: {reason}, and AGENTLOOP_REQUIRE_NODE=1 requires them"
    elif os.environ.get("AGENTLOOP_REQUIRE_CHROMIUM") == "1" and _CHROMIUM_MISSING in reason:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid}: {reason}, and AGENTLOOP_REQUIRE_CHROMIUM=1 requires them "
            "(apt-get install chromium)"
        )
