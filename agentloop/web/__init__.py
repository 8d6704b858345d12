"""Agents on the web: an AG-UI endpoint (``agentloop[web]``).

:func:`agui_app` is an ASGI app that runs an agent for each AG-UI
``RunAgentInput`` and streams AG-UI events over SSE; :func:`serve_agui` serves
it with Hypercorn's trio worker. See ``docs/concepts/agui.md``.
"""

from __future__ import annotations

# --- the AG-UI endpoint
from ._agui import ABORT_GRACE as ABORT_GRACE
from ._agui import AgentFactory as AgentFactory
from ._agui import AguiApp as AguiApp
from ._agui import agui_app as agui_app
from ._agui import serve_agui as serve_agui
from ._agui_events import AguiTranslator as AguiTranslator

__all__ = ["ABORT_GRACE", "AgentFactory", "AguiApp", "AguiTranslator", "agui_app", "serve_agui"]
