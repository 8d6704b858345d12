"""The agent loop: the sans-I/O core (the rules), the contract between the core and its
drivers (:mod:`._protocol`), the trio driver, the configuration.

Exports what other modules of agentloop import, and nothing else.
"""

from .._tool import ToolRegistry as ToolRegistry
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
from ._config import Hooks as Hooks
from ._config import LoopSettings as LoopSettings
from ._config import MessageSource as MessageSource
from ._config import OnErrorHook as OnErrorHook
from ._config import configure as configure
from ._core import LoopCore as LoopCore
from ._core import check_setup as check_setup
from ._core import user_messages as user_messages
from ._driver import TrioDriver as TrioDriver
from ._driver import agent_loop as agent_loop
from ._driver import agent_loop_continue as agent_loop_continue
from ._driver import check_not_waiting as check_not_waiting
from ._driver import resume_of as resume_of
from ._driver import run_tool_call as run_tool_call
from ._output import Output as Output
from ._output import OutputError as OutputError
from ._output import as_output as as_output
from ._protocol import CHECKPOINT as CHECKPOINT
from ._protocol import AskModel as AskModel
from ._protocol import CallHook as CallHook
from ._protocol import CallState as CallState
from ._protocol import ModelFailed as ModelFailed
from ._protocol import Phase as Phase
from ._protocol import RunCalls as RunCalls
from ._protocol import RunCounts as RunCounts
from ._protocol import model_request as model_request

__all__ = [
    "CHECKPOINT",
    "AfterCompactionHook",
    "AfterLoopHook",
    "AfterToolHook",
    "AfterTurnHook",
    "AfterUpdateHook",
    "AgentLoopConfig",
    "AskModel",
    "BeforeCompactionHook",
    "BeforeLoopHook",
    "BeforeToolHook",
    "BeforeTurnHook",
    "BeforeUpdateHook",
    "CallHook",
    "CallState",
    "ExecutionLimits",
    "Hooks",
    "LoopCore",
    "LoopSettings",
    "MessageSource",
    "ModelFailed",
    "OnErrorHook",
    "Output",
    "OutputError",
    "Phase",
    "RunCalls",
    "RunCounts",
    "ToolRegistry",
    "TrioDriver",
    "agent_loop",
    "agent_loop_continue",
    "check_not_waiting",
    "resume_of",
    "as_output",
    "check_setup",
    "configure",
    "model_request",
    "run_tool_call",
    "user_messages",
]
