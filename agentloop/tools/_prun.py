"""The ``prun`` and ``prun_with_memo`` tools: the model trims its own recent context.

Unlike other tools, these do not do their work in ``execute``: pruning changes
the context, which belongs to the loop. ``execute`` puts a
:class:`~agentloop.PrunRequest` on the :class:`~agentloop.PrunQueue` the two
tools share; after the tools of the turn have run, the loop takes the
requests, in order, and removes whole exchanges from the end of the in-run
context (never the exchange holding the prun call, never a user message),
sending a :class:`~agentloop.PrunApplied` event for each. The log keeps
everything; only what the model is sent from the next turn on is shorter.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from .._context import PrunQueue, PrunRequest
from .._tool import InvalidArgs, ToolContext, ToolResult
from .._words import plural

__all__ = ["PrunTool", "prun_tools"]

_TOKENS = {
    "type": "integer",
    "minimum": 1,
    "description": "How many tokens of recent in-run context to remove, at least.",
}
_PRUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"tokens": _TOKENS},
    "required": ["tokens"],
    "additionalProperties": False,
}
_MEMO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tokens": _TOKENS,
        "memo": {
            "type": "string",
            "minLength": 1,
            "description": "What to remember of the removed context, in place of it.",
        },
    },
    "required": ["tokens", "memo"],
    "additionalProperties": False,
}
_PRUN_DESCRIPTION = (
    "Remove at least `tokens` tokens of your own recent work (your messages and tool "
    "results, newest first, whole exchanges at a time) from the context, before your next "
    "turn. Use it when exploration or tool output is wasting context. The user's messages "
    "and this exchange are kept. What is removed is gone for you."
)
_MEMO_DESCRIPTION = (
    "Like prun, but leave a memo in place of what is removed: use it when the removed work "
    "found something worth remembering in a few lines."
)


@attrs.frozen(eq=False)
class PrunTool:
    """``prun`` (``with_memo=False``) or ``prun_with_memo``: ask the loop to trim context.

    The result says ``"Prun request recorded: N tokens will be removed before
    next turn."``; the pruning itself happens after the turn's tools have run
    (see the module documentation). Build the pair with :func:`prun_tools`, or
    use ``Agent(..., prun=True)``: the two must share one queue.

    Args:
        prun_queue: Where requests go; shared with the other prun tool.
        with_memo: Be ``prun_with_memo``, whose ``memo`` stands in place of the
            pruned messages as ``"[Pruned context summary: <memo>]"``.
    """

    prun_queue: PrunQueue = attrs.field(factory=PrunQueue)
    with_memo: bool = attrs.field(default=False, kw_only=True)
    timeout: float | None = attrs.field(default=None, init=False)

    @property
    def name(self) -> str:
        """``"prun"`` or ``"prun_with_memo"``."""
        return "prun_with_memo" if self.with_memo else "prun"

    @property
    def label(self) -> str:
        """``"Prun"`` or ``"Prun with memo"``."""
        return "Prun with memo" if self.with_memo else "Prun"

    @property
    def description(self) -> str:
        """What the model is told the tool does."""
        return _MEMO_DESCRIPTION if self.with_memo else _PRUN_DESCRIPTION

    @property
    def parameters_schema(self) -> dict[str, Any]:
        """``{tokens}``, or ``{tokens, memo}`` for ``prun_with_memo``."""
        return _MEMO_SCHEMA if self.with_memo else _PRUN_SCHEMA

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Queue the request; return at once.

        Raises:
            InvalidArgs: ``tokens`` is not a positive integer, or the memo of
                ``prun_with_memo`` is missing or blank.
        """
        await trio.lowlevel.checkpoint()
        tokens = params.get("tokens")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise InvalidArgs(f"tokens must be a positive integer, got {tokens!r}")
        memo: str | None = None
        if self.with_memo:
            value = params.get("memo")
            if not isinstance(value, str) or not value.strip():
                raise InvalidArgs("prun_with_memo needs a memo: a non-empty string")
            memo = value
        self.prun_queue.put(PrunRequest(tokens, memo, ctx.tool_call_id))
        return ToolResult.text(
            f"Prun request recorded: {plural(tokens, 'token')} will be removed before next turn.",
            details={"tokens": tokens, "memo": memo},
        )


def prun_tools(queue: PrunQueue | None = None) -> list[PrunTool]:
    """``[prun, prun_with_memo]``, sharing ``queue`` (a new one by default)."""
    shared = PrunQueue() if queue is None else queue
    return [PrunTool(shared), PrunTool(shared, with_memo=True)]
