"""How long ``import agentloop`` takes, against trio alone.

Each import runs in a fresh interpreter, as ``python -X importtime -c "import X"``,
``--repeat`` times (default 7), round-robin over the rows so a slow spell of the
machine hits every row alike. An import's time is the cumulative microseconds
``-X importtime`` gives the top-level module (``agentloop`` includes trio, which it
imports); a row that imports more than one top-level module (the HTTP providers,
loaded on first use) adds up those of its package.

The rows:

- ``trio``: the floor; agentloop cannot import faster than trio does;
- ``agentloop``: target 100 ms (the providers' HTTP client, JSON Schema, cattrs,
  rich, YAML and the MCP SDK load when first used, not here);
- ``agentloop.mcp``: target 300 ms (the MCP SDK loads with the first connection);
- ``agentloop + HTTP providers``, for information: ``AnthropicProvider``,
  ``OpenAIProvider`` and ``OpenAIResponsesProvider`` loaded (httpx2 with them).

Bytecode: the interpreters share a private bytecode cache (``PYTHONPYCACHEPREFIX``,
a temporary directory) that one untimed import of each row fills first, so what is
timed is loading compiled code, as from an installed package, whatever
``PYTHONDONTWRITEBYTECODE`` says and without writing into the source tree.

Run it with ``python benchmarks/import_time.py``::

    python benchmarks/import_time.py --repeat 15

It prints, per row, the median and min over the repeats, the median against trio's
(ratio and difference), the target and whether the median is within it; then which
of the optional heavy packages a plain ``import agentloop`` loaded (none, ideally).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

from _cli import positive

NOISE = 1.2  # a median further than this above its min: the timings are noisy

#: (label, the code run, the package whose top-level imports are timed, target ms or None)
ROWS: list[tuple[str, str, str, float | None]] = [
    ("trio", "import trio", "trio", None),
    ("agentloop", "import agentloop", "agentloop", 100.0),
    ("agentloop.mcp", "import agentloop.mcp", "agentloop", 300.0),
    (
        "agentloop + HTTP providers",
        "import agentloop.providers as p; "
        "p.AnthropicProvider; p.OpenAIProvider; p.OpenAIResponsesProvider",
        "agentloop",
        None,
    ),
]

#: Optional or heavy packages that a plain ``import agentloop`` must not load.
HEAVY = ("httpx2", "jsonschema", "cattrs", "rich", "yaml", "mcp", "opentelemetry", "temporalio")

_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)\s*$")


def top_level_us(stderr: str, package: str) -> int:
    """The cumulative µs of the top-level imports of ``package`` in ``-X importtime`` output."""
    total = 0
    found = False
    for line in stderr.splitlines():
        match = _LINE.match(line)
        if match is None or match.group(3):  # not a timing line, or nested in another import
            continue
        name = match.group(4)
        if name == package or name.startswith(package + "."):
            total += int(match.group(2))
            found = True
    if not found:
        raise RuntimeError(f"no top-level import of {package!r} in the -X importtime output")
    return total


def run(code: str, env: dict[str, str], *, importtime: bool = True) -> str:
    """Run ``code`` in a fresh interpreter; its stderr (the -X importtime lines)."""
    flags = ["-X", "importtime"] if importtime else []
    result = subprocess.run(
        [sys.executable, *flags, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{code!r} failed:\n{result.stderr}")
    return result.stderr


def heavy_loaded(env: dict[str, str]) -> list[str]:
    """Which of HEAVY a plain ``import agentloop`` loaded."""
    code = (
        "import sys, agentloop; "
        f"loaded = {{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}; "
        "sys.stderr.write(' '.join(sorted(loaded)))"
    )
    return run(code, env, importtime=False).split()


def main(repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="agentloop-import-time-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for _, code, package, _ in ROWS:  # untimed: fills the bytecode cache
            top_level_us(run(code, env), package)
        samples: dict[str, list[float]] = {label: [] for label, *_ in ROWS}
        for _ in range(repeat):
            for label, code, package, _ in ROWS:
                samples[label].append(top_level_us(run(code, env), package) / 1000)
        loaded = heavy_loaded(env)

    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
        f"python -X importtime, a fresh interpreter per import, {repeat} repeats"
    )
    print()
    trio_median = statistics.median(samples["trio"])
    width = max(len(label) for label, *_ in ROWS)
    header = f"{'module':<{width}} | median ms | min ms | vs trio alone      | target    | ok/OVER"
    print(header)
    print("-" * len(header))
    noisy = False
    for label, _, _, target in ROWS:
        median, low = statistics.median(samples[label]), min(samples[label])
        noisy = noisy or median > NOISE * low
        versus = f"{median / trio_median:.2f}x ({median - trio_median:+.1f} ms)"
        goal = f"<= {target:.0f} ms" if target is not None else "(info)"
        verdict = "-" if target is None else ("ok" if median <= target else "OVER")
        print(
            f"{label:<{width}} | {median:9.1f} | {low:6.1f} | {versus:<18} | {goal:<9} | {verdict}"
        )
    print()
    print(
        "loaded by a plain `import agentloop`: "
        + (", ".join(loaded) if loaded else f"none of {', '.join(HEAVY)}")
    )
    if noisy:
        print(
            f"warning: some medians are more than {NOISE}x their min: the timings are noisy "
            "(was the machine busy?); rerun on an idle machine, or with a larger --repeat"
        )


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Import time of agentloop and agentloop.mcp against trio alone."
    )
    parser.add_argument(
        "--repeat", type=positive, default=7, help="timed imports per row (default: 7)"
    )
    args = parser.parse_args(argv)
    main(args.repeat)


if __name__ == "__main__":
    cli()
