"""What a one-prompt run prints for scripts: ``--output-format text``, ``json`` or ``stream-json``.

``stream-json`` writes every event as one line of JSON, as it happens, in
:mod:`agentloop.serialization`'s format (the line's ``"type"`` is the event's
class name), and last a ``"type": "result"`` line: the object ``json`` writes
when the run is over (its session id, its exit status, the calls that await
approval...). Either way
nothing else goes to standard output: the notes, warnings and errors go to
standard error. Both are ASCII: no character of a model's reaches a terminal
as itself.

``text`` (:class:`AnswerOutput`) writes the final answer of a run that
completed (the text of its last reply, what ``json`` gives as ``result``) and
nothing else: ``agentloop -p "..." > answer.md`` leaves just the answer in the
file, while the run is shown on standard error as it goes. A run that did not
complete writes nothing there (its exit status says why, and so does standard
error). When standard output and standard error are the same terminal, the run
is shown there once instead, the answer with it.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from .. import _events as ev
from .._types import AssistantMessage
from .._visible import visible
from ._settings import OutputFormat

__all__ = ["EXIT_STATUS", "AnswerOutput", "JsonOutput", "exit_status"]

#: The exit status of a run that ended so (``AgentEnd.stop_reason.kind``).
EXIT_STATUS: dict[ev.StopKind, int] = {
    ev.StopKind.COMPLETED: 0,
    ev.StopKind.ERROR: 1,
    ev.StopKind.OUTPUT_FAILED: 1,
    ev.StopKind.VETOED: 1,
    ev.StopKind.MAX_TURNS: 3,
    ev.StopKind.MAX_TOKENS: 3,
    ev.StopKind.MAX_DURATION: 3,
    ev.StopKind.MAX_COST: 3,
    ev.StopKind.MAX_REQUESTS: 3,
    ev.StopKind.DEADLINE: 3,
    ev.StopKind.AWAITING_APPROVAL: 4,
    ev.StopKind.ABORTED: 130,
}


def exit_status(stop: ev.AgentStop) -> int:
    """The exit status of a run that ended with ``stop`` (see :data:`EXIT_STATUS`)."""
    return EXIT_STATUS.get(stop.kind, 1)


def _last_reply(end: ev.AgentEnd | None) -> str:
    """The text of the run's last assistant message ("" if none)."""
    if end is None:
        return ""
    replies = [m for m in end.messages if isinstance(m, AssistantMessage)]
    return replies[-1].text if replies else ""


class AnswerOutput:
    """The run's final answer on standard output (``--output-format text``; see the module).

    Args:
        file: Standard output.
        terminal: Whether it is a terminal: the answer's control characters
            are then shown escaped (:func:`~agentloop._visible.visible`);
            into a file or a pipe it goes as the model wrote it.
    """

    def __init__(self, file: TextIO, *, terminal: bool = False) -> None:
        self.file = file
        self.terminal = terminal
        self.end: ev.AgentEnd | None = None
        self._loop_id: str | None = None  # the run's own loop (not a sub-agent's)

    def event(self, event: ev.AgentEvent) -> None:
        """One event of the run: the run's own ``AgentEnd`` is kept."""
        if isinstance(event, ev.AgentStart) and self._loop_id is None:
            self._loop_id = event.loop_id
        elif isinstance(event, ev.AgentEnd) and event.loop_id == self._loop_id:
            self.end = event

    def finish(self) -> None:
        """The run is over: write its answer, ended by a newline.

        Nothing when the run did not complete (it stopped at a limit, failed or
        was stopped: the exit status and standard error say so), or its last
        reply has no text.
        """
        if self.end is None or not self.end.stop_reason.completed:
            return
        text = _last_reply(self.end)
        if not text:
            return
        if self.terminal:
            text = visible(text)
        try:
            self.file.write(text if text.endswith("\n") else text + "\n")
            self.file.flush()
        except (BrokenPipeError, ValueError):  # the reader went away (| head -1)
            pass


class JsonOutput:
    """The run on standard output as JSON; see the module docstring.

    Args:
        format: ``"json"`` or ``"stream-json"``.
        file: Standard output.
    """

    def __init__(self, format: OutputFormat, file: TextIO) -> None:
        if format not in ("json", "stream-json"):
            raise ValueError(f"not a JSON output format: {format!r}")
        self.format = format
        self.file = file
        self.end: ev.AgentEnd | None = None
        self.turns = 0
        self._loop_id: str | None = None  # the run's own loop (not a sub-agent's)
        self._broken = False

    def _write(self, line: str) -> None:
        if self._broken:
            return
        try:
            self.file.write(line + "\n")
            self.file.flush()
        except (BrokenPipeError, ValueError):  # the reader went away (| head -1)
            self._broken = True

    def event(self, event: ev.AgentEvent) -> None:
        """One event of the run: written now (``stream-json``), or counted."""
        from ..serialization import to_json

        if isinstance(event, ev.AgentStart) and self._loop_id is None:
            self._loop_id = event.loop_id
        elif isinstance(event, ev.TurnStart) and event.loop_id == self._loop_id:
            self.turns += 1
        elif isinstance(event, ev.AgentEnd) and event.loop_id == self._loop_id:
            self.end = event
        if self.format == "stream-json":
            self._write(to_json(event))

    def result(
        self, *, status: int, session_id: str | None, model: str, failure: str | None = None
    ) -> dict[str, Any]:
        """The ``json`` object of the finished run (``failure``: why it has no ``AgentEnd``).

        ``pending`` lists the calls that await approval (a run that stopped
        with ``--defer-approvals``), each as :mod:`agentloop.serialization`
        writes a ``PendingCall``; ``[]`` when none does.
        """
        from ..serialization import to_dict

        end = self.end
        text = _last_reply(end)
        if end is not None:
            stop = end.stop_reason
        else:
            stop = ev.AgentStop(ev.StopKind.ERROR, failure or "the run ended early", error=failure)
        return {
            "result": text,
            "stop_reason": to_dict(stop),
            "usage": to_dict(end.usage) if end is not None else None,
            "usage_by_model": (
                {name: to_dict(usage) for name, usage in end.usage_by_model.items()}
                if end is not None
                else {}
            ),
            "num_turns": self.turns,
            "pending": ([to_dict(call) for call in end.pending] if end is not None else []),
            "session_id": session_id,
            "model": model,
            "exit_status": status,
        }

    def finish(
        self, *, status: int, session_id: str | None, model: str, failure: str | None = None
    ) -> None:
        """The run is over: write its object (see :meth:`result`); with ``stream-json``,
        as a last line whose ``"type"`` is ``"result"``."""
        data = self.result(status=status, session_id=session_id, model=model, failure=failure)
        if self.format == "stream-json":
            data = {"type": "result", **data}
        self._write(json.dumps(data, sort_keys=True, separators=(",", ":")))
