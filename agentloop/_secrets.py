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
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = [
    "REDACTED",
    "SECRET_FRAGMENTS",
    "SECRET_WORDS",
    "Redactor",
    "header_secrets",
    "is_secret_name",
    "is_secret_value",
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
_TOKEN_FORMATS = re.compile(
    r"^(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|sk-[A-Za-z0-9_\-]{16,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}|glpat-[A-Za-z0-9_\-]{16,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|npm_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,})"
)


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


class Redactor:
    """Replaces each secret, and the forms it takes on the wire, with ``***``.

    The forms: the value itself, percent-encoded (as in a query string or a
    cookie), ``+``-encoded, JSON-escaped, and base64-encoded. Secrets shorter
    than ``min_length`` are ignored (redacting ``"1"`` everywhere would make
    text unreadable, and hide nothing). Longer secrets are replaced first.

    >>> redact = Redactor(["s3cr3t-token"])
    >>> redact.text("Authorization: Bearer s3cr3t-token")
    'Authorization: Bearer ***'
    >>> redact.json({"headers": {"X-Key": "s3cr3t-token"}, "n": 1})
    {'headers': {'X-Key': '***'}, 'n': 1}
    """

    __slots__ = ("_forms", "_min_length", "_pattern")

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
