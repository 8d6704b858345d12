"""Model providers: the protocol every model speaks, real APIs, and the offline scripted model.

A provider turns a :class:`ModelRequest` into a streamed
:class:`~agentloop.AssistantMessage`. :class:`AnthropicProvider` speaks
Anthropic's Messages API, :class:`OpenAIProvider` OpenAI's Chat Completions
(and any compatible server), :class:`OpenAIResponsesProvider` OpenAI's
Responses API; :class:`ScriptedProvider` replays a script, for tests and the
offline demo.

The HTTP providers and :class:`RetryConfig` load on first use (the providers
import ``httpx2``), so ``import agentloop`` stays quick for code that only runs
scripted or custom providers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._util import claim_public_home
from ._base import Emit as Emit
from ._base import ModelRequest as ModelRequest
from ._base import OutputFormat as OutputFormat
from ._base import Provider as Provider
from ._base import ToolDefinition as ToolDefinition
from ._base import parse_tool_arguments as parse_tool_arguments
from ._errors import AuthenticationError as AuthenticationError
from ._errors import BadRequestError as BadRequestError
from ._errors import ContextOverflowError as ContextOverflowError
from ._errors import NetworkError as NetworkError
from ._errors import OverloadedError as OverloadedError
from ._errors import ProviderError as ProviderError
from ._errors import RateLimitError as RateLimitError
from ._errors import ServerError as ServerError
from ._fallback import FallbackError as FallbackError
from ._fallback import FallbackProvider as FallbackProvider
from ._model import DEFAULT_ANTHROPIC_URL as DEFAULT_ANTHROPIC_URL
from ._model import DEFAULT_OPENAI_URL as DEFAULT_OPENAI_URL
from ._model import PRICES_AS_OF as PRICES_AS_OF
from ._model import Compat as Compat
from ._model import ModelConfig as ModelConfig
from ._model import ModelCost as ModelCost
from ._model import Secret as Secret
from ._model import ThinkingLevel as ThinkingLevel
from ._model import base_url_from_env as base_url_from_env
from ._scripted import ScriptedBlock as ScriptedBlock
from ._scripted import ScriptedCall as ScriptedCall
from ._scripted import ScriptedProvider as ScriptedProvider
from ._scripted import ScriptedTurn as ScriptedTurn
from ._scripted import ScriptExhausted as ScriptExhausted
from ._scripted import ScriptStep as ScriptStep
from ._scripted import call as call
from ._scripted import fail as fail
from ._scripted import reply as reply

if TYPE_CHECKING:
    from ._anthropic import AnthropicProvider as AnthropicProvider
    from ._openai import OpenAIProvider as OpenAIProvider
    from ._responses import OpenAIResponsesProvider as OpenAIResponsesProvider
    from ._retry import RetryConfig as RetryConfig
    from ._retry import parse_retry_after as parse_retry_after

__all__ = [
    "DEFAULT_ANTHROPIC_URL",
    "DEFAULT_OPENAI_URL",
    "PRICES_AS_OF",
    "AnthropicProvider",
    "AuthenticationError",
    "BadRequestError",
    "Compat",
    "ContextOverflowError",
    "Emit",
    "FallbackError",
    "FallbackProvider",
    "ModelConfig",
    "ModelCost",
    "ModelRequest",
    "NetworkError",
    "OpenAIProvider",
    "OpenAIResponsesProvider",
    "OutputFormat",
    "OverloadedError",
    "Provider",
    "ProviderError",
    "RateLimitError",
    "RetryConfig",
    "ScriptExhausted",
    "ScriptStep",
    "ScriptedBlock",
    "ScriptedCall",
    "ScriptedProvider",
    "ScriptedTurn",
    "Secret",
    "ServerError",
    "ThinkingLevel",
    "ToolDefinition",
    "base_url_from_env",
    "call",
    "fail",
    "parse_retry_after",
    "parse_tool_arguments",
    "reply",
]


_LAZY = (
    "AnthropicProvider",
    "OpenAIProvider",
    "OpenAIResponsesProvider",
    "RetryConfig",
    "parse_retry_after",
)


def __getattr__(name: str) -> Any:
    """The HTTP providers and their retry settings, imported on first access (PEP 562)."""
    value: Any
    if name == "AnthropicProvider":
        from ._anthropic import AnthropicProvider as value
    elif name == "OpenAIProvider":
        from ._openai import OpenAIProvider as value
    elif name == "OpenAIResponsesProvider":
        from ._responses import OpenAIResponsesProvider as value
    elif name == "RetryConfig":
        from ._retry import RetryConfig as value
    elif name == "parse_retry_after":
        from ._retry import parse_retry_after as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    claim_public_home({name: value}, (name,), __name__, from_=_OWN)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


# The public home of the names defined in this package's modules and in the provider
# contract (agentloop._provider) is this package.
_OWN = ("agentloop.providers._", "agentloop._provider")
claim_public_home(globals(), __all__, __name__, from_=_OWN)
