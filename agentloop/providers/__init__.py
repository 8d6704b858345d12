"""Model providers: the protocol every model speaks, and the offline scripted model.

A provider turns a :class:`ModelRequest` into a streamed
:class:`~agentloop.AssistantMessage`. :class:`ScriptedProvider` replays a
script; it is what tests and the offline demo use.
"""

from ._base import Emit as Emit
from ._base import ModelRequest as ModelRequest
from ._base import Provider as Provider
from ._base import ProviderError as ProviderError
from ._base import ToolDefinition as ToolDefinition
from ._base import parse_tool_arguments as parse_tool_arguments
from ._scripted import ScriptedCall as ScriptedCall
from ._scripted import ScriptedProvider as ScriptedProvider
from ._scripted import ScriptedTurn as ScriptedTurn
from ._scripted import ScriptExhausted as ScriptExhausted
from ._scripted import ScriptStep as ScriptStep
from ._scripted import call as call
from ._scripted import fail as fail
from ._scripted import reply as reply

__all__ = [
    "Emit",
    "ModelRequest",
    "Provider",
    "ProviderError",
    "ScriptExhausted",
    "ScriptStep",
    "ScriptedCall",
    "ScriptedProvider",
    "ScriptedTurn",
    "ToolDefinition",
    "call",
    "fail",
    "parse_tool_arguments",
    "reply",
]
