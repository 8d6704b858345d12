"""Sessions: a run recorded as JSON Lines, loaded again, and resumed.

Record every event of a run; the recorder keeps what rebuilds the conversation::

    with SessionRecorder(new_session_path(), meta={"model": "claude-sonnet-5"}) as recorder:
        async with agent.prompt("Fix the failing test") as events:
            async for event in events:
                recorder.record(event)
                ...

Later, in another process::

    session = load_session(path)
    agent = Agent(provider, tools=tools)
    session.restore(agent)          # history, pruned and compacted context
    await agent.run("Go on")

The file holds one JSON object per line: a ``session`` header, then events as
:mod:`agentloop.serialization` writes them (``MessageEnd``, ``TurnEnd``, tool
starts and ends, ``PrunApplied``, ``CompactionEnded``, ``AgentStart`` and
``AgentEnd``; deltas and updates are left out). Each line reaches the operating
system as it is written (a killed process loses nothing written); ``fsync``
says when it is forced to the disk too.

Give the recorder to the loop as its ``journal`` and the session survives a
crash of the process: each tool call's intent is written before the tool
starts and its result as soon as it ends, and :meth:`Session.recover` answers
the calls a dead process left open (running again only what is safe to)::

    recorder = SessionRecorder(path)
    agent = Agent(provider, tools=tools, journal=recorder.record)
    ...                                        # the process is killed
    session = load_session(path)
    await session.recover(agent)               # after a new SessionRecorder(path)
    async with agent.resume() as events:       # the model goes on from there
        async for event in events:
            ...

A run that stopped to await approval (``StopKind.AWAITING_APPROVAL``: see
``Permissions(approver=DEFER)``) is on file too, and another process decides::

    session = load_session(path)
    recorder = SessionRecorder(path)
    agent = Agent(provider, tools=tools, permissions=permissions, journal=recorder.record)
    session.restore(agent)                     # or recover(), after a crash
    async with agent.resume([call.approve() for call in agent.pending]) as events:
        ...

The rules that keep approval safe across processes (the recorder keeps
``ToolApprovalRequested`` and ``ToolApprovalDecided``):

- A call of the last reply that was asked for (its ``ToolApprovalRequested`` is
  on file, or it was pending at the last stop) and has neither a recorded
  decision nor a recorded result is *pending* (``Session.pending``): it gets no
  result and no placeholder, and :meth:`Session.recover` never runs it; only a
  decision given to ``agent.resume(decisions)`` does.
- While calls are pending, the history ends with the results that had joined
  it (those of the calls before the first pending one); the results of the
  reply's other calls that ended (their ``ToolExecutionEnd`` is on file) are
  held back in ``Session.suspended.results``, never lost, and join the history
  in the reply's order once every pending call is decided.
- A call with a recorded decision and no result is one :meth:`Session.recover`
  answers: a denial gives its ``"Permission denied: <reason>"`` result and the
  call never runs; an approved call that had not started runs with the
  arguments it was approved with; one that had started runs again only if it is
  safe to (else ``NOT_RUN_AGAIN``), as any interrupted call.
- A call that had not started and was never asked for is checked against the
  recovering agent's permissions first: denied, it gets the denial; asked, it
  becomes pending (its request is journaled).
"""

from __future__ import annotations

from .._util import claim_public_home as _claim_public_home
from ._list import SessionInfo as SessionInfo
from ._list import find_session as find_session
from ._list import list_sessions as list_sessions
from ._load import InterruptedCall as InterruptedCall
from ._load import Session as Session
from ._load import load_session as load_session
from ._record import INTERRUPTED as INTERRUPTED
from ._record import NOT_RUN_AGAIN as NOT_RUN_AGAIN
from ._record import SESSION_FORMAT as SESSION_FORMAT
from ._record import SessionLockedError as SessionLockedError
from ._record import SessionRecorder as SessionRecorder
from ._record import new_session_path as new_session_path
from ._record import session_directory as session_directory

__all__ = [
    "INTERRUPTED",
    "NOT_RUN_AGAIN",
    "SESSION_FORMAT",
    "InterruptedCall",
    "Session",
    "SessionInfo",
    "SessionLockedError",
    "SessionRecorder",
    "find_session",
    "list_sessions",
    "load_session",
    "new_session_path",
    "session_directory",
]

_claim_public_home(globals(), __all__, __name__, from_=("agentloop.session._",))
