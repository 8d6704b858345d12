"""How long making tools from an OpenAPI description takes, against reading its JSON.

For each description (Petstore 3.0, the Museum 3.1 example, and GitHub's REST API,
over a thousand operations; see tests/data/openapi/README.md) the script times:

- **json**: ``json.loads`` of the document's text (the floor: the document must be
  read at all);
- **tools**: ``OpenApiToolAdapter.from_spec`` on the parsed document: every
  operation's parameters, ``$ref``s followed, schemas converted;
- **tools + check**: the same, and every tool's schema compiled by jsonschema's
  ``check_schema``, as the loop does on first use of each tool.

Before timing, every tool's schema is checked to be valid JSON Schema and the
tools' names to be unique. Run it with ``python benchmarks/openapi_parse.py``
(``--repeat N``). It prints the median milliseconds, and µs per operation.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from _cli import positive

from agentloop.openapi import OpenApiConfig, OpenApiToolAdapter

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "openapi"
CONFIG = OpenApiConfig(base_url="http://127.0.0.1:9")


def documents() -> dict[str, str]:
    """Each description as JSON text."""
    texts = {
        name: json.dumps(yaml.safe_load((DATA / name).read_text(encoding="utf-8")))
        for name in ("petstore-3.0.yaml", "museum-3.1.yaml")
    }
    texts["github-api.json"] = gzip.decompress((DATA / "github-api.json.gz").read_bytes()).decode()
    return texts


def tools_of(text: str) -> list[OpenApiToolAdapter]:
    return OpenApiToolAdapter.from_spec(json.loads(text), CONFIG)


def checked(text: str) -> list[OpenApiToolAdapter]:
    tools = tools_of(text)
    for tool in tools:
        jsonschema.Draft202012Validator.check_schema(tool.parameters_schema)
    return tools


def median_ms(work: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=positive, default=5, help="timings per stage")
    args = parser.parse_args(argv)
    print(f"median of {args.repeat}; ms for the whole document, µs per operation")
    print(
        f"{'document':<18} {'ops':>5} {'MB':>6} {'json ms':>9} {'tools ms':>9} "
        f"{'+check ms':>10} {'µs/op':>7} {'vs json':>8}"
    )
    for name, text in documents().items():
        tools = checked(text)
        if len({t.name for t in tools}) != len(tools):
            raise SystemExit(f"{name}: tool names are not unique")
        loads = median_ms(lambda text=text: json.loads(text), args.repeat)  # type: ignore[misc]
        build = median_ms(lambda text=text: tools_of(text), args.repeat)  # type: ignore[misc]
        full = median_ms(lambda text=text: checked(text), args.repeat)  # type: ignore[misc]
        per_op = (build - loads) * 1000 / len(tools)
        print(
            f"{name:<18} {len(tools):>5} {len(text) / 1e6:>6.2f} {loads:>9.1f} {build:>9.1f} "
            f"{full:>10.1f} {per_op:>7.0f} {build / loads:>7.1f}x"
        )


if __name__ == "__main__":
    main()
