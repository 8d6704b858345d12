"""Which inherited environment variables a command may see: secrets stay out.

A variable is held back when its *name* says it is a credential, when its
*value* looks like one, or when it matches a user's deny pattern; an allow
pattern lets one through anyway.

Names are split into words at ``_``, ``-`` and ``.`` (``AWS_SECRET_ACCESS_KEY``
is ``AWS``, ``SECRET``, ``ACCESS``, ``KEY``) and compared case-insensitively:

- a word that *is* one of :data:`SECRET_WORDS` (``KEY``, ``TOKEN``, ``PAT``,
  ``AUTH``, ``PASS``, ``PWD``, ``CREDS``, ``DSN``, ...) or *ends* with
  ``TOKEN`` or ``APIKEY`` (``GHTOKEN``);
- or a name that *contains* one of :data:`SECRET_FRAGMENTS` anywhere
  (``PASSWORD``, ``PASSWD``, ``SECRET``, ``CREDENTIAL``, ``PRIVATE_KEY``...),
  so ``PGPASSWORD`` and ``DJANGO_SECRET_KEY`` are caught.

Whole words, not substrings, for the short ones: ``KEYBOARD_LAYOUT``,
``TOKENIZERS_PARALLELISM``, ``PASSENGER_ENV`` and ``MONKEY`` pass. ``PWD`` and
``OLDPWD`` (the working directory) pass; ``MYSQL_PWD`` does not.
``SSH_AUTH_SOCK`` is held back: it lets a command use your SSH keys (allow it
to ``git push`` over SSH).

Values: a URL with a password in it (``postgres://user:pw@host/db``) and the
prefixes of well-known token formats (``ghp_``, ``github_pat_``, ``sk-``,
``xoxb-``, ``glpat-``, ``AKIA...``) are held back whatever the name.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping

__all__ = [
    "SECRET_FRAGMENTS",
    "SECRET_WORDS",
    "filter_environment",
    "is_secret",
    "is_secret_name",
    "is_secret_value",
]

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


def _matches(name: str, patterns: Iterable[str]) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern.upper()) for pattern in patterns)


def is_secret(
    name: str, value: str, *, deny: Iterable[str] = (), allow: Iterable[str] = ()
) -> bool:
    """Whether the variable is held back: a secret by name or value, or denied, and not allowed.

    ``deny`` and ``allow`` are glob patterns matched case-insensitively against the name.
    """
    if _matches(name, allow):
        return False
    return is_secret_name(name) or is_secret_value(value) or _matches(name, deny)


def filter_environment(
    environ: Mapping[str, str], *, deny: Iterable[str] = (), allow: Iterable[str] = ()
) -> dict[str, str]:
    """``environ`` without the variables :func:`is_secret` holds back."""
    deny, allow = tuple(deny), tuple(allow)
    return {
        name: value
        for name, value in environ.items()
        if not is_secret(name, value, deny=deny, allow=allow)
    }
