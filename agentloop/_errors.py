"""The root of every error agentloop raises."""

from __future__ import annotations

__all__ = ["AgentloopError"]


class AgentloopError(Exception):
    """Anything that went wrong in agentloop: catch this to catch them all.

    The tree::

        AgentloopError
        ├── ToolError                 a tool failed; the model is shown the message
        │   ├── InvalidArgs           the arguments are unusable
        │   ├── ToolNotFound          no tool has that name
        │   ├── ToolCancelled         the call was cancelled
        │   ├── ToolTimeout           the call ran past its timeout
        │   └── McpRequestError       an MCP server answered a request with an error
        ├── ProviderError             the model's API failed (agentloop.providers)
        │   ├── RateLimitError        429
        │   ├── OverloadedError       529, "overloaded"
        │   ├── ServerError           5xx, a malformed stream
        │   ├── NetworkError          connection, timeouts, a stream cut short
        │   ├── AuthenticationError   401, 403
        │   ├── BadRequestError       400, 404, 422...
        │   │   └── ContextOverflowError    the request is longer than the model's window
        │   └── FallbackError         every model of a FallbackProvider failed
        ├── OutputError               a run ended without its structured output
        ├── ApprovalError             decisions that cannot be applied (also a ValueError)
        ├── ScriptExhausted           a ScriptedProvider ran out of turns
        ├── McpConnectionError        an MCP server cannot be reached (also a ConnectionError)
        │   └── McpAuthError          signing in to it failed (OAuth)
        ├── OpenApiError              an OpenAPI document cannot be used (also a ValueError)
        ├── DeserializationError      JSON is not the value asked for (also a ValueError)
        ├── SessionLockedError        a session is open in another process (agentloop.session)
        ├── RpcError                  a JSON-RPC error answer (agentloop.acp)
        └── TrioRequiredError         awaited outside trio (also a RuntimeError)

    Wrong arguments to a constructor or function (a negative timeout, a tool
    that is not a tool) raise the built-in ``TypeError`` and ``ValueError``, as
    Python's own functions do: those are mistakes in the calling code, found
    when it runs the first time, not conditions to handle. An exception raised
    by your own hook or callback leaves the run as itself.

    >>> import agentloop as al
    >>> issubclass(al.ToolTimeout, al.AgentloopError)
    True
    """
