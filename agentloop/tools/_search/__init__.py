"""The search tool: ripgrep when it is installed, else the same search in Python."""

from ._tool import SearchTool as SearchTool

__all__ = ["SearchTool"]
