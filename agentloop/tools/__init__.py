"""Built-in tools: a shell, files, edits, listing and search, confined to one directory."""

from ._workspace import SKIP_DIRS as SKIP_DIRS
from ._workspace import Workspace as Workspace

__all__ = ["SKIP_DIRS", "Workspace"]
