"""ACP, the Agent Client Protocol: editors (Zed, JetBrains, Neovim...) drive an agent.

agentloop implements the agent side itself, on trio: JSON-RPC 2.0 over
newline-delimited JSON on stdin/stdout (``agentloop acp``), or on any pair of
trio streams (:func:`serve_acp`). The official SDKs (the ``agent-client-protocol``
Python package, asyncio-based, and ``@agentclientprotocol/sdk`` for Node) are
not used at run time; the tests drive ``agentloop acp`` with the official Node
client and check every message against the official JSON schema.
"""

from __future__ import annotations

from .._util import claim_public_home as _claim_public_home
from ._client_io import ClientFiles as ClientFiles
from ._client_io import ClientTerminal as ClientTerminal
from ._diff import Diffing as Diffing
from ._rpc import RpcError as RpcError
from ._server import PROTOCOL_VERSION as PROTOCOL_VERSION
from ._server import AcpAgentSetup as AcpAgentSetup
from ._server import AcpMode as AcpMode
from ._server import AcpSession as AcpSession
from ._server import serve_acp as serve_acp

__all__ = [
    "PROTOCOL_VERSION",
    "AcpAgentSetup",
    "AcpMode",
    "AcpSession",
    "ClientFiles",
    "ClientTerminal",
    "Diffing",
    "RpcError",
    "serve_acp",
]

_claim_public_home(globals(), __all__, __name__, from_=("agentloop.acp._",))
