"""Secrets: recognising them (by name, by value) and keeping them out of text.

:func:`is_secret_name` and :func:`is_secret_value` say whether an environment
variable or a header looks like a credential. Names are split into words at
``_``, ``-`` and ``.`` (``AWS_SECRET_ACCESS_KEY`` is ``AWS``, ``SECRET``,
``ACCESS``, ``KEY``) and compared case-insensitively:

- a word that *is* one of :data:`SECRET_WORDS` (``KEY``, ``TOKEN``, ``PAT``,
  ``AUTH``, ``PASS``, ``PWD``, ``CREDS``, ``DSN``, ...) or *ends* with
  ``TOKEN`` or ``APIKEY`` (``GHTOKEN``);
- or a name that *contains* one of :data:`SECRET_FRAGMENTS` anywhere
  (``PASSWORD``, ``PASSWD``, ``SECRET``, ``CREDENTIAL``, ``PRIVATE_KEY``...),
  so ``PGPASSWORD`` and ``DJANGO_SECRET_KEY`` are caught.

Whole words, not substrings, for the short ones: ``KEYBOARD_LAYOUT``,
``TOKENIZERS_PARALLELISM``, ``PASSENGER_ENV`` and ``MONKEY`` pass. ``PWD`` and
``OLDPWD`` (the working directory) pass; ``MYSQL_PWD`` does not.
``SSH_AUTH_SOCK`` counts as a secret: it lets a program use your SSH keys.

Values: a URL with a password in it (``postgres://user:pw@host/db``) and the
prefixes of well-known token formats (``ghp_``, ``github_pat_``, ``sk-``,
``xoxb-``, ``glpat-``, ``AKIA...``) are secrets whatever the name.

A :class:`Redactor` replaces known secret values, and the forms they take on
the wire, with ``***`` in whatever text or JSON a server sends back.

URLs: :func:`redact_url` replaces a URL's credentials with ``***``: the
password of its user-info, the user when it looks like a token
(``https://ghp_...@github.com``), the values of secret-looking query and
fragment parameters (:func:`is_secret_param`: ``key``, ``api_key``, ``token``,
``access_token``, ``sig``, ``code``...; the others stay), and path segments in a
known token format. :func:`url_secrets` lists those credentials, for a
:class:`Redactor`; :func:`redact_urls` redacts every URL in a text.

:func:`redact_secrets` is what a log record goes through (see
:mod:`agentloop._log`): URLs, secret header values in the forms HTTP libraries
log them, ``Bearer`` tokens, values in a known token format, and every secret a
live :class:`Redactor` holds (an MCP connection's headers and OAuth tokens, an
OpenAPI request's credentials, a provider's API key during its request).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

__all__ = [
    "REDACTED",
    "SECRET_FRAGMENTS",
    "SECRET_WORDS",
    "Redactor",
    "header_secrets",
    "is_secret_name",
    "is_secret_param",
    "is_secret_value",
    "live_redactors",
    "redact_secrets",
    "redact_url",
    "redact_urls",
    "url_secrets",
]

REDACTED = "***"

#: Name words (whole) that mark a credential.
SECRET_WORDS = frozenset(
    {
        "KEY",
        "KEYS",
        "APIKEY",
        "TOKEN",
        "TOKENS",
        "PAT",
        "AUTH",
        "OAUTH",
        "PASS",
        "PWD",
        "PASSPHRASE",
        "CREDS",
        "CRED",
        "DSN",
        "COOKIE",
        "COOKIES",
        "JWT",
        "BEARER",
        "OTP",
        "SIGNING",
    }
)
#: Fragments that mark a credential wherever they are in the name.
SECRET_FRAGMENTS = (
    "PASSWORD",
    "PASSWD",
    "SECRET",
    "CREDENTIAL",
    "PRIVATE_KEY",
    "PRIVATEKEY",
    "ACCESS_KEY",
    "ACCESSKEY",
    "API_KEY",
    "APIKEY",
    "AUTH_TOKEN",
)
_WORD_ENDINGS = ("TOKEN", "APIKEY")
_NOT_SECRET = frozenset({"PWD", "OLDPWD"})
_SPLIT = re.compile(r"[_\-.]+")
# scheme://user:password@host: userinfo with a non-empty password
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:[^/\s@]+@")
_TOKEN_FORMAT = (
    r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|sk-[A-Za-z0-9_\-]{16,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}|glpat-[A-Za-z0-9_\-]{16,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|npm_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,})"
)
_TOKEN_FORMATS = re.compile("^" + _TOKEN_FORMAT)


def is_secret_name(name: str) -> bool:
    """Whether the variable ``name`` names a credential (see the module docstring).

    >>> [is_secret_name(n) for n in ("GITHUB_TOKEN", "PGPASSWORD", "KEYBOARD", "PWD")]
    [True, True, False, False]
    """
    upper = name.upper()
    if upper in _NOT_SECRET:
        return False
    if any(fragment in upper for fragment in SECRET_FRAGMENTS):
        return True
    return any(word in SECRET_WORDS or word.endswith(_WORD_ENDINGS) for word in _SPLIT.split(upper))


def is_secret_value(value: str) -> bool:
    """Whether ``value`` looks like a credential: a URL with a password, a known token format.

    >>> is_secret_value("postgres://app:hunter2@db/app"), is_secret_value("/usr/bin")
    (True, False)
    """
    return bool(_URL_PASSWORD.search(value) or _TOKEN_FORMATS.match(value))


#: Headers whose values are always credentials, however short.
_SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key"}
)
_SCHEME = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_-]*)\s+(\S.*?)\s*$")


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The secret values in ``headers``, and the parts of them that may come back alone.

    A header is secret when its name is (``Authorization``, ``Cookie``,
    ``X-Api-Key``...) or looks like a credential (:func:`is_secret_name`:
    ``X-Auth-Token``, ``Private-Token``...). For ``Scheme credentials`` values
    the credentials count too; for ``Basic`` ones the decoded ``user:password``
    and the password.

    >>> header_secrets({"Authorization": "Basic dXNlcjpodW50ZXIy", "Accept": "json"})
    ['Basic dXNlcjpodW50ZXIy', 'dXNlcjpodW50ZXIy', 'user:hunter2', 'hunter2']
    """
    found: list[str] = []
    for name, value in headers.items():
        lowered = name.lower()
        if not (lowered in _SECRET_HEADERS or is_secret_name(name)):
            continue
        found.append(value)
        match = _SCHEME.match(value)
        if match is None:
            continue
        scheme, credentials = match.groups()
        found.append(credentials)
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                continue
            found.append(decoded)
            password = decoded.partition(":")[2]
            if password:
                found.append(password)
    return found


# ----------------------------------------------------------------------------- URLs

#: Query parameter names that are credentials, whole (compared in lower case).
_PARAM_NAMES = frozenset(
    {"code", "sig", "pwd", "session", "sessionid", "session_id", "sid", "assertion"}
)
#: Words of a parameter name that make it a credential (``X-Amz-Signature``).
_PARAM_WORDS = frozenset({"SIG", "SIGNATURE", "ASSERTION"})
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>`]+")
_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://([^/?#\s]*)")
_TRAILING = ".,:;!?)]}"  # after a URL in a text: the sentence's, not the URL's
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-.~+/=]+")


def is_secret_param(name: str) -> bool:
    """Whether a URL's query parameter ``name`` names a credential.

    Those :func:`is_secret_name` knows (``key``, ``api_key``, ``token``,
    ``access_token``, ``password``, ``auth``...), and ``code``, ``sig``,
    ``signature``, ``pwd``, ``session``, ``sid`` and ``assertion``.

    >>> [is_secret_param(n) for n in ("api_key", "sig", "X-Amz-Signature", "page", "code")]
    [True, True, True, False, True]
    """
    if name.lower() in _PARAM_NAMES or is_secret_name(name):
        return True
    return any(word in _PARAM_WORDS for word in _SPLIT.split(name.upper()))


def _token_like(user: str) -> bool:
    """Whether a URL's user looks like a token rather than a name."""
    if is_secret_value(user):
        return True
    return (
        len(user) >= 20
        and _TOKEN_CHARS.fullmatch(user) is not None
        and any(c.isdigit() for c in user)
        and any(c.isalpha() for c in user)
    )


def _pairs(text: str, found: list[str] | None) -> str:
    """Query (or fragment) ``text`` with its secret values redacted; ``found`` gets them."""
    pieces = text.split("&")
    for index, piece in enumerate(pieces):
        name, equals, value = piece.partition("=")
        if not (equals and value):
            continue
        plain = unquote_plus(value)
        if is_secret_param(unquote_plus(name)) or is_secret_value(plain):
            pieces[index] = f"{name}={REDACTED}"
            if found is not None:
                found += [value, plain]
    return "&".join(pieces)


def _url(url: str, found: list[str] | None) -> str:
    if "@" not in url and "?" not in url and "#" not in url and not _TOKEN_IN_TEXT.search(url):
        return url  # no user-info, no query, no fragment, no token: nothing to look at
    match = _AUTHORITY.match(url)
    if match is not None:
        head, authority, rest = url[: match.start(1)], match.group(1), url[match.end() :]
        info, at, host = authority.rpartition("@")
        if at:
            user, colon, password = info.partition(":")
            if _token_like(unquote(user)):
                if found is not None:
                    found += [user, unquote(user)]
                user = REDACTED
            if colon and password:
                if found is not None:
                    found += [password, unquote(password)]
                password = REDACTED
            authority = f"{user}{colon}{password}@{host}"
    else:
        head, authority, rest = "", "", url
    rest, hashmark, fragment = rest.partition("#")
    path, question, query = rest.partition("?")
    segments = path.split("/")
    for index, segment in enumerate(segments):
        if segment and _TOKEN_FORMATS.match(unquote(segment)):
            if found is not None:
                found += [segment, unquote(segment)]
            segments[index] = REDACTED
    path = "/".join(segments)
    query = _pairs(query, found)
    if "=" in fragment:
        fragment = _pairs(fragment, found)
    return f"{head}{authority}{path}{question}{query}{hashmark}{fragment}"


def redact_url(url: str) -> str:
    """``url`` with its credentials replaced by ``***`` (see the module docstring).

    >>> redact_url("https://bot:hunter2@api.test/v1?key=abc&page=2#access_token=xyz")
    'https://bot:***@api.test/v1?key=***&page=2#access_token=***'
    >>> redact_url("https://ghp_0123456789abcdefghij0123@github.com/o/r.git")
    'https://***@github.com/o/r.git'
    """
    redacted = _url(url, None)
    return url if redacted == url else redacted


def url_secrets(url: str) -> list[str]:
    """The credentials in ``url`` (see :func:`redact_url`), as written and decoded.

    >>> url_secrets("http://me:p%40ss@h/?token=t0k3n&q=1")
    ['p%40ss', 'p@ss', 't0k3n', 't0k3n']
    """
    found: list[str] = []
    _url(url, found)
    return found


def redact_urls(text: str) -> str:
    """``text`` with every URL in it redacted by :func:`redact_url`.

    >>> redact_urls("GET http://127.0.0.1:8/v1?api_key=s3cret failed")
    'GET http://127.0.0.1:8/v1?api_key=*** failed'
    >>> redact_urls("cannot fetch http://h/?token=t0k: refused (see http://u:pw@h/).")
    'cannot fetch http://h/?token=***: refused (see http://u:***@h/).'
    """
    if "://" not in text:
        return text
    return _URL.sub(_redact_match, text)


def _redact_match(match: re.Match[str]) -> str:
    """A URL found in a text, redacted; punctuation after it (``:``, ``.``...) is not its."""
    found = match.group()
    url = found.rstrip(_TRAILING)
    return redact_url(url) + found[len(url) :]


# ----------------------------------------------------------------------------- logs

_HEADER_NAMES = "|".join(sorted(_SECRET_HEADERS, key=len, reverse=True))
# A secret header's value as HTTP libraries log it: "authorization: Bearer x",
# "'Authorization': 'Bearer x'", "(b'set-cookie', b'sid=x')".
_HEADER_VALUE = re.compile(
    rf"(?i)(?<![A-Za-z0-9_-])((?:{_HEADER_NAMES})(?:['\"]?\s*[:=]|['\"]\s*,)\s*(?:b?['\"])?)"
    r"([^'\"\r\n&]+)"
)
_BEARER = re.compile(r"(?i)(?<![A-Za-z0-9_-])(bearer\s+)[A-Za-z0-9._~+/\-]+=*")
_TOKEN_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_\-])" + _TOKEN_FORMAT)


def redact_secrets(text: str) -> str:
    """``text`` with every credential agentloop can recognise replaced by ``***``.

    URLs (:func:`redact_urls`), secret header values as HTTP libraries log
    them, ``Bearer`` tokens, values in a known token format, and the secrets of
    every live :class:`Redactor` (see :func:`live_redactors`).

    >>> redact_secrets("(b'set-cookie', b'sid=42; Path=/') Bearer abc.def")
    "(b'set-cookie', b'***') Bearer ***"
    """
    text = redact_urls(text)
    text = _HEADER_VALUE.sub(lambda m: m.group(1) + REDACTED, text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _TOKEN_IN_TEXT.sub(REDACTED, text)
    for redactor in live_redactors():
        text = redactor.text(text)
    return text


_live: weakref.WeakSet[Redactor] = weakref.WeakSet()
_live_lock = threading.Lock()


def live_redactors() -> list[Redactor]:
    """Every :class:`Redactor` that holds a secret and is still in use somewhere."""
    with _live_lock:
        return list(_live)


class Redactor:
    """Replaces each secret, and the forms it takes on the wire, with ``***``.

    The forms: the value itself, percent-encoded (as in a query string or a
    cookie), ``+``-encoded, JSON-escaped, and base64-encoded. Secrets shorter
    than ``min_length`` are ignored (redacting ``"1"`` everywhere would make
    text unreadable, and hide nothing). Longer secrets are replaced first.

    A redactor that holds a secret is also one of :func:`live_redactors`, as
    long as it is referenced: log records are redacted with it too.

    >>> redact = Redactor(["s3cr3t-token"])
    >>> redact.text("Authorization: Bearer s3cr3t-token")
    'Authorization: Bearer ***'
    >>> redact.json({"headers": {"X-Key": "s3cr3t-token"}, "n": 1})
    {'headers': {'X-Key': '***'}, 'n': 1}
    """

    __slots__ = ("__weakref__", "_forms", "_min_length", "_pattern")

    def __init__(self, secrets: Iterable[str], *, min_length: int = 4) -> None:
        self._forms: set[str] = set()
        self._min_length = min_length
        self._pattern: re.Pattern[str] | None = None
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Redact ``secrets`` too, from now on (credentials learned later: OAuth tokens)."""
        forms = set(self._forms)
        for secret in secrets:
            if len(secret) < self._min_length:
                continue
            forms.add(secret)
            forms.add(quote(secret, safe=""))
            forms.add(quote_plus(secret, safe=""))
            forms.add(json.dumps(secret)[1:-1])
            forms.add(base64.b64encode(secret.encode("utf-8")).decode("ascii"))
        if forms == self._forms:
            return
        self._forms = forms
        ordered = sorted((f for f in forms if len(f) >= self._min_length), key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        if self._pattern is not None:
            with _live_lock:
                _live.add(self)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)

    def json(self, value: Any) -> Any:
        """A JSON-like value with every string (keys included) redacted."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.json(key): self.json(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.json(item) for item in value)
        return value
