"""agentloop: a trio-native agent loop.

An agent is a loop: send the context to a model, stream back text and tool
calls, run the tools, feed the results back, repeat. agentloop runs that loop
under trio's structured concurrency: tool calls run in nurseries, timeouts and
aborts are cancel scopes, and every event reaches you, in order, on a memory
channel.

    >>> import agentloop as al
    >>> from agentloop.providers import ScriptedProvider, reply
    >>> agent = al.Agent(ScriptedProvider([reply("Hello!")]))

Names are imported from here; providers live in :mod:`agentloop.providers`.
"""

import logging as _logging
import typing as _typing

from . import _log
from ._agent import Agent as Agent
from ._agent import QueueMode as QueueMode
from ._approval import DEFER as DEFER
from ._approval import ApprovalError as ApprovalError
from ._approval import Approve as Approve
from ._approval import Decision as Decision
from ._approval import Deferred as Deferred
from ._approval import Deny as Deny
from ._approval import PendingCall as PendingCall
from ._approval import Suspended as Suspended
from ._channel import EventReceiver as EventReceiver
from ._context import AgentContext as AgentContext
from ._context import CompactionConfig as CompactionConfig
from ._context import EntryState as EntryState
from ._context import InrunEntry as InrunEntry
from ._context import LLMSummarizer as LLMSummarizer
from ._context import MessageView as MessageView
from ._context import PrunQueue as PrunQueue
from ._context import PrunRequest as PrunRequest
from ._context import Summarizer as Summarizer
from ._context import TokenEstimator as TokenEstimator
from ._context import estimate_text_tokens as estimate_text_tokens
from ._context import estimate_tokens as estimate_tokens
from ._context import summarize_exchanges as summarize_exchanges
from ._errors import AgentloopError as AgentloopError
from ._events import AgentEnd as AgentEnd
from ._events import AgentEvent as AgentEvent
from ._events import AgentStart as AgentStart
from ._events import AgentStop as AgentStop
from ._events import CompactionEnded as CompactionEnded
from ._events import CompactionRecord as CompactionRecord
from ._events import CompactionStarted as CompactionStarted
from ._events import MessageEnd as MessageEnd
from ._events import MessageStart as MessageStart
from ._events import MessageUpdate as MessageUpdate
from ._events import OutputUpdate as OutputUpdate
from ._events import ProgressMessage as ProgressMessage
from ._events import PrunApplied as PrunApplied
from ._events import PrunRecord as PrunRecord
from ._events import StopKind as StopKind
from ._events import StreamDelta as StreamDelta
from ._events import StreamRestart as StreamRestart
from ._events import TextDelta as TextDelta
from ._events import ThinkingDelta as ThinkingDelta
from ._events import ToolApprovalDecided as ToolApprovalDecided
from ._events import ToolApprovalRequested as ToolApprovalRequested
from ._events import ToolCallDelta as ToolCallDelta
from ._events import ToolCallDequeued as ToolCallDequeued
from ._events import ToolCallQueued as ToolCallQueued
from ._events import ToolExecutionEnd as ToolExecutionEnd
from ._events import ToolExecutionStart as ToolExecutionStart
from ._events import ToolExecutionUpdate as ToolExecutionUpdate
from ._events import TurnEnd as TurnEnd
from ._events import TurnStart as TurnStart
from ._instructions import ProjectInstructions as ProjectInstructions
from ._instructions import project_instructions as project_instructions
from ._loop import AfterCompactionHook as AfterCompactionHook
from ._loop import AfterLoopHook as AfterLoopHook
from ._loop import AfterToolHook as AfterToolHook
from ._loop import AfterTurnHook as AfterTurnHook
from ._loop import AfterUpdateHook as AfterUpdateHook
from ._loop import AgentLoopConfig as AgentLoopConfig
from ._loop import BeforeCompactionHook as BeforeCompactionHook
from ._loop import BeforeLoopHook as BeforeLoopHook
from ._loop import BeforeToolHook as BeforeToolHook
from ._loop import BeforeTurnHook as BeforeTurnHook
from ._loop import BeforeUpdateHook as BeforeUpdateHook
from ._loop import ExecutionLimits as ExecutionLimits
from ._loop import Hooks as Hooks
from ._loop import MessageSource as MessageSource
from ._loop import OnErrorHook as OnErrorHook
from ._loop import Output as Output
from ._loop import OutputError as OutputError
from ._loop import agent_loop as agent_loop
from ._loop import agent_loop_continue as agent_loop_continue
from ._tool import AgentTool as AgentTool
from ._tool import Batched as Batched
from ._tool import Claim as Claim
from ._tool import ExecutionStrategy as ExecutionStrategy
from ._tool import InvalidArgs as InvalidArgs
from ._tool import Parallel as Parallel
from ._tool import ProgressCallback as ProgressCallback
from ._tool import Schedule as Schedule
from ._tool import Sequential as Sequential
from ._tool import ToolCancelled as ToolCancelled
from ._tool import ToolContext as ToolContext
from ._tool import ToolError as ToolError
from ._tool import ToolNotFound as ToolNotFound
from ._tool import ToolResult as ToolResult
from ._tool import ToolTimeout as ToolTimeout
from ._tool import UpdateCallback as UpdateCallback
from ._types import AssistantMessage as AssistantMessage
from ._types import Content as Content
from ._types import ImageContent as ImageContent
from ._types import Message as Message
from ._types import StopReason as StopReason
from ._types import TextContent as TextContent
from ._types import ThinkingContent as ThinkingContent
from ._types import ToolCall as ToolCall
from ._types import ToolOutcome as ToolOutcome
from ._types import ToolResultMessage as ToolResultMessage
from ._types import Usage as Usage
from ._types import UserMessage as UserMessage
from ._util import TrioRequiredError as TrioRequiredError
from ._util import claim_public_home as _claim_public_home
from .providers import ThinkingLevel as ThinkingLevel

if _typing.TYPE_CHECKING:
    from ._tool import Approver as Approver
    from ._tool import FunctionTool as FunctionTool
    from ._tool import PermissionRequest as PermissionRequest
    from ._tool import PermissionRule as PermissionRule
    from ._tool import Permissions as Permissions
    from ._tool import tool as tool

__version__ = "0.1.0.dev0"

# Quiet unless the application configures logging (docs/concepts/logging.md): with a
# handler on "agentloop", Python's last-resort handler no longer prints its warnings
# on stderr; the records still reach the handlers the application sets up.
_logger = _logging.getLogger("agentloop")
if not any(isinstance(handler, _logging.NullHandler) for handler in _logger.handlers):
    _logger.addHandler(_logging.NullHandler())  # once, even if the module is reloaded
# Credentials never reach a log record of agentloop's, its HTTP client's or the MCP SDK's
# loggers, whatever the handlers (see agentloop/_log.py).
_log.install()

__all__ = [
    "AfterCompactionHook",
    "AfterLoopHook",
    "AfterToolHook",
    "AfterTurnHook",
    "AfterUpdateHook",
    "Agent",
    "AgentContext",
    "AgentEnd",
    "AgentEvent",
    "AgentLoopConfig",
    "AgentStart",
    "AgentStop",
    "AgentTool",
    "AgentloopError",
    "ApprovalError",
    "Approve",
    "Approver",
    "AssistantMessage",
    "Batched",
    "BeforeCompactionHook",
    "BeforeLoopHook",
    "BeforeToolHook",
    "BeforeTurnHook",
    "BeforeUpdateHook",
    "Claim",
    "CompactionConfig",
    "CompactionEnded",
    "CompactionRecord",
    "CompactionStarted",
    "Content",
    "DEFER",
    "Decision",
    "Deferred",
    "Deny",
    "EntryState",
    "EventReceiver",
    "ExecutionLimits",
    "ExecutionStrategy",
    "FunctionTool",
    "Hooks",
    "ImageContent",
    "InrunEntry",
    "InvalidArgs",
    "LLMSummarizer",
    "Message",
    "MessageEnd",
    "MessageSource",
    "MessageStart",
    "MessageUpdate",
    "MessageView",
    "OnErrorHook",
    "Output",
    "OutputError",
    "OutputUpdate",
    "Parallel",
    "PendingCall",
    "PermissionRequest",
    "PermissionRule",
    "Permissions",
    "ProgressCallback",
    "ProgressMessage",
    "ProjectInstructions",
    "PrunApplied",
    "PrunQueue",
    "PrunRecord",
    "PrunRequest",
    "QueueMode",
    "Schedule",
    "Sequential",
    "StopKind",
    "StopReason",
    "StreamDelta",
    "StreamRestart",
    "Summarizer",
    "Suspended",
    "TextContent",
    "TextDelta",
    "ThinkingContent",
    "ThinkingDelta",
    "ThinkingLevel",
    "TokenEstimator",
    "ToolApprovalDecided",
    "ToolApprovalRequested",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallDequeued",
    "ToolCallQueued",
    "ToolCancelled",
    "ToolContext",
    "ToolError",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolNotFound",
    "ToolOutcome",
    "ToolResult",
    "ToolResultMessage",
    "ToolTimeout",
    "TrioRequiredError",
    "TurnEnd",
    "TurnStart",
    "UpdateCallback",
    "Usage",
    "UserMessage",
    "__version__",
    "agent_loop",
    "agent_loop_continue",
    "estimate_text_tokens",
    "estimate_tokens",
    "project_instructions",
    "summarize_exchanges",
    "tool",
]

# Imported on first access (PEP 562): @tool with its JSON Schema compiler, and permissions.
_LAZY = ("Approver", "FunctionTool", "PermissionRequest", "PermissionRule", "Permissions", "tool")


def __getattr__(name: str) -> _typing.Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import _tool

    value = getattr(_tool, name)
    _claim_public_home({name: value}, (name,), __name__, from_=("agentloop._",))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


_claim_public_home(globals(), __all__, __name__, from_=("agentloop._",))
