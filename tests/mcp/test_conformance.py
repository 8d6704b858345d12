"""The official MCP conformance suite, client mode, against ``tests/conformance/client.py``.

Every client scenario of ``@modelcontextprotocol/conformance`` 0.1.16 runs: the suite
starts the scenario's servers, runs the client (which uses :mod:`agentloop.mcp` as a
user would), and checks what it did. Each scenario is one test: the suite's exit
status must be 0 and its ``checks.json`` free of failures. Scenarios listed in
``tests/conformance/expected-failures.yml`` (draft and extension ones only, each with
its reason) are passed to ``--expected-failures``, so one that starts to pass fails
its test until the entry is removed.

The scenarios run in a pool of subprocesses started by the first test that needs
them (a client is a Python process that imports the MCP SDK, so most of the time
is start-up); ``sse-retry`` runs alone first, because it measures a 500 ms
reconnection delay. Needs Node 22 and the suite (``tests/node_tools.py``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import attrs
import pytest
import yaml
from node_tools import node_bin, node_env

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "conformance" / "client.py"
EXPECTED_FAILURES = HERE / "conformance" / "expected-failures.yml"

#: The client scenarios of @modelcontextprotocol/conformance 0.1.16, with their
#: protocol versions, as ``conformance list`` prints them.
SCENARIOS = {
    "initialize": "2025-06-18,2025-11-25",
    "tools_call": "2025-06-18,2025-11-25",
    "elicitation-sep1034-client-defaults": "2025-11-25",
    "sse-retry": "2025-11-25",
    "auth/metadata-default": "2025-11-25",
    "auth/metadata-var1": "2025-11-25",
    "auth/metadata-var2": "2025-11-25",
    "auth/metadata-var3": "2025-11-25",
    "auth/basic-cimd": "2025-11-25",
    "auth/scope-from-www-authenticate": "2025-11-25",
    "auth/scope-from-scopes-supported": "2025-11-25",
    "auth/scope-omitted-when-undefined": "2025-11-25",
    "auth/scope-step-up": "2025-11-25",
    "auth/scope-retry-limit": "2025-11-25",
    "auth/token-endpoint-auth-basic": "2025-06-18,2025-11-25",
    "auth/token-endpoint-auth-post": "2025-06-18,2025-11-25",
    "auth/token-endpoint-auth-none": "2025-06-18,2025-11-25",
    "auth/pre-registration": "2025-11-25",
    "auth/2025-03-26-oauth-metadata-backcompat": "2025-03-26",
    "auth/2025-03-26-oauth-endpoint-fallback": "2025-03-26",
    "auth/resource-mismatch": "draft",
    "auth/offline-access-scope": "draft",
    "auth/offline-access-not-supported": "draft",
    "auth/client-credentials-jwt": "extension",
    "auth/client-credentials-basic": "extension",
    "auth/cross-app-access-complete-flow": "extension",
}
_ALONE = ("sse-retry",)  # timing-sensitive: run before the others, with the machine quiet
_PARALLEL = max(2, (os.cpu_count() or 2) + 1)
_TIMEOUT = 180  # seconds one scenario may take, start-up included


def _expected_failures() -> list[str]:
    data = yaml.safe_load(EXPECTED_FAILURES.read_text(encoding="utf-8"))
    return [str(name) for name in data["client"]]


@attrs.frozen
class Run:
    """One scenario's run: the suite's exit status, output and checks."""

    scenario: str
    status: int
    output: str
    checks: list[dict[str, object]]

    def problems(self) -> list[str]:
        return [
            f"{check['id']}: {check['status']}: "
            f"{check.get('errorMessage') or check.get('description')}"
            for check in self.checks
            if check["status"] in ("FAILURE", "WARNING")
        ]


def _run(scenario: str, out: Path) -> Run:
    command = shlex.join([sys.executable, str(CLIENT)])
    done = subprocess.run(
        [
            node_bin("conformance"),
            "client",
            "--command",
            command,
            "--scenario",
            scenario,
            "--expected-failures",
            str(EXPECTED_FAILURES),
            "-o",
            str(out),
        ],
        env={**node_env(), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=_TIMEOUT,
        check=False,
    )
    found = sorted(out.glob("**/checks.json"))
    checks = json.loads(found[0].read_text()) if found else []
    return Run(scenario, done.returncode, done.stdout + done.stderr, checks)


class Runs:
    """The scenarios' runs, started on first use, in a bounded pool of subprocesses."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pool = ThreadPoolExecutor(max_workers=_PARALLEL)
        self.runs: dict[str, Future[Run]] = {}

    def _start(self) -> None:
        for scenario in _ALONE:
            self.runs[scenario] = self.pool.submit(_run, scenario, self._out(scenario))
            self.runs[scenario].exception()  # wait for it, quietly
        for scenario in SCENARIOS:
            if scenario not in self.runs:
                self.runs[scenario] = self.pool.submit(_run, scenario, self._out(scenario))

    def _out(self, scenario: str) -> Path:
        return self.root / re.sub(r"[^A-Za-z0-9_.-]", "_", scenario)

    def get(self, scenario: str) -> Run:
        if not self.runs:
            node_bin("conformance")  # installs the tools, or skips (NODE_MISSING)
            self._start()
        return self.runs[scenario].result()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    found = Runs(tmp_path_factory.mktemp("conformance"))
    try:
        yield found
    finally:
        found.pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scenario(scenario: str, runs: Runs) -> None:
    run = runs.get(scenario)
    expected = scenario in _expected_failures()
    assert run.checks, run.output[-4000:]
    assert run.status == 0, run.output[-4000:]
    if not expected:
        assert run.problems() == [], run.output[-4000:]
    else:
        assert run.problems() != []


def test_the_scenarios_are_those_of_the_pinned_suite() -> None:
    done = subprocess.run(
        [node_bin("conformance"), "list"],
        env=node_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    client_part = done.stdout.split("Client scenarios", 1)[1]
    listed = dict(re.findall(r"^\s+- (\S+) \[([^\]]+)\]$", client_part, re.MULTILINE))
    assert listed == SCENARIOS


def test_only_draft_and_extension_scenarios_may_be_expected_to_fail() -> None:
    expected = _expected_failures()
    assert expected == ["auth/cross-app-access-complete-flow"]
    assert {SCENARIOS[name] for name in expected} <= {"draft", "extension"}
    text = EXPECTED_FAILURES.read_text(encoding="utf-8")
    for name in expected:  # each entry has its reason in the comment just above it
        before = text.split(f"  - {name}\n", 1)[0].rstrip().splitlines()
        assert before[-1].lstrip().startswith("#"), name
