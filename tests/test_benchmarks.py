"""The benchmark scripts run, on tiny inputs, and check what they measure.

No timing is asserted here (speed is what the scripts print); these tests keep
the scripts working as the library changes, and check the correctness gates
they run before timing anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def bench(script: str, *args: str, env: dict[str, str] | None = None) -> list[str]:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert (result.returncode, result.stderr) == (0, "")
    return result.stdout.splitlines()


def test_loop_overhead() -> None:
    """Both loops produce the same events per run before they are timed."""
    lines = bench("loop_overhead.py", "--turns", "2", "--repeat", "1", "--min-turns", "2")
    assert any(line.startswith("overhead: agentloop is") for line in lines)
    assert lines[-1].startswith("tracing at 2 turns: agentloop µs/turn off ")
    events = next(line for line in lines if line.startswith("events per turn"))
    counts = events.split(": ", 1)[1]
    agentloop_counts, hand_counts = counts.split("; ")[0].split(", hand-written ")
    assert agentloop_counts.removeprefix("agentloop ") == hand_counts


def test_many_agents() -> None:
    """Both sides run K agents to the end and the table has a row per K."""
    lines = bench(
        "many_agents.py", "--agents", "2,3", "--turns", "2", "--delay-ms", "1", "--repeat", "1"
    )
    rows = [line.split(" | ") for line in lines if line.lstrip().startswith(("2 |", "3 |"))]
    assert [row[0].strip() for row in rows] == ["2", "3"]
    assert lines[-2].startswith("K=2: throughput ")
    assert lines[-1].startswith("K=3: throughput ")


def test_parallel_tools() -> None:
    """The wide turn answers every call; the abort answers every call and leaves no process."""
    lines = bench("parallel_tools.py", "--calls", "5", "--sleep-ms", "1", "--repeat", "1")
    assert any(line.startswith("5 calls x 1 ms, prompt to AgentEnd | ") for line in lines)
    assert any(
        line.startswith("abort(): 5 calls + bash with children, to AgentEnd | ") for line in lines
    )


def test_temporal_turns() -> None:
    """The three runs complete on a real dev server and the table has a row each."""
    lines = bench("temporal_turns.py", "--turns", "3", "--repeat", "1")
    rows = [line.split(" | ")[0].strip() for line in lines if " | " in line]
    assert rows == ["run", "agentloop on Temporal", "plain workflow", "agentloop in process"]
    assert lines[-1].startswith("workflow history (JSON) of one run: agentloop ")


def test_temporal_approval() -> None:
    """Both paths run on a real dev server (the tool and the activity once each per
    run) and the table has a row each."""
    lines = bench("temporal_approval.py", "--repeat", "1")
    rows = [line.split(" | ")[0].strip() for line in lines if " | " in line]
    assert rows == ["path", "agentloop approve Update -> tool", "plain signal -> activity"]
    assert lines[-1].startswith("agentloop approve: ")


def test_sse_decode() -> None:
    """The generated streams decode and parse back to what was built."""
    tiny = ["--size", "0.05", "--answer-mb", "0.01", "--repeat", "1", "--e2e-repeat", "1"]
    lines = bench("sse_decode.py", *tiny)
    assert "built and checked 9 streams in" in "\n".join(lines)
    assert any(line.startswith("anthropic mixed ") for line in lines)
    assert any(line.startswith("openai mixed ") for line in lines)
    assert any(line.startswith("responses mixed ") for line in lines)


@pytest.mark.parametrize("with_rg", [True, False], ids=["rg", "no-rg"])
def test_search(tmp_path: Path, with_rg: bool) -> None:
    """SearchTool's engines agree on a small tree; without rg only Python is timed."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        "class A:\n    def __init_subclass__(cls):\n        return super().__init_subclass__()\n"
    )
    env = dict(os.environ)
    if not with_rg:  # a PATH without rg (the venv may have one: the ripgrep wheel)
        (tmp_path / "bin").mkdir()
        env["PATH"] = str(tmp_path / "bin")
    elif shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    lines = bench("search.py", "--path", str(tmp_path), "--repeat", "1", env=env)
    table = [line for line in lines if " | " in line]
    variants = sorted({line.split(" | ")[1].strip() for line in table[1:]})
    if with_rg:
        assert "both engines give the same output for every pattern" in lines
        assert variants == [
            "SearchTool, Python engine",
            "SearchTool, rg",
            "rg --json (the tool's command)",
            "rg -n (plain)",
        ]
    else:
        assert "rg is not on PATH: only the Python engine is timed" in lines
        assert variants == ["SearchTool, Python engine"]


def test_mcp_calls() -> None:
    """Every way of calling echo answers the same text before it is timed."""
    lines = bench("mcp_calls.py", "--calls", "3", "--repeat", "1", "--concurrent", "3")
    assert lines[1].split() == ["transport", "calls", "way", "µs/call", "vs", "sdk"]
    rows = [line.split()[:3] for line in lines[2:]]
    ways = ["sdk", "connection", "adapter"]
    assert [row[2] for row in rows] == ways * 4
    assert [row[0] for row in rows] == ["in-process"] * 6 + ["stdio"] * 6


def test_openapi_parse() -> None:
    """Every description's tools have valid, unique schemas before they are timed."""
    lines = bench("openapi_parse.py", "--repeat", "1")
    rows = {line.split()[0]: line.split()[1] for line in lines[2:]}
    assert rows == {"petstore-3.0.yaml": "19", "museum-3.1.yaml": "9", "github-api.json": "1223"}


def test_structured_output() -> None:
    """Each mode ends with the answer whole before it is timed; a row per size."""
    lines = bench("structured_output.py", "--sizes", "0.01,0.02", "--repeat", "1")
    rows = [line.split(" | ")[0].strip() for line in lines if " | " in line][1:]
    assert rows == ["0.01", "0.02"]
    assert lines[-2].startswith("structured output: at most ")
    assert lines[-1].startswith("µs/KB largest over smallest (1.0 = linear): arguments ")


def test_scheduling() -> None:
    """Every side runs every call within the budget and without clashes before timing."""
    lines = bench(
        "scheduling.py", "--calls", "40", "--budget", "5", "--agents", "4", "--repeat", "1"
    )
    assert lines[0] == "40 tool calls, budget 5, median of 1 runs"
    assert lines[-1].startswith("scheduling cost per call: ")
    rows = [line.split(" | ")[0].strip() for line in lines if " | " in line][1:]
    assert rows == [
        "trio.CapacityLimiter(budget): acquire, checkpoint, release",
        "agentloop Scheduler, the same work",
        "agentloop Scheduler, 20 keys read, 1 in 10 written",
        "agent tree (4 sub-agents), no schedule",
        "agent tree, its tools share a trio.CapacityLimiter(5)",
        "agent tree, Schedule(max_concurrent=5)",
    ]


def test_import_time() -> None:
    """Each import runs and is timed; the table has a row each, and nothing heavy is loaded."""
    lines = bench("import_time.py", "--repeat", "1")
    rows = [line.split(" | ") for line in lines if " | " in line]
    assert [row[0].strip() for row in rows] == [
        "module",
        "trio",
        "agentloop",
        "agentloop.mcp",
        "agentloop + HTTP providers",
    ]
    verdicts = [row[-1].strip() for row in rows[1:]]
    assert verdicts[0] == verdicts[3] == "-"  # trio, and the HTTP providers: no target
    assert {verdicts[1], verdicts[2]} <= {"ok", "OVER"}
    assert any(line.startswith("loaded by a plain `import agentloop`: none of ") for line in lines)


def test_agui_events() -> None:
    """The endpoint's stream is checked (RUN_STARTED ... RUN_FINISHED, a content per word)."""
    lines = bench("agui_events.py", "--words", "20", "--turns", "2", "--repeat", "1")
    assert lines[0] == "one run: 71 agentloop events, 67 AG-UI events"
    assert lines[-1].startswith("| 20 x 2 | 256 | ")
