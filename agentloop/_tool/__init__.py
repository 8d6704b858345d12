"""The tool system: what a tool is, and how its calls are checked, scheduled and allowed.

=================  ===========================================================
module             holds
=================  ===========================================================
``_protocol``      the ``AgentTool`` protocol, ``ToolContext``, ``ToolResult``,
                   the errors, the strategies, ``tool_traits``
``_function``      ``@tool``: a tool from an async function's signature
``_schema``        Python types to JSON Schema, for ``@tool`` and ``output_type``
``_registry``      a run's tools by name, their definitions, argument checks
``_schedule``      ``Schedule``, ``Claim`` and the scheduler of an agent tree
``_permissions``   ``Permissions``: allow, ask and deny rules, approvers
``_names``         tool names models accept, numbered when they repeat
=================  ===========================================================

This face is what the rest of agentloop imports. ``@tool``, the schema compiler
and the permission rules load on first use (a module ``__getattr__``), so that
``import agentloop`` stays light; so does the registry, which needs the provider
contract (``agentloop._provider``), itself importing the events that import this.
"""

from typing import TYPE_CHECKING, Any

from ._names import UniqueNames as UniqueNames
from ._names import check_tool_name as check_tool_name
from ._names import model_tool_name as model_tool_name
from ._protocol import AgentTool as AgentTool
from ._protocol import Batched as Batched
from ._protocol import ExecutionStrategy as ExecutionStrategy
from ._protocol import InvalidArgs as InvalidArgs
from ._protocol import Parallel as Parallel
from ._protocol import ProgressCallback as ProgressCallback
from ._protocol import Sequential as Sequential
from ._protocol import ToolCancelled as ToolCancelled
from ._protocol import ToolContext as ToolContext
from ._protocol import ToolError as ToolError
from ._protocol import ToolNotFound as ToolNotFound
from ._protocol import ToolResult as ToolResult
from ._protocol import ToolTimeout as ToolTimeout
from ._protocol import ToolTraits as ToolTraits
from ._protocol import UpdateCallback as UpdateCallback
from ._protocol import describe_exception as describe_exception
from ._protocol import format_duration as format_duration
from ._protocol import tool_traits as tool_traits
from ._schedule import NO_CLAIM as NO_CLAIM
from ._schedule import Claim as Claim
from ._schedule import Schedule as Schedule
from ._schedule import Scheduler as Scheduler
from ._schedule import Ticket as Ticket
from ._schedule import claim_of as claim_of
from ._schedule import current_scheduler as current_scheduler
from ._schedule import use_scheduler as use_scheduler

if TYPE_CHECKING:
    from ._function import FunctionTool as FunctionTool
    from ._function import tool as tool
    from ._permissions import Answer as Answer
    from ._permissions import Approver as Approver
    from ._permissions import PermissionRequest as PermissionRequest
    from ._permissions import PermissionRule as PermissionRule
    from ._permissions import Permissions as Permissions
    from ._registry import Checker as Checker
    from ._registry import ToolEntry as ToolEntry
    from ._registry import ToolRegistry as ToolRegistry
    from ._registry import check_arguments as check_arguments
    from ._registry import validator_for as validator_for
    from ._schema import Unsupported as Unsupported
    from ._schema import compile_type as compile_type
    from ._schema import type_name as type_name

_LAZY = {
    "FunctionTool": "_function",
    "tool": "_function",
    "Answer": "_permissions",
    "Approver": "_permissions",
    "PermissionRequest": "_permissions",
    "PermissionRule": "_permissions",
    "Permissions": "_permissions",
    "Checker": "_registry",
    "ToolEntry": "_registry",
    "ToolRegistry": "_registry",
    "check_arguments": "_registry",
    "validator_for": "_registry",
    "Unsupported": "_schema",
    "compile_type": "_schema",
    "type_name": "_schema",
}

__all__ = [
    "NO_CLAIM",
    "AgentTool",
    "Answer",
    "Approver",
    "Batched",
    "Checker",
    "Claim",
    "ExecutionStrategy",
    "FunctionTool",
    "InvalidArgs",
    "Parallel",
    "PermissionRequest",
    "PermissionRule",
    "Permissions",
    "ProgressCallback",
    "Schedule",
    "Scheduler",
    "Sequential",
    "Ticket",
    "ToolCancelled",
    "ToolContext",
    "ToolEntry",
    "ToolError",
    "ToolNotFound",
    "ToolRegistry",
    "ToolResult",
    "ToolTimeout",
    "ToolTraits",
    "UniqueNames",
    "Unsupported",
    "UpdateCallback",
    "check_arguments",
    "check_tool_name",
    "claim_of",
    "compile_type",
    "current_scheduler",
    "describe_exception",
    "format_duration",
    "model_tool_name",
    "tool",
    "tool_traits",
    "type_name",
    "use_scheduler",
    "validator_for",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
