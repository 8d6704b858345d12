"""The agent loop: the sans-I/O core (the rules), the trio driver, configuration."""

from .._util import call_hook as call_hook
from ._config import AfterCompactionHook as AfterCompactionHook
from ._config import AfterLoopHook as AfterLoopHook
from ._config import AfterToolHook as AfterToolHook
from ._config import AfterTurnHook as AfterTurnHook
from ._config import AfterUpdateHook as AfterUpdateHook
from ._config import AgentLoopConfig as AgentLoopConfig
from ._config import BeforeCompactionHook as BeforeCompactionHook
from ._config import BeforeLoopHook as BeforeLoopHook
from ._config import BeforeToolHook as BeforeToolHook
from ._config import BeforeTurnHook as BeforeTurnHook
from ._config import BeforeUpdateHook as BeforeUpdateHook
from ._config import ExecutionLimits as ExecutionLimits
from ._config import LoopSettings as LoopSettings
from ._config import MessageSource as MessageSource
from ._config import OnErrorHook as OnErrorHook
from ._config import configure as configure
from ._core import ABORTED_TEXT as ABORTED_TEXT
from ._core import CHECKPOINT as CHECKPOINT
from ._core import DEADLINE_TEXT as DEADLINE_TEXT
from ._core import ENDED_TEXT as ENDED_TEXT
from ._core import NOT_RUN_TEXT as NOT_RUN_TEXT
from ._core import OUTPUT_GIVEN_TEXT as OUTPUT_GIVEN_TEXT
from ._core import SKIPPED_TEXT as SKIPPED_TEXT
from ._core import TURN_DEADLINE_TEXT as TURN_DEADLINE_TEXT
from ._core import VETOED_TEXT as VETOED_TEXT
from ._core import AskModel as AskModel
from ._core import CallHook as CallHook
from ._core import CallState as CallState
from ._core import Compact as Compact
from ._core import LoopCore as LoopCore
from ._core import ModelFailed as ModelFailed
from ._core import RunCalls as RunCalls
from ._core import RunCounts as RunCounts
from ._core import check_output_name as check_output_name
from ._core import prun_queue_of as prun_queue_of
from ._core import user_messages as user_messages
from ._driver import TrioDriver as TrioDriver
from ._driver import agent_loop as agent_loop
from ._driver import agent_loop_continue as agent_loop_continue
from ._driver import run_tool_call as run_tool_call
from ._output import Output as Output
from ._output import OutputError as OutputError
from ._output import as_output as as_output
from ._registry import ToolEntry as ToolEntry
from ._registry import ToolRegistry as ToolRegistry

__all__ = [
    "ABORTED_TEXT",
    "CHECKPOINT",
    "DEADLINE_TEXT",
    "ENDED_TEXT",
    "NOT_RUN_TEXT",
    "OUTPUT_GIVEN_TEXT",
    "SKIPPED_TEXT",
    "TURN_DEADLINE_TEXT",
    "VETOED_TEXT",
    "AskModel",
    "CallHook",
    "CallState",
    "Compact",
    "ModelFailed",
    "Output",
    "OutputError",
    "as_output",
    "check_output_name",
    "RunCalls",
    "RunCounts",
    "ToolEntry",
    "AfterCompactionHook",
    "AfterLoopHook",
    "AfterToolHook",
    "AfterTurnHook",
    "AfterUpdateHook",
    "AgentLoopConfig",
    "BeforeCompactionHook",
    "BeforeLoopHook",
    "BeforeToolHook",
    "BeforeTurnHook",
    "BeforeUpdateHook",
    "ExecutionLimits",
    "LoopCore",
    "LoopSettings",
    "MessageSource",
    "OnErrorHook",
    "ToolRegistry",
    "TrioDriver",
    "agent_loop",
    "agent_loop_continue",
    "call_hook",
    "configure",
    "prun_queue_of",
    "run_tool_call",
    "user_messages",
]
