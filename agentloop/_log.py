"""Log records without credentials, whatever the application's logging configuration.

The HTTP client logs each request's URL at INFO (``httpx2``: ``HTTP Request:
GET https://api.test/v1/pets?api_key=...``), its connection layer the response
headers at DEBUG (``httpcore2.*``), the MCP SDK the server's URL and messages
(``mcp.*``, and ``client`` for its client session). A query parameter, a URL's
password or a header can be a credential, and a handler the application put on
the root logger receives those records as they are.

So agentloop redacts the records of those loggers, and its own (``agentloop.*``),
where they are made: :func:`install` (called by ``import agentloop``) puts a
record factory in front of the one in place (:func:`logging.setLogRecordFactory`).
A record of those loggers whose message, or whose exception's traceback,
carries a credential that :func:`agentloop._secrets.redact_secrets` recognises
(URLs' passwords, secret query values, secret header values, ``Bearer`` tokens,
known token formats, and the secrets of every live redactor: an MCP server's
headers and OAuth tokens, an OpenAPI request's credentials, a provider's API
key) gets the redacted text as its message (and no arguments); a traceback that
carried one is kept as redacted text (``exc_text``), its exception dropped.

Why a record factory: a filter on a logger sees only the records made on that
very logger (not its children's: ``httpcore2.http11`` is not ``httpcore2``),
and a handler's filter only its own handler's; records propagate to the root's
handlers without passing through their ancestors' filters. The factory sees
every record where it is made, before any handler, whatever the handlers,
levels and propagation. Records of other loggers pass through untouched (one
string comparison). An application that replaces the record factory later
must call the one it replaced (as the :mod:`logging` documentation advises),
or these records are no longer redacted.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["REDACTED_LOGGERS", "install", "redact_record"]

#: The loggers (and their children) whose records are redacted. The MCP SDK's
#: client session logs under the bare name ``client``.
REDACTED_LOGGERS = frozenset({"agentloop", "httpx2", "httpcore2", "mcp", "client"})

_MARK = "_agentloop_redacts"


def redact_record(record: logging.LogRecord) -> None:
    """Take the credentials out of ``record``'s message and traceback (see the module)."""
    from ._secrets import redact_secrets

    try:
        message = record.getMessage()
    except Exception:  # a malformed record: the handler reports it, as usual
        return
    clean = redact_secrets(message)
    if clean != message:
        record.msg, record.args = clean, ()
    if record.exc_info and record.exc_info[1] is not None:
        text = logging.Formatter().formatException(record.exc_info)
        clean = redact_secrets(text)
        if clean != text:
            record.exc_info, record.exc_text = None, clean


def install() -> None:
    """Redact the records of :data:`REDACTED_LOGGERS` from now on (once; see the module)."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, _MARK, False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if record.name.partition(".")[0] in REDACTED_LOGGERS:
            redact_record(record)
        return record

    setattr(factory, _MARK, True)
    logging.setLogRecordFactory(factory)
