"""agentloop on the web (``pip install 'agentloop[web]'``).

- An AG-UI endpoint: :func:`agui_app` is an ASGI app that runs an agent for each
  AG-UI ``RunAgentInput`` and streams AG-UI events over SSE; :func:`serve_agui`
  serves it with Hypercorn's trio worker. See ``docs/concepts/agui.md``.
- The local page of ``agentloop web`` (:func:`serve_page`, :func:`page_app`):
  watch, steer and approve the terminal agent's runs in a browser. See
  ``docs/concepts/web.md``.
"""

from __future__ import annotations

from .._util import claim_public_home as _claim_public_home

# --- the AG-UI endpoint
from ._agui import ABORT_GRACE as ABORT_GRACE
from ._agui import AgentFactory as AgentFactory
from ._agui import AguiApp as AguiApp
from ._agui import agui_app as agui_app
from ._agui import serve_agui as serve_agui
from ._agui_events import AguiTranslator as AguiTranslator

# --- the local page (agentloop web)
from ._page import PageConversation as PageConversation
from ._page import PageHost as PageHost
from ._page import PageSession as PageSession
from ._page import page_app as page_app
from ._page import serve_page as serve_page

__all__ = [
    "ABORT_GRACE",
    "AgentFactory",
    "AguiApp",
    "AguiTranslator",
    "PageConversation",
    "PageHost",
    "PageSession",
    "agui_app",
    "page_app",
    "serve_page",
    "serve_agui",
]

_claim_public_home(globals(), __all__, __name__, from_=("agentloop.web._",))
