"""Trio helpers around the OpenAPI echo server of ``openapi_server.py``, and the spec files.

* :func:`serve_openapi_echo` runs ``python tests/openapi_server.py`` as a real
  process and yields its base URL ``http://127.0.0.1:<port>``; leaving the block
  kills and reaps it.
* :data:`OPENAPI_DATA` is the folder of spec files (``tests/data/openapi``), and
  :func:`load_spec` reads one of them (YAML, JSON, or gzipped JSON).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import yaml
from server_common import read_port, stop_process

__all__ = [
    "ECHO_SERVER_PATH",
    "HTTP_METHODS",
    "OPENAPI_DATA",
    "load_spec",
    "operations",
    "serve_openapi_echo",
]

ECHO_SERVER_PATH: str = str(Path(__file__).resolve().with_name("openapi_server.py"))
"""Absolute path of the echo server script."""

OPENAPI_DATA: Path = Path(__file__).resolve().parent / "data" / "openapi"
"""The folder of OpenAPI spec files."""

HTTP_METHODS: tuple[str, ...] = (
    "get",
    "put",
    "post",
    "delete",
    "options",
    "head",
    "patch",
    "trace",
)
"""The keys of an OpenAPI path item that are operations."""


def load_spec(name: str) -> Any:
    """The parsed document ``tests/data/openapi/<name>`` (``.json``, ``.json.gz`` or YAML)."""
    path = OPENAPI_DATA / name
    if name.endswith(".json.gz"):
        return json.loads(gzip.decompress(path.read_bytes()))
    if name.endswith(".json"):
        return json.loads(path.read_text(encoding="utf-8"))
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """``(path, method, operation)`` for every operation under ``paths``, in document order."""
    return [
        (path, method, operation)
        for path, item in spec.get("paths", {}).items()
        for method, operation in item.items()
        if method in HTTP_METHODS
    ]


@asynccontextmanager
async def serve_openapi_echo(port: int = 0, *, startup_timeout: float = 30.0) -> AsyncIterator[str]:
    """Run the echo server as a subprocess; yield ``http://127.0.0.1:<port>``.

    ``port=0`` lets the OS pick. Reading the ``PORT`` line is bounded by
    ``startup_timeout``; on exit the process gets SIGTERM (SIGKILL after 5 s),
    shielded and bounded, and is reaped.
    """
    args = [sys.executable, ECHO_SERVER_PATH, "--port", str(port)]
    process = await trio.lowlevel.open_process(args, stdout=subprocess.PIPE)
    assert process.stdout is not None
    try:
        with trio.fail_after(startup_timeout):
            bound = await read_port(process.stdout)
        yield f"http://127.0.0.1:{bound}"
    finally:
        with trio.CancelScope(shield=True):
            await stop_process(process)
            await process.stdout.aclose()
