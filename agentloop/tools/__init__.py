"""Built-in tools: a shell, files, edits, listing and search (confined to one directory),
the prun tools, and sub-agents."""

from .._util import claim_public_home
from ._bash import DEFAULT_DENY as DEFAULT_DENY
from ._bash import BashTool as BashTool
from ._bash import CommandRun as CommandRun
from ._bash import CommandRunner as CommandRunner
from ._defaults import default_tools as default_tools
from ._edit import EditFileTool as EditFileTool
from ._environ import DEFAULT_ENV_DENY as DEFAULT_ENV_DENY
from ._environ import hide_process_credentials as hide_process_credentials
from ._files import ReadFileTool as ReadFileTool
from ._files import WriteFileTool as WriteFileTool
from ._files import atomic_write as atomic_write
from ._listing import ListFilesTool as ListFilesTool
from ._prun import PrunTool as PrunTool
from ._prun import prun_tools as prun_tools
from ._sandbox import DEFAULT_PROTECT as DEFAULT_PROTECT
from ._sandbox import Sandbox as Sandbox
from ._sandbox import SandboxStatus as SandboxStatus
from ._sandbox import sandbox_status as sandbox_status
from ._search import SearchTool as SearchTool
from ._sub_agent import SubAgentTool as SubAgentTool
from ._workspace import SKIP_DIRS as SKIP_DIRS
from ._workspace import FileAccess as FileAccess
from ._workspace import Workspace as Workspace

__all__ = [
    "DEFAULT_DENY",
    "DEFAULT_ENV_DENY",
    "DEFAULT_PROTECT",
    "SKIP_DIRS",
    "BashTool",
    "CommandRun",
    "CommandRunner",
    "EditFileTool",
    "ListFilesTool",
    "PrunTool",
    "ReadFileTool",
    "Sandbox",
    "SandboxStatus",
    "SearchTool",
    "SubAgentTool",
    "FileAccess",
    "Workspace",
    "WriteFileTool",
    "atomic_write",
    "default_tools",
    "hide_process_credentials",
    "prun_tools",
    "sandbox_status",
]


claim_public_home(globals(), __all__, __name__, from_=("agentloop.tools._",))
