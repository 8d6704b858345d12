"""Events per second through the AG-UI endpoint, beside the same run consumed in process.

One scripted run (``--turns`` turns, each ``--words`` words of streamed text and a
tool call; every word is one ``MessageUpdate``) is consumed two ways:

- **in process**: ``agent.prompt()``, each event read from the channel;
- **endpoint**: ``serve_agui`` on 127.0.0.1 (Hypercorn's trio worker), a client in
  the same process POSTs a ``RunAgentInput`` and reads the SSE stream to
  its end, splitting it into its ``data:`` lines (a plain HTTP/1.0 client on a
  trio socket, so the body is the SSE bytes as sent; the check run parses them).

Before timing, the endpoint's stream is checked: it starts with ``RUN_STARTED``,
ends with ``RUN_FINISHED``, and carries one ``TEXT_MESSAGE_CONTENT`` per word.
Both use the same agent, with ``event_buffer_size=--buffer`` (256): the endpoint
writes as many events per write as are queued, so a deeper buffer means fewer writes.
The rate is the run's agentloop events per second of wall time (the same count
both ways), and the ratio is the endpoint's rate over the in-process one.

    python benchmarks/agui_events.py --words 5000 --turns 4 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import trio
from _cli import positive

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.web import serve_agui


@al.tool
async def echo(text: str) -> str:
    """Say it back."""
    return text


BUFFER = 256


def make_agent(words: int, turns: int) -> al.Agent:
    text = " ".join(f"w{i}" for i in range(words))
    script = [reply(text, call("echo", {"text": f"turn {t}"}, id=f"c{t}")) for t in range(turns)]
    return al.Agent(
        ScriptedProvider([*script, reply("done")]), tools=[echo], event_buffer_size=BUFFER
    )


async def in_process(words: int, turns: int) -> tuple[float, int]:
    agent = make_agent(words, turns)
    count = 0
    start = time.perf_counter()
    async with agent.prompt("go") as events:
        async for _ in events:
            count += 1
    return time.perf_counter() - start, count


async def endpoint(url: str, run: int, *, parse: bool = False) -> tuple[float, list[Any]]:
    host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    body = json.dumps(
        {
            "threadId": f"t{run}",
            "runId": f"r{run}",
            "messages": [{"id": "u", "role": "user", "content": "go"}],
        }
    ).encode()
    head = (
        f"POST / HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    received: list[Any] = []
    start = time.perf_counter()
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        await stream.send_all(head + body)
        buffer = b""
        headers_done = False
        while chunk := await stream.receive_some(1 << 16):
            buffer += chunk
            if not headers_done:
                if b"\r\n\r\n" not in buffer:
                    continue
                status, buffer = buffer.split(b"\r\n\r\n", 1)
                assert status.split()[1] == b"200", status
                headers_done = True
            *events, buffer = buffer.split(b"\n\n")
            if parse:
                received.extend(
                    json.loads(event[6:]) for event in events if event.startswith(b"data: ")
                )
            else:
                received.extend(event for event in events if event.startswith(b"data: "))
    return time.perf_counter() - start, received


async def main(args: argparse.Namespace) -> None:
    words, turns = args.words, args.turns
    async with trio.open_nursery() as nursery:
        url = await nursery.start(serve_agui, lambda: make_agent(words, turns))
        _, received = await endpoint(url, 0, parse=True)
        kinds = [event["type"] for event in received]
        assert kinds[0] == "RUN_STARTED", kinds[:3]
        assert kinds[-1] == "RUN_FINISHED", kinds[-3:]
        contents = kinds.count("TEXT_MESSAGE_CONTENT")
        assert contents == words * turns + 1, contents
        _, count = await in_process(words, turns)
        local, remote = [], []
        for run in range(1, args.repeat + 1):
            local.append((await in_process(words, turns))[0])
            remote.append((await endpoint(url, run))[0])
        nursery.cancel_scope.cancel()
    local_s, remote_s = statistics.median(local), statistics.median(remote)
    print(f"one run: {count} agentloop events, {len(received)} AG-UI events")
    print(f"medians of {args.repeat}, events per second (agentloop events / wall time):")
    print()
    print("| words x turns | buffer | in process | endpoint (SSE, 127.0.0.1) | ratio |")
    print("| --- | --- | --- | --- | --- |")
    print(
        f"| {words} x {turns} | {BUFFER} | {count / local_s:,.0f} | {count / remote_s:,.0f} "
        f"| {local_s / remote_s:.2f}x |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=positive, default=5000)
    parser.add_argument("--turns", type=positive, default=4)
    parser.add_argument("--repeat", type=positive, default=5)
    parser.add_argument(
        "--buffer", type=positive, default=BUFFER, help="the agent's event_buffer_size"
    )
    arguments = parser.parse_args()
    BUFFER = arguments.buffer
    trio.run(main, arguments)
