"""agentloop on the web (``pip install 'agentloop[web]'``).

- The local page of ``agentloop web`` (:func:`serve_page`, :func:`page_app`):
  watch, steer and approve the terminal agent's runs in a browser.
"""

# --------------------------------------------------------------- the local page (agentloop web)
from ._page import PageConversation, PageHost, PageSession, page_app, serve_page

__all__ = ["PageConversation", "PageHost", "PageSession", "page_app", "serve_page"]
