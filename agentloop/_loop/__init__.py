"""The agent loop: configuration, turn engine, response streaming and tool dispatch."""

from ._config import AgentLoopConfig as AgentLoopConfig
from ._config import ExecutionLimits as ExecutionLimits
from ._config import MessageSource as MessageSource
from ._run import agent_loop as agent_loop
from ._run import agent_loop_continue as agent_loop_continue

__all__ = [
    "AgentLoopConfig",
    "ExecutionLimits",
    "MessageSource",
    "agent_loop",
    "agent_loop_continue",
]
