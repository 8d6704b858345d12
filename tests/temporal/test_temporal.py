"""agentloop.temporal against a real Temporal dev server, with real worker processes.

The server and the workers are ``temporal_server.py``'s (the ``server`` and
``workers`` fixtures, in ``conftest.py``); the agents are in ``temporal_agents.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import pytest
import trio
from helpers import Echo, texts
from temporal_agents import Verdict
from temporal_server import Workers, lines, run, until

import agentloop as al
from agentloop.providers import ModelRequest, ScriptedProvider, call, reply
from agentloop.serialization import to_dict
from agentloop.session import NOT_RUN_AGAIN

temporal = pytest.importorskip("agentloop.temporal")
from temporalio.client import Client, WorkflowFailureError  # noqa: E402
from temporalio.exceptions import ApplicationError  # noqa: E402
from temporalio.testing import ActivityEnvironment  # noqa: E402

from agentloop.temporal._activities import model_activity  # noqa: E402
from agentloop.temporal._agents import factory, register  # noqa: E402


def _tool_name(scheduled: Any) -> str | None:
    """The tool an ``agentloop.tool`` activity runs, read off its scheduled event."""
    if scheduled.activity_type.name != "agentloop.tool":
        return None
    call = json.loads(scheduled.input.payloads[1].data)
    return str(call["name"])


async def until_recorded(handle: Any, tool: str, limit: float = 60) -> None:
    """Wait (asyncio) until the server's history holds a completed activity for ``tool``."""
    deadline = time.monotonic() + limit
    while True:
        history = await handle.fetch_history()
        scheduled = {
            event.event_id
            for event in history.events
            if event.HasField("activity_task_scheduled_event_attributes")
            and _tool_name(event.activity_task_scheduled_event_attributes) == tool
        }
        if any(
            event.activity_task_completed_event_attributes.scheduled_event_id in scheduled
            for event in history.events
            if event.HasField("activity_task_completed_event_attributes")
        ):
            return
        assert time.monotonic() < deadline, f"timed out waiting for {tool}'s completion"
        await asyncio.sleep(0.05)


def test_the_model_activity_sends_what_the_loop_sends_in_process() -> None:
    """One function builds a model request for both drivers: for the same agent and the
    same history, the Temporal model activity (run here in an activity environment, no
    server) sends the very request the in-process loop sent, every field of it."""

    def step(request: ModelRequest) -> Any:
        if not any(isinstance(m, al.ToolResultMessage) for m in request.messages):
            return reply("Echoing.", call("echo", {"text": "hi"}, id="e1"))
        return reply(call("final_result", {"summary": "echoed", "count": 1}, id="f1"))

    def make() -> al.Agent:
        return al.Agent(
            ScriptedProvider([step] * 3),
            system_prompt="Be exact.",
            tools=[Echo()],
            output_type=Verdict,  # adds the final-result tool to the request
            max_tokens=321,
            temperature=0.25,
            thinking_level=al.ThinkingLevel.LOW,
        )

    name = f"same-request-{uuid.uuid4().hex[:8]}"
    register({name: make})
    agent = factory(name)  # the agent the activity uses, built once per process
    provider = agent.config.provider
    assert isinstance(provider, ScriptedProvider)
    trio.run(agent.run, "Echo hi.")
    in_process = provider.requests[-1]
    assert [type(m).__name__ for m in in_process.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]
    history = [to_dict(message) for message in in_process.messages]
    ActivityEnvironment().run(model_activity, name, f"{name}/run", 0, history)
    through_activity = provider.requests[-1]
    assert through_activity is not in_process
    assert through_activity == in_process
    assert [tool.name for tool in through_activity.tools] == ["echo", "final_result"]


def test_a_run_completes_with_its_messages_stop_reason_and_events(workers: Workers) -> None:
    workers.start()

    async def main(client: Client) -> Any:
        handle = await temporal.start_run(
            client, "notes", "Take notes.", id=f"notes-{uuid.uuid4()}", task_queue=workers.queue
        )
        result = await temporal.run_result(handle)
        return result, await temporal.events(handle), await temporal.events(handle, 3)

    result, events, tail = run(main, workers.address)
    assert texts(result.messages) == [
        ("user", "Take notes."),
        ("assistant:tool_use", "Noting.[note#n1,look#l1]"),
        ("result:ok", "n1=noted a"),
        ("result:ok", "l1=looked"),
        ("assistant:tool_use", "More.[note#n2]"),
        ("result:ok", "n2=noted b"),
        ("assistant:stop", "Done after 3 results."),
    ]
    assert result.stop == al.AgentStop(al.StopKind.COMPLETED, "")
    assert result.usage.total_tokens > 0
    kinds = [type(event).__name__ for event in events]
    assert kinds[:3] == ["AgentStart", "TurnStart", "MessageStart"]
    assert kinds[-1] == "AgentEnd"
    assert kinds.count("ToolExecutionStart") == kinds.count("ToolExecutionEnd") == 3
    assert tail == events[3:]
    assert lines(workers.directory / "notes.log") == ["a", "b"]


def test_cancelling_a_run_aborts_it_and_cancels_the_tool_in_its_worker(
    workers: Workers,
) -> None:
    workers.start()
    started = workers.directory / "wait.started"

    async def main(client: Client) -> Any:
        handle = await temporal.start_run(
            client, "waiting", "Wait.", id=f"wait-{uuid.uuid4()}", task_queue=workers.queue
        )
        await until(started.exists)
        await handle.cancel()
        return await temporal.run_result(handle)

    result = run(main, workers.address)
    assert texts(result.messages) == [
        ("user", "Wait."),
        ("assistant:aborted", "Waiting.[wait#w1,look#l1]"),
        ("result:error", "w1=Cancelled: the run was aborted."),
        ("result:error", "l1=Cancelled: the run was aborted."),
    ]
    assert result.stop.kind is al.StopKind.ABORTED
    assert (workers.directory / "wait.cancelled").read_text() == "yes"
    assert lines(workers.directory / "looks.log") == []


STEERED = [
    ("user", "Wait."),
    ("assistant:tool_use", "Waiting.[wait#w1,look#l1]"),
    ("result:ok", "w1=released"),
    ("result:error", "l1=Skipped due to queued user message."),
    ("user", "stop looking"),
    ("assistant:stop", "Finished; the user said: stop looking"),
]
FOLLOWED = [
    ("user", "Wait."),
    ("assistant:tool_use", "Waiting.[wait#w1,look#l1]"),
    ("result:ok", "w1=released"),
    ("result:ok", "l1=looked"),
    ("assistant:stop", "Finished; the user said: Wait."),
    ("user", "and then?"),
    ("assistant:stop", "Finished; the user said: and then?"),
]


@pytest.mark.parametrize(
    ("send", "text", "history"),
    [("steer", "stop looking", STEERED), ("follow_up", "and then?", FOLLOWED)],
)
def test_a_message_sent_while_a_tool_runs(
    workers: Workers, send: str, text: str, history: list[tuple[str, str]]
) -> None:
    """A steering message skips the calls not yet run; a follow-up starts another turn
    once the model is done: as Agent.steer and Agent.follow_up."""
    workers.start()
    started = workers.directory / "wait.started"

    async def main(client: Client) -> Any:
        handle = await temporal.start_run(
            client, "waiting", "Wait.", id=f"{send}-{uuid.uuid4()}", task_queue=workers.queue
        )
        await until(started.exists)
        await getattr(temporal, send)(handle, text)
        (workers.directory / "release").write_text("")
        return await temporal.run_result(handle)

    result = run(main, workers.address)
    assert texts(result.messages) == history
    assert result.stop.kind is al.StopKind.COMPLETED


def test_permission_rules_apply_in_a_workflow(workers: Workers) -> None:
    workers.start()

    async def main(client: Client) -> Any:
        handle = await temporal.start_run(
            client, "guarded", "Take notes.", id=f"guard-{uuid.uuid4()}", task_queue=workers.queue
        )
        return await temporal.run_result(handle)

    result = run(main, workers.address)
    assert texts(result.messages)[2:4] == [
        ("result:error", "n1=Permission denied: calling note is refused by the rule deny(note)"),
        ("result:ok", "l1=looked"),
    ]
    assert lines(workers.directory / "notes.log") == []


def test_structured_output_in_a_workflow(workers: Workers) -> None:
    """The final-result tool, the retry and the typed answer: the core's rules, on Temporal."""
    workers.start()

    async def main(client: Client) -> Any:
        handle = await temporal.start_run(
            client, "typed", "Sum up.", id=f"typed-{uuid.uuid4()}", task_queue=workers.queue
        )
        return await temporal.run_result(handle), await temporal.run_result(handle, Verdict)

    raw, typed = run(main, workers.address)
    assert texts(raw.messages)[2:] == [
        (
            "result:error",
            "f1=Invalid output: $.count: 'two' is not of type 'integer'. "
            "Call final_result again with the corrected answer.",
        ),
        ("assistant:tool_use", "[final_result#f2]"),
        ("result:ok", "f2=Final result accepted."),
    ]
    assert raw.output == {"summary": "two notes", "count": 2}
    assert typed.output == Verdict("two notes", 2)
    assert typed.stop == al.AgentStop(al.StopKind.COMPLETED, "")


def test_what_a_tool_pays_for_counts_in_the_run_and_its_limits(workers: Workers) -> None:
    """A tool's model usage (an MCP server's sampling, say) is the run's on Temporal too."""
    workers.start()

    async def main(client: Client) -> Any:
        handle = await temporal.start_run(
            client, "consulting", "Ask.", id=f"consult-{uuid.uuid4()}", task_queue=workers.queue
        )
        return await temporal.run_result(handle)

    result = run(main, workers.address)
    assert result.stop == al.AgentStop(al.StopKind.MAX_TOKENS, "Max tokens reached (1015/1000)")
    assert (result.usage.input, result.usage.output) == (310, 705)
    assert texts(result.messages)[-2:] == [
        ("result:ok", "c1=consulted"),
        ("user", "[Agent stopped: Max tokens reached (1015/1000)]"),
    ]


def test_an_agent_with_hooks_is_refused_by_name(workers: Workers) -> None:
    """Hooks and approvers would run inside the deterministic workflow: refused, not dropped."""
    workers.start()

    async def main(client: Client) -> Any:
        handle = await temporal.start_run(
            client, "hooked", "Go.", id=f"hooked-{uuid.uuid4()}", task_queue=workers.queue
        )
        with pytest.raises(WorkflowFailureError) as caught:
            await temporal.run_result(handle)
        return caught.value.cause

    cause = run(main, workers.address)
    assert isinstance(cause, ApplicationError)
    assert cause.non_retryable
    assert cause.message == (
        "agent 'hooked' cannot run on Temporal: hooks must be empty (it sets before_turn); "
        "permissions.approver must be None or DEFER. They would run inside the workflow, "
        "which must be deterministic: leave them out of its factory"
    )


def test_the_refusal_names_each_setting_a_workflow_cannot_run() -> None:
    """Hooks, given by name or as one value, are refused as "hooks must be empty"; a
    journal and compaction by their names; what a workflow can run passes as it is."""
    from agentloop.temporal._workflow import _workflow_config

    def journal(event: al.AgentEvent) -> None:
        pass

    model = ScriptedProvider([])
    hooks = al.Hooks(after_turn=lambda messages, usage: None, on_error=print)
    config = al.AgentLoopConfig(provider=model, hooks=hooks, journal=journal)
    with pytest.raises(ApplicationError) as caught:
        _workflow_config("busy", config)
    assert caught.value.non_retryable
    assert caught.value.message == (
        "agent 'busy' cannot run on Temporal: hooks must be empty (it sets after_turn, "
        "on_error); journal must be None. They would run inside the workflow, which must "
        "be deterministic: leave them out of its factory"
    )
    plain = al.AgentLoopConfig(provider=model, temperature=0.5, output_type=Verdict)
    assert _workflow_config("plain", plain) is plain
    # DEFER runs nothing inside the workflow: a run waits for decisions instead.
    deferring = al.AgentLoopConfig(
        provider=model, permissions=al.Permissions(ask=["note"], approver=al.DEFER)
    )
    assert _workflow_config("deferring", deferring) is deferring


def test_a_killed_worker_is_replaced_and_nothing_unsafe_runs_twice(workers: Workers) -> None:
    """SIGKILL the worker while an unsafe tool runs; another worker finishes the run. The
    safe call that had completed is not run again; the interrupted unsafe one is answered
    with NOT_RUN_AGAIN; the rest runs as in an uninterrupted run."""
    first = workers.start()
    started = workers.directory / "hold.started"

    async def main(client: Client) -> Any:
        handle = await temporal.start_run(
            client, "holding", "Go.", id=f"kill-{uuid.uuid4()}", task_queue=workers.queue
        )
        await until(started.exists)
        # look's body may have ended before its completion reached the server; only a
        # recorded completion is one a new worker must not run again.
        await until_recorded(handle, "look")
        workers.kill(first)
        workers.start()
        begun = time.monotonic()
        result = await temporal.run_result(handle)
        return result, time.monotonic() - begun

    result, waited = run(main, workers.address)
    assert texts(result.messages) == [
        ("user", "Go."),
        ("assistant:tool_use", "Holding.[look#l1,hold#h1]"),
        ("result:ok", "l1=looked"),
        ("result:error", f"h1={NOT_RUN_AGAIN}"),
        ("assistant:tool_use", "Then.[note#n1]"),
        ("result:ok", "n1=noted after"),
        ("assistant:stop", "All done."),
    ]
    assert waited < 15  # noticed within a heartbeat timeout, not the tool's (an hour)
    assert lines(workers.directory / "notes.log") == ["h", "after"]  # hold ran once
    assert lines(workers.directory / "looks.log") == ["look"]  # completed: not run again


async def test_the_client_from_trio_through_an_asyncio_thread(workers: Workers) -> None:
    workers.start()
    with temporal.AsyncioThread() as bridge:
        client = await bridge.run(Client.connect, workers.address)
        handle = await bridge.run(
            temporal.start_run,
            client,
            "notes",
            "Take notes.",
            id=f"trio-{uuid.uuid4()}",
            task_queue=workers.queue,
        )
        result = await bridge.run(temporal.run_result, handle)
        await trio.lowlevel.checkpoint()
    assert result.stop.kind is al.StopKind.COMPLETED
    assert texts(result.messages)[-1] == ("assistant:stop", "Done after 3 results.")


def test_a_long_run_continues_as_new_and_loses_nothing(workers: Workers) -> None:
    """With a tiny continue_after, every turn that ends in tool results continues as new:
    the result, the events' indexes and the limits' counts go on as in one execution."""
    workers.start()
    run_id = f"long-{uuid.uuid4()}"

    async def main(client: Client) -> Any:
        handle = await temporal.start_run(
            client, "notes", "Take notes.", id=run_id, task_queue=workers.queue, continue_after=5
        )
        result = await temporal.run_result(handle)
        query = f"WorkflowId = '{run_id}'"
        executions = [execution async for execution in client.list_workflows(query)]
        whole = await temporal.run_result(
            await temporal.start_run(
                client, "notes", "Take notes.", id=f"{run_id}-1", task_queue=workers.queue
            )
        )
        count = await temporal.event_count(handle)
        return result, count, await temporal.events(handle, 0), len(executions), whole

    result, count, kept, executions, whole = run(main, workers.address)
    assert texts(result.messages) == [
        ("user", "Take notes."),
        ("assistant:tool_use", "Noting.[note#n1,look#l1]"),
        ("result:ok", "n1=noted a"),
        ("result:ok", "l1=looked"),
        ("assistant:tool_use", "More.[note#n2]"),
        ("result:ok", "n2=noted b"),
        ("assistant:stop", "Done after 3 results."),
    ]
    assert result.stop == al.AgentStop(al.StopKind.COMPLETED, "")
    assert result.usage == whole.usage  # counted across the executions
    assert texts(result.messages) == texts(whole.messages)
    assert executions == 3  # two continue-as-new, after each turn that ran tools
    # The last execution's events: its own turn, indexed after all the earlier ones.
    names = [type(event).__name__ for event in kept]
    assert (names[0], names[-1]) == ("TurnStart", "AgentEnd")
    assert count > len(kept)
    assert lines(workers.directory / "notes.log") == ["a", "b", "a", "b"]  # two runs
