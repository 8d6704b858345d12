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

from .._util import claim_public_home
from ._adapter import OpenApiToolAdapter as OpenApiToolAdapter
from ._config import Credential as Credential
from ._config import OpenApiConfig as OpenApiConfig
from ._config import OperationFilter as OperationFilter
from ._spec import OpenApiError as OpenApiError

__all__ = ["Credential", "OpenApiConfig", "OpenApiError", "OpenApiToolAdapter", "OperationFilter"]

claim_public_home(globals(), __all__, __name__, from_=("agentloop.openapi._",))
