"""Checking numeric settings, one way, with one kind of message.

>>> check_number(0, "timeout", above=0, optional=True)
Traceback (most recent call last):
...
ValueError: timeout must be > 0 or None, got 0
>>> check_number(1.5, "size", at_least=1, integer=True)
Traceback (most recent call last):
...
ValueError: size must be an integer >= 1, got 1.5
"""

from __future__ import annotations

import math
from typing import Any

import attrs

__all__ = ["check_number", "number_field"]


def check_number(
    value: object,
    what: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
    integer: bool = False,
    optional: bool = False,
) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite number (an int if ``integer``;
    never a bool) ``> above`` or ``>= at_least``; ``None`` passes if ``optional``."""
    if value is None and optional:
        return
    kinds = int if integer else int | float
    ok = (
        not isinstance(value, bool)
        and isinstance(value, kinds)
        and math.isfinite(value)
        and (above is None or value > above)
        and (at_least is None or value >= at_least)
    )
    if ok:
        return
    bound = (
        f"> {above:g}" if above is not None else f">= {at_least:g}" if at_least is not None else ""
    )
    kind = "an integer " if integer else ""
    or_none = " or None" if optional else ""
    raise ValueError(f"{what} must be {kind}{bound}{or_none}, got {value!r}")


def number_field(
    *,
    above: float | None = None,
    at_least: float | None = None,
    integer: bool = False,
    optional: bool = False,
    owner: str = "",
) -> Any:
    """An attrs validator running :func:`check_number` on the field (named as its alias)."""

    def validate(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        name = attribute.alias or attribute.name
        what = f"{owner} {name}" if owner else name
        check_number(
            value, what, above=above, at_least=at_least, integer=integer, optional=optional
        )

    return validate
