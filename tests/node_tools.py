"""Node programs the MCP tests run: Node 22, the official conformance suite, server-everything.

They come from the npm registry, pinned, installed once into a cache directory
(``$AGENTLOOP_NODE_DIR``, default ``~/.cache/agentloop-tests/node``) by the first test
that needs them; nothing is installed by hand. The npm package ``node@22`` gives Node 22
without a system install (the suite needs it; the system's node may be older).

Without ``npm`` (or with no registry), the tests that need these skip with
:data:`NODE_MISSING` in the reason; with ``AGENTLOOP_REQUIRE_NODE=1`` (CI sets it)
``conftest.py`` turns such a skip into a failure.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

#: The packages and versions, as the issue pins them.
PACKAGES = {
    "node": "22.23.3",
    "@modelcontextprotocol/conformance": "0.1.16",
    "@modelcontextprotocol/server-everything": "2026.8.31",
    "@agentclientprotocol/sdk": "2.4.0",
    "@modelcontextprotocol/inspector": "2.12.0",
    "@ag-ui/client": "1.0.0",
}

#: In every skip reason, so conftest.py can tell "missing" from other skips.
NODE_MISSING = "the Node MCP tools could not be installed"


def node_dir() -> Path:
    """Where the packages are installed (created on first use)."""
    default = Path.home() / ".cache" / "agentloop-tests" / "node"
    return Path(os.environ.get("AGENTLOOP_NODE_DIR", default))


def _installed(root: Path) -> bool:
    try:
        lock = json.loads((root / "package.json").read_text())
    except (OSError, ValueError):
        return False
    wanted = dict(lock.get("dependencies", {}))
    if wanted != PACKAGES:
        return False
    return all((root / "node_modules" / name / "package.json").exists() for name in PACKAGES)


def ensure_node_tools() -> Path:
    """Install the pinned packages if needed; the directory holding ``node_modules``.

    Calls ``pytest.skip`` (reason holds :data:`NODE_MISSING`) when npm is missing or
    the install fails. Safe across processes (xdist workers): a file lock serialises it.
    """
    root = node_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed(root):
            return root
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(f"{NODE_MISSING}: npm is not installed")
        (root / "package.json").write_text(
            json.dumps({"name": "agentloop-tests-node", "private": True, "dependencies": PACKAGES})
        )
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0 or not _installed(root):
            pytest.skip(f"{NODE_MISSING}: npm install failed: {done.stderr[-2000:]}")
        return root


def node_bin(name: str) -> str:
    """The path of an installed program (``node``, ``conformance``, ``mcp-server-everything``)."""
    return str(ensure_node_tools() / "node_modules" / ".bin" / name)


def node_env() -> dict[str, str]:
    """An environment whose PATH finds Node 22 first (scripts start with `env node`)."""
    bin_dir = str(ensure_node_tools() / "node_modules" / ".bin")
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
