"""default_tools(): the six built-in tools, sharing one workspace."""

from __future__ import annotations

import os

from .._tool import AgentTool
from ._bash import BashTool
from ._edit import EditFileTool
from ._files import ReadFileTool, WriteFileTool
from ._listing import ListFilesTool
from ._sandbox import Sandbox, as_sandbox
from ._search import SearchTool
from ._workspace import Workspace, as_workspace

__all__ = ["default_tools"]


def default_tools(
    root: Workspace | str | os.PathLike[str] = ".", *, sandbox: Sandbox | bool | None = None
) -> list[AgentTool]:
    """The built-in tools, all confined to ``root``.

    Returns, in this order: ``bash``, ``read_file``, ``write_file``, ``edit_file``,
    ``list_files`` and ``search``, each with its default settings and sharing one
    :class:`Workspace`. Build the tools yourself to change a setting::

        tools = default_tools("project")
        tools[0] = BashTool("project", timeout=30)

    ``root`` is resolved once, here: changing the process's working directory
    later does not move the tools.

    ``sandbox``: a :class:`Sandbox` (True: ``Sandbox()``) for ``bash``'s commands
    and, read-only, ``search``'s ripgrep; None (the default) for none. Where this
    system cannot enforce it, a WARNING is logged once and ``bash`` reports
    ``sandboxed = False``.

    Raises:
        ValueError: ``root`` is not a directory.
        TypeError: ``sandbox`` is not a Sandbox, a bool or None.
    """
    workspace = as_workspace(root)
    confine = as_sandbox(sandbox)
    return [
        BashTool(workspace, sandbox=confine),
        ReadFileTool(workspace),
        WriteFileTool(workspace),
        EditFileTool(workspace),
        ListFilesTool(workspace),
        SearchTool(workspace, sandbox=confine),
    ]
