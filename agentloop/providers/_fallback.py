"""A provider that falls back on other models when one fails."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from .._events import StreamDelta, StreamRestart
from .._types import AssistantMessage
from ._base import Emit, ModelRequest, Provider
from ._errors import NetworkError, OverloadedError, ProviderError, RateLimitError, ServerError

__all__ = ["FallbackError", "FallbackProvider"]

log = logging.getLogger("agentloop.providers")

#: The failures that make a FallbackProvider try its next model: the model was there
#: and the request was fine, but the service could not answer.
TRANSIENT: tuple[type[ProviderError], ...] = (
    OverloadedError,
    RateLimitError,
    ServerError,
    NetworkError,
)


class FallbackError(ProviderError):
    """Every model of a :class:`FallbackProvider` failed; ``errors`` holds each failure."""

    def __init__(self, errors: Sequence[tuple[str, ProviderError]]) -> None:
        self.errors = tuple(errors)
        described = "; ".join(f"{name}: {error}" for name, error in self.errors)
        last = self.errors[-1][1]
        super().__init__(
            f"every model failed: {described}", status=last.status, retry_after=last.retry_after
        )


def _name(provider: object) -> str:
    """The model's id (a ModelConfig's ``id``, or a plain ``model`` string), else the class."""
    model = getattr(provider, "model", None)
    name = model if isinstance(model, str) else getattr(model, "id", None)
    return name if isinstance(name, str) and name else type(provider).__name__


class FallbackProvider:
    """Ask each provider in turn until one answers.

    A provider's failure (after its own retries) moves on to the next one when
    it is one of ``fall_back_on`` (default: overloaded, rate-limited, a server
    error, a network error or timeout); any other failure (a bad request, a
    refused key) is raised at once, since another model would most likely fail
    the same way. If part of a reply had streamed before the failure, a
    :class:`~agentloop.StreamRestart` is emitted first: the loop drops the
    part, so nothing of it enters the history. The message that comes back
    names the model that answered (``model``, ``provider``), as do its events.

    ``async with`` closes every provider that can be closed.

    Raises:
        FallbackError: every provider failed; it holds each failure, in order.
        ProviderError: a failure that is not one of ``fall_back_on``.
        ValueError: no providers.

    Cancellation: the provider being asked is cancelled; the next is not asked.

    >>> from agentloop.providers import ScriptedProvider, reply
    >>> model = FallbackProvider(ScriptedProvider([reply("hi")]))
    >>> model.providers[0].remaining
    1
    """

    def __init__(
        self, *providers: Provider, fall_back_on: tuple[type[ProviderError], ...] = TRANSIENT
    ) -> None:
        if not providers:
            raise ValueError("FallbackProvider needs at least one provider")
        self.providers: tuple[Provider, ...] = providers
        self.fall_back_on = fall_back_on

    def __repr__(self) -> str:
        names = ", ".join(_name(provider) for provider in self.providers)
        return f"FallbackProvider({names})"

    @property
    def model(self) -> Any:
        """The model config with the smallest context window among the providers' (or None).

        Compaction works against it, so the conversation fits whichever model answers.
        """
        sized: list[tuple[int, Any]] = []
        for provider in self.providers:
            model = getattr(provider, "model", None)
            window = getattr(model, "context_window", None)
            if isinstance(window, int) and not isinstance(window, bool):
                sized.append((window, model))
        return min(sized, key=lambda pair: pair[0])[1] if sized else None

    async def stream(self, request: ModelRequest, emit: Emit) -> AssistantMessage:
        """Stream the reply of the first provider that answers; see the class docstring."""
        failures: list[tuple[str, ProviderError]] = []
        for position, provider in enumerate(self.providers):
            streamed = False

            async def relay(delta: StreamDelta) -> None:
                nonlocal streamed
                streamed = not isinstance(delta, StreamRestart)
                await emit(delta)

            try:
                return await provider.stream(request, relay)
            except self.fall_back_on as error:
                failures.append((_name(provider), error))
                if position == len(self.providers) - 1:
                    break
                log.warning(
                    "%s failed (%s: %s); asking %s",
                    _name(provider),
                    type(error).__name__,
                    error,
                    _name(self.providers[position + 1]),
                )
                if streamed:
                    await emit(
                        StreamRestart(
                            attempt=position + 2,
                            delay=0.0,
                            error=f"{_name(provider)} failed ({error}); "
                            f"asking {_name(self.providers[position + 1])}",
                        )
                    )
        raise FallbackError(failures)

    async def aclose(self) -> None:
        """Close every provider that has an ``aclose``."""
        for provider in self.providers:
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()

    async def __aenter__(self) -> FallbackProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
