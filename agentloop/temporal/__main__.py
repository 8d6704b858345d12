"""``python -m agentloop.temporal worker --task-queue Q --agents module:mapping``."""

from __future__ import annotations

import argparse
import asyncio
import sys

from temporalio.client import Client

from ._agents import load_agents
from ._client import make_worker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentloop.temporal")
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("worker", help="run a worker for the named agents")
    worker.add_argument("--address", default="127.0.0.1:7233", help="the Temporal server")
    worker.add_argument("--namespace", default="default")
    worker.add_argument("--task-queue", required=True)
    worker.add_argument("--agents", required=True, help="module:mapping of names to factories")
    worker.add_argument(
        "--sticky-timeout",
        type=float,
        default=10.0,
        help="seconds a run waits for its last worker before any takes it (10)",
    )
    args = parser.parse_args(argv)
    try:
        agents = load_agents(args.agents)
    except (ValueError, ImportError) as error:
        print(f"agentloop.temporal: {error}", file=sys.stderr)
        return 2

    async def serve() -> None:
        client = await Client.connect(args.address, namespace=args.namespace)
        runner = make_worker(client, args.task_queue, agents, sticky_timeout=args.sticky_timeout)
        print(f"worker ready on {args.task_queue}", flush=True)
        await runner.run()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
