"""agentloop's events as AG-UI events: one translator per run.

:class:`AguiTranslator` turns the events of one run (``agentloop._events``) into
AG-UI 1.0 events, as JSON-ready dicts with the protocol's camelCase keys. It
keeps what the protocol needs across events: the text message or reasoning
span that is open, the tool calls whose ``TOOL_CALL_START`` was sent. Only the
run's own loop is translated: a sub-agent's events (another ``loop_id``) stay
inside its parent's tool call, whose result is the sub-agent's answer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from typing import Any

from .. import _events as ev
from .._types import AssistantMessage, ThinkingContent, ToolCall, Usage

__all__ = ["AguiTranslator", "usage_entries"]

Event = dict[str, Any]


def _new_id(prefix: str) -> str:
    return f"{prefix}-{os.urandom(6).hex()}"


def usage_entries(usage_by_model: dict[str, Usage]) -> list[dict[str, Any]]:
    """``RUN_FINISHED.usage``: one AG-UI ``TokenUsage`` per model that answered."""
    entries = []
    for model, usage in usage_by_model.items():
        total_input = usage.input + usage.cache_read + usage.cache_write
        entry: dict[str, Any] = {
            "model": model,
            "inputTokens": total_input,
            "outputTokens": usage.output,
            "totalTokens": total_input + usage.output,
            "cachedInputTokens": usage.cache_read,
            "cacheWriteInputTokens": usage.cache_write,
        }
        if usage.reasoning:
            entry["reasoningTokens"] = usage.reasoning
        entries.append(entry)
    return entries


class AguiTranslator:
    """Translate one run's agentloop events into AG-UI events (see the module).

    ``frontend`` names the tools the client runs itself: their results are the
    client's own tool messages, so no ``TOOL_CALL_RESULT`` is sent for them.
    """

    def __init__(self, loop_id: str | None = None, *, frontend: Collection[str] = ()) -> None:
        self.loop_id = loop_id
        self.frontend = frontend
        self._text_id: str | None = None
        self._reasoning_id: str | None = None
        self._reasoning_message_id: str | None = None
        self._message_id = _new_id("msg")
        self._started_calls: set[str] = set()
        self._open_calls: list[str] = []
        self._sent_text = False
        self._sent_reasoning = False

    def translate(self, event: ev.AgentEvent) -> list[Event]:
        """The AG-UI events for ``event`` (often none, sometimes several)."""
        if self.loop_id is None and isinstance(event, ev.AgentStart):
            self.loop_id = event.loop_id
        if event.loop_id != self.loop_id:
            return []
        out: list[Event] = []
        match event:
            case ev.MessageUpdate(delta=ev.TextDelta(delta=text)):
                if text:
                    self._close_reasoning(out)
                    if self._text_id is None:
                        self._text_id = self._message_id
                        self._sent_text = True
                        out.append(
                            {
                                "type": "TEXT_MESSAGE_START",
                                "messageId": self._text_id,
                                "role": "assistant",
                            }
                        )
                    out.append(
                        {"type": "TEXT_MESSAGE_CONTENT", "messageId": self._text_id, "delta": text}
                    )
            case ev.MessageUpdate(delta=ev.ThinkingDelta(delta=text)):
                if text:
                    self._close_text(out)
                    self._open_reasoning(out)
                    out.append(
                        {
                            "type": "REASONING_MESSAGE_CONTENT",
                            "messageId": self._reasoning_message_id,
                            "delta": text,
                        }
                    )
            case ev.MessageUpdate(delta=ev.ToolCallDelta() as delta):
                if delta.tool_call_id:
                    self._close_text(out)
                    self._close_reasoning(out)
                    self._start_call(out, delta.tool_call_id, delta.name)
                    if delta.delta:
                        out.append(
                            {
                                "type": "TOOL_CALL_ARGS",
                                "toolCallId": delta.tool_call_id,
                                "delta": delta.delta,
                            }
                        )
            case ev.MessageEnd(message=AssistantMessage() as message):
                self._end_message(out, message)
            case ev.TurnStart(turn_index=index):
                out.append({"type": "STEP_STARTED", "stepName": f"turn {index}"})
            case ev.TurnEnd(turn_index=index):
                out.append({"type": "STEP_FINISHED", "stepName": f"turn {index}"})
            case ev.ToolExecutionEnd(tool_call_id=call_id, tool_name=name, result=result):
                if name not in self.frontend:
                    out.append(
                        {
                            "type": "TOOL_CALL_RESULT",
                            "messageId": _new_id("result"),
                            "toolCallId": call_id,
                            "content": result.text_content,
                            "role": "tool",
                        }
                    )
            case ev.ToolExecutionUpdate(tool_call_id=call_id, partial_result=partial):
                out.append(
                    {
                        "type": "CUSTOM",
                        "name": "agentloop.tool_update",
                        "value": {"toolCallId": call_id, "text": partial.text_content},
                    }
                )
            case ev.ProgressMessage(tool_call_id=call_id, text=text):
                out.append(
                    {
                        "type": "CUSTOM",
                        "name": "agentloop.progress",
                        "value": {"toolCallId": call_id, "text": text},
                    }
                )
            case _:
                pass
        return out

    # ------------------------------------------------------------- pieces

    def _open_reasoning(self, out: list[Event]) -> None:
        if self._reasoning_id is None:
            self._reasoning_id = _new_id("reasoning")
            self._reasoning_message_id = _new_id("reasoning-msg")
            self._sent_reasoning = True
            out.append({"type": "REASONING_START", "messageId": self._reasoning_id})
            out.append(
                {
                    "type": "REASONING_MESSAGE_START",
                    "messageId": self._reasoning_message_id,
                    "role": "reasoning",
                }
            )

    def _close_reasoning(self, out: list[Event]) -> None:
        if self._reasoning_id is not None:
            out.append({"type": "REASONING_MESSAGE_END", "messageId": self._reasoning_message_id})
            out.append({"type": "REASONING_END", "messageId": self._reasoning_id})
            self._reasoning_id = self._reasoning_message_id = None

    def _close_text(self, out: list[Event]) -> None:
        if self._text_id is not None:
            out.append({"type": "TEXT_MESSAGE_END", "messageId": self._text_id})
            self._text_id = None

    def _start_call(self, out: list[Event], call_id: str, name: str) -> None:
        if call_id not in self._started_calls:
            self._started_calls.add(call_id)
            self._open_calls.append(call_id)
            out.append(
                {
                    "type": "TOOL_CALL_START",
                    "toolCallId": call_id,
                    "toolCallName": name,
                    "parentMessageId": self._message_id,
                }
            )

    def _end_message(self, out: list[Event], message: AssistantMessage) -> None:
        """Close what the message opened; send what it had without streaming it."""
        streamed_text, streamed_reasoning = self._sent_text, self._sent_reasoning
        self._close_text(out)
        self._close_reasoning(out)
        for block in message.content:
            if isinstance(block, ThinkingContent) and block.thinking and not streamed_reasoning:
                self._open_reasoning(out)
                out.append(
                    {
                        "type": "REASONING_MESSAGE_CONTENT",
                        "messageId": self._reasoning_message_id,
                        "delta": block.thinking,
                    }
                )
                self._close_reasoning(out)
            elif isinstance(block, ToolCall) and block.id not in self._started_calls:
                self._start_call(out, block.id, block.name)
                out.append(
                    {
                        "type": "TOOL_CALL_ARGS",
                        "toolCallId": block.id,
                        "delta": block.raw_arguments or json.dumps(block.arguments),
                    }
                )
        text = message.text
        if text and not streamed_text:
            out.append(
                {"type": "TEXT_MESSAGE_START", "messageId": self._message_id, "role": "assistant"}
            )
            out.append(
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": self._message_id, "delta": text}
            )
            out.append({"type": "TEXT_MESSAGE_END", "messageId": self._message_id})
        for call_id in self._open_calls:
            out.append({"type": "TOOL_CALL_END", "toolCallId": call_id})
        self._open_calls = []
        self._message_id = _new_id("msg")
        self._sent_text = self._sent_reasoning = False
