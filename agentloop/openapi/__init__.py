"""The operations of an OpenAPI 3.0 or 3.1 API as agentloop tools, one per operation.

::

    from agentloop.openapi import OpenApiConfig, OpenApiToolAdapter, OperationFilter

    tools = OpenApiToolAdapter.from_file(
        "petstore.yaml",
        OpenApiConfig(base_url="https://petstore3.swagger.io/api/v3",
                      credentials={"api_key": "special-key"}),
        OperationFilter(tags="pet"),
    )
    agent = Agent(provider, tools=tools)
"""

from __future__ import annotations

from ._adapter import OpenApiToolAdapter as OpenApiToolAdapter
from ._config import Credential as Credential
from ._config import OpenApiConfig as OpenApiConfig
from ._config import OperationFilter as OperationFilter
from ._spec import OpenApiError as OpenApiError

__all__ = ["Credential", "OpenApiConfig", "OpenApiError", "OpenApiToolAdapter", "OperationFilter"]

# The public classes' home is this package, as in trio and httpx: tracebacks, reprs
# and pickles name agentloop.openapi.OpenApiConfig, not the module that defines it.
for _value in (OpenApiConfig, OpenApiError, OpenApiToolAdapter, OperationFilter):
    _value.__module__ = __name__
del _value
