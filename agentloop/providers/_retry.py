"""RetryConfig: how often and how long to wait before asking the model again."""

from __future__ import annotations

import random
import time

import attrs

from .._check import number_field

__all__ = ["RetryConfig", "parse_retry_after"]


@attrs.frozen(kw_only=True)
class RetryConfig:
    """When a model call fails in a way that may pass, try again, waiting longer each time.

    Retried: rate limits (429), overload (529), server errors (408, 500-504),
    connection failures, timeouts, and streams cut off before their end. Not
    retried: bad requests, authentication failures, context overflows.

    The wait before retry ``n`` (1-based) is
    ``min(initial_delay * multiplier ** (n - 1), max_delay)``, scaled by a
    random factor in ``[1 - jitter, 1 + jitter]``. When the API says how long
    to wait (``Retry-After``), that is used instead, clamped to ``max_delay``.
    Waits are ``trio.sleep``: cancelling the run ends them at once.

    Examples:
        >>> [RetryConfig(jitter=0).delay(n) for n in (1, 2, 3, 4, 5, 6)]
        [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
    """

    max_retries: int = attrs.field(default=3, validator=number_field(at_least=0))
    initial_delay: float = attrs.field(default=1.0, validator=number_field(at_least=0))
    multiplier: float = attrs.field(default=2.0, validator=number_field(at_least=0))
    max_delay: float = attrs.field(default=30.0, validator=number_field(at_least=0))
    jitter: float = attrs.field(default=0.2, validator=number_field(at_least=0))

    @classmethod
    def none(cls) -> RetryConfig:
        """Never retry."""
        return cls(max_retries=0)

    def delay(
        self,
        retry: int,
        *,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        base = min(self.initial_delay * self.multiplier ** (retry - 1), self.max_delay)
        if not self.jitter:
            return base
        factor = (rng or random).uniform(1 - self.jitter, 1 + self.jitter)
        return min(base * factor, self.max_delay)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header value, or None if it says nothing usable.

    Accepts delta-seconds (``"120"``, ``"1.5"``) and HTTP dates
    (``"Wed, 21 Oct 2026 07:28:00 GMT"``, measured from ``now``, Unix time).
    Returns None for anything else; a date in the past gives ``0.0``.

    >>> parse_retry_after("7")
    7.0
    >>> parse_retry_after("Thu, 01 Jan 1970 00:01:40 GMT", now=40.0)
    60.0
    """
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 and seconds == seconds else None
    import email.utils  # here: only an HTTP date needs it (and datetime, calendar)

    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    current = time.time() if now is None else now
    return max(moment.timestamp() - current, 0.0)
