"""Which inherited environment variables a command may see: secrets stay out.

A variable is held back when its *name* says it is a credential, when its
*value* looks like one (see :mod:`agentloop._secrets` for both rules), or when
it matches a user's deny pattern; an allow pattern lets one through anyway.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

from .._secrets import is_secret_name, is_secret_value

__all__ = ["filter_environment", "is_secret"]


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
