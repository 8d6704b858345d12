"""The Temporal dev server (one per test session) and each test's workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from temporal_server import Workers, dev_server


@pytest.fixture(scope="session")
def server() -> Iterator[str]:
    pytest.importorskip("temporalio")
    yield from dev_server("--dynamic-config-value", "history.transferProcessorMaxPollRPS=10000")


@pytest.fixture
def workers(server: str, tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(server, tmp_path)
    try:
        yield pool
    finally:
        pool.stop()
