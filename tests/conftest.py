"""Shared test configuration. Tests run under pytest-trio (trio_mode)."""

from __future__ import annotations

import hypothesis

hypothesis.settings.register_profile("ci", deadline=None, print_blob=True)
hypothesis.settings.load_profile("ci")
