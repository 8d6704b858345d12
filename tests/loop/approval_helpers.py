"""Shared pieces of the approval tests: tools that count their runs, a compact event
trace, and the history of a run stopped for approval then resumed, beside the same
run with a blocking approver answering the same decisions."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import trio

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.providers._scripted import ScriptedTurn
from agentloop.testing import EventRecorder

PATH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}


@attrs.define(eq=False)
class FileTool:
    """A tool named ``name`` with a path subject; appends (call id, arguments) to
    ``ran`` each time its body runs, and answers ``"<name> <path>"``."""

    name: str
    ran: list[tuple[str, dict[str, Any]]]
    seconds: float = 0.0
    delays: dict[str, float] = attrs.field(factory=dict)  # seconds to sleep, by path
    label: str = ""
    description: str = "A file tool."
    parameters_schema: dict[str, Any] = attrs.field(factory=lambda: PATH_SCHEMA)

    def permission_subject(self, params: dict[str, Any]) -> tuple[str, str]:
        return ("path", params["path"])

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        self.ran.append((ctx.tool_call_id, params))
        delay = self.delays.get(params["path"], self.seconds)
        if delay:
            await trio.sleep(delay)
        await trio.lowlevel.checkpoint()
        text = f" {params['text']}" if "text" in params else ""
        return al.ToolResult.text(f"{self.name} {params['path']}{text}")


def three_calls() -> list[ScriptedTurn]:
    """read c1, write c2, read c3; then "Done."."""
    return [
        reply(
            call("read", {"path": "a"}, id="c1"),
            call("write", {"path": "b"}, id="c2"),
            call("read", {"path": "c"}, id="c3"),
        ),
        reply("Done."),
    ]


def make_agent(
    turns: Sequence[ScriptedTurn],
    approver: Any,
    ran: list[tuple[str, dict[str, Any]]],
    *,
    ask: Iterable[str] = ("write",),
    deny: Iterable[str] = (),
    approval_timeout: float | None = None,
    delays: dict[str, float] | None = None,
    **settings: Any,
) -> al.Agent:
    """An agent with the tools read, write and edit (all FileTools on ``ran``, sleeping
    ``delays[path]`` seconds)."""
    tools = [FileTool(name, ran, delays=dict(delays or {})) for name in ("read", "write", "edit")]
    permissions = al.Permissions(
        ask=list(ask), deny=list(deny), approver=approver, approval_timeout=approval_timeout
    )
    return al.Agent(ScriptedProvider(list(turns)), tools=tools, permissions=permissions, **settings)


def trace(events: Iterable[al.AgentEvent]) -> list[str]:
    """The events as short lines (MessageUpdate left out)."""
    out: list[str] = []
    for event in events:
        match event:
            case al.MessageUpdate():
                continue
            case al.MessageStart(message=al.AssistantMessage()):
                out.append("MessageStart assistant")
            case al.MessageEnd(message=al.AssistantMessage() as message):
                ids = ",".join(c.id for c in message.tool_calls)
                out.append(f"MessageEnd assistant {message.text}[{ids}]")
            case al.MessageStart(message=al.ToolResultMessage()):
                continue
            case al.MessageEnd(message=al.ToolResultMessage() as message):
                out.append(f"result {message.tool_call_id}={message.text}")
            case al.MessageStart(message=al.UserMessage()):
                continue
            case al.MessageEnd(message=al.UserMessage() as message):
                out.append(f"user {message.text}")
            case al.TurnStart(turn_index=index):
                out.append(f"TurnStart {index}")
            case al.TurnEnd(turn_index=index, tool_results=results):
                out.append(f"TurnEnd {index} [{','.join(r.tool_call_id for r in results)}]")
            case al.ToolApprovalRequested(tool_call_id=call_id, deferred=deferred):
                out.append(f"Requested {call_id}" + (" deferred" if deferred else ""))
            case al.ToolApprovalDecided(
                tool_call_id=call_id, approved=approved, arguments=args, reason=reason, by=by
            ):
                said = f"approved {args}" if approved else f"denied {reason!r}"
                out.append(f"Decided {call_id} {said} by {by}")
            case al.ToolExecutionStart(tool_call_id=call_id, args=args):
                out.append(f"Start {call_id} {args}")
            case al.ToolExecutionEnd(tool_call_id=call_id, outcome=outcome):
                out.append(f"End {call_id} {outcome.value}")
            case al.AgentEnd(stop_reason=stop):
                out.append(f"AgentEnd {stop.kind.value} {stop.message}".rstrip())
            case _:
                out.append(type(event).__name__)
    return out


def shape(messages: Iterable[al.Message]) -> list[tuple[str, ...]]:
    """A history without its timestamps: kind, text, and the calls or the answered id."""
    out: list[tuple[str, ...]] = []
    for message in messages:
        if isinstance(message, al.UserMessage):
            out.append(("user", message.text))
        elif isinstance(message, al.AssistantMessage):
            calls = ";".join(f"{c.id}:{c.name}:{c.arguments}" for c in message.tool_calls)
            out.append(("assistant", message.stop_reason.value, message.text, calls))
        else:
            out.append(
                (
                    "result",
                    message.tool_call_id,
                    message.tool_name,
                    message.outcome.value,
                    message.text,
                )
            )
    return out


async def record(context: Any) -> EventRecorder:
    """Consume the run an ``agent.prompt()`` / ``agent.resume()`` starts."""
    recorder = EventRecorder()
    async with context as events:
        await recorder.consume(events)
    return recorder


@attrs.define
class Compared:
    """A run stopped for approval and resumed, beside the uninterrupted run."""

    stopped: EventRecorder
    resumed: EventRecorder
    blocking: EventRecorder
    deferred_agent: al.Agent
    blocking_agent: al.Agent
    deferred_ran: list[tuple[str, dict[str, Any]]]
    blocking_ran: list[tuple[str, dict[str, Any]]]


async def compare(
    turns: Callable[[], Sequence[ScriptedTurn]],
    decide: Callable[[al.PermissionRequest], Any],
    *,
    prompt: str = "go",
    on_stop: Callable[[al.Agent], None] | None = None,
    **options: Any,
) -> Compared:
    """Run ``turns`` twice: once where every ask defers, then resume with
    ``decide(request)`` for each pending call (a request rebuilt from the
    PendingCall); once where a blocking approver answers ``decide(request)``."""
    deferred_ran: list[tuple[str, dict[str, Any]]] = []
    deferred = make_agent(turns(), al.DEFER, deferred_ran, **options)
    stopped = await record(deferred.prompt(prompt))
    if on_stop is not None:
        on_stop(deferred)
    requests = [_request_of(pending) for pending in deferred.pending]
    resumed = await record(deferred.resume([_decision(decide(r), r) for r in requests]))
    blocking_ran: list[tuple[str, dict[str, Any]]] = []
    blocking = make_agent(turns(), decide, blocking_ran, **options)
    uninterrupted = await record(blocking.prompt(prompt))
    return Compared(stopped, resumed, uninterrupted, deferred, blocking, deferred_ran, blocking_ran)


def _request_of(pending: al.PendingCall) -> al.PermissionRequest:
    return al.PermissionRequest(
        tool_name=pending.tool_name,
        tool_call_id=pending.tool_call_id,
        arguments=pending.arguments,
        subject=pending.subject,
        rule=None,
        reason=pending.reason,
    )


def _decision(answer: Any, request: al.PermissionRequest) -> al.Decision:
    if answer is True:
        return request.approve()
    if answer is False:
        return request.deny()
    assert isinstance(answer, al.Approve | al.Deny)
    return answer
