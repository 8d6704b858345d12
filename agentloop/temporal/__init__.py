"""Run agents on Temporal: every model request and tool call an activity.

Temporal workflows run on Temporal's own deterministic event loop, where trio
cannot run. The workflow (:class:`AgentRun`) drives the same loop core as
``Agent``; each model request (``agentloop.model``) and each tool call
(``agentloop.tool``) is an activity, run under trio in a worker thread, with
heartbeats so a dead worker is noticed within seconds. Install with
``pip install 'agentloop[temporal]'``.

A worker serves agents by name (factories that build an ``Agent``)::

    worker = make_worker(client, "agents", {"coder": make_coder})
    await worker.run()

or ``python -m agentloop.temporal worker --task-queue agents --agents myapp:AGENTS``.
A client starts a run and reads its result::

    handle = await start_run(client, "coder", "Fix the failing test", id="run-1",
                             task_queue="agents")
    result = await run_result(handle)     # messages, stop reason, usage

An agent with ``Permissions(approver=DEFER)`` waits for decisions, holding no
worker: ``await pending(handle)`` lists the calls, ``await approve(handle,
call_id)`` / ``await deny(handle, call_id, "why")`` decide them.

The client is asyncio; from trio, run it through :class:`AsyncioThread`.
See docs/concepts/durable.md.
"""

from .._util import claim_public_home
from ._agents import AgentFactory as AgentFactory
from ._agents import load_agents as load_agents
from ._client import AsyncioThread as AsyncioThread
from ._client import RunResult as RunResult
from ._client import approve as approve
from ._client import deny as deny
from ._client import event_count as event_count
from ._client import events as events
from ._client import follow_up as follow_up
from ._client import make_worker as make_worker
from ._client import pending as pending
from ._client import run_result as run_result
from ._client import start_run as start_run
from ._client import steer as steer
from ._workflow import AgentRun as AgentRun

__all__ = [
    "AgentFactory",
    "AgentRun",
    "AsyncioThread",
    "RunResult",
    "approve",
    "deny",
    "event_count",
    "events",
    "follow_up",
    "load_agents",
    "make_worker",
    "pending",
    "run_result",
    "start_run",
    "steer",
]


claim_public_home(globals(), __all__, __name__, from_=("agentloop.temporal._",))
