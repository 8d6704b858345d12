"""OAuth for MCP servers over HTTP: ``HttpServer(url, oauth=OAuth())``.

The flow is the one the MCP specification asks for (2025-11-25, with the
2025-06-18 and 2025-03-26 fallbacks):

1. The server answers 401. Its protected-resource metadata is looked for at the
   ``WWW-Authenticate`` header's ``resource_metadata``, then at
   ``/.well-known/oauth-protected-resource/<path>`` and at the root; the
   authorization server's metadata at its RFC 8414 and OpenID locations. With no
   protected-resource metadata (2025-03-26 servers) it is looked for at the MCP
   server's origin, and without any metadata ``/authorize``, ``/token`` and
   ``/register`` there are used.
2. The client is the pre-registered ``client_id``, else the client metadata
   document at ``client_metadata_url`` if the server takes those, else one
   registered dynamically (RFC 7591).
3. The user authorizes in a browser (PKCE S256, the ``resource`` parameter,
   the scopes chosen as the specification says); ``grant="client_credentials"``
   takes no user at all.
4. Tokens, and the registered client, are kept per server in a file only the
   user can read, and refreshed when they expire. A 403 ``insufficient_scope``
   authorizes again with the scopes asked for added (step-up), once per request.

The SDK's ``OAuthClientProvider`` does most of this; ``_flow._Provider`` is its
flow with what it lacks (pre-registered clients, client credentials, the
2025-03-26 metadata, a refresh before re-authorizing, persistence of expiry
and metadata, a bound on step-ups) and with errors that say which step failed
and hold no secret.
"""

from __future__ import annotations

from ._browser import authorize_in_browser, pausable_deadline
from ._flow import oauth_auth
from ._options import OAuth, default_token_store, oauth_secrets

__all__ = [
    "OAuth",
    "authorize_in_browser",
    "default_token_store",
    "oauth_auth",
    "oauth_secrets",
    "pausable_deadline",
]
