"""ModelConfig: which model, where, with what key, limits, prices and wire quirks."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from .._provider import ThinkingLevel as ThinkingLevel
from .._types import Usage

__all__ = [
    "DEFAULT_ANTHROPIC_URL",
    "DEFAULT_OPENAI_URL",
    "PRICES_AS_OF",
    "Compat",
    "ModelConfig",
    "ModelCost",
    "Secret",
    "ThinkingLevel",
    "base_url_from_env",
]

#: When the preset prices below were read off the providers' pricing pages.
PRICES_AS_OF = "2026-11"


class Secret:
    """A string that does not show itself: ``repr`` and ``str`` give ``***``.

    >>> Secret("sk-live-123")
    Secret('***')
    >>> Secret("sk-live-123").reveal()
    'sk-live-123'
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself. Send it; never log it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def _secret(value: str | Secret | None) -> Secret | None:
    if value is None or isinstance(value, Secret):
        return value
    return Secret(value)


@attrs.frozen
class ModelCost:
    """Prices in US dollars per million tokens. All zero means unknown.

    >>> ModelCost(input=3.0, output=15.0).of(Usage(input=1_000_000, output=2_000))
    3.03
    """

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    def of(self, usage: Usage) -> float:
        """The cost of ``usage``, in US dollars."""
        return (
            usage.input * self.input
            + usage.output * self.output
            + usage.cache_read * self.cache_read
            + usage.cache_write * self.cache_write
        ) / 1_000_000


@attrs.frozen(kw_only=True)
class Compat:
    """What a model's API accepts, where providers differ.

    Anthropic Messages:
        thinking: ``"adaptive"`` (``thinking: {type: adaptive}`` with an
            effort), ``"budget"`` (``thinking: {type: enabled, budget_tokens}``,
            older models), or ``"none"`` (never send thinking).
        effort: Send ``output_config.effort`` for the thinking level.
        prompt_caching: Mark the system prompt, tools and recent turns for caching.
        cache_ttl: How long the marked prefix stays cached: ``"5m"`` (the
            default, refreshed by each hit) or ``"1h"`` (writes cost more; for
            runs whose turns come minutes apart: long tools, a person approving).

    OpenAI Chat Completions (and compatible servers):
        system_role: ``"system"``, or ``"developer"`` for OpenAI's reasoning models.
        max_tokens_field: ``"max_tokens"``, or ``"max_completion_tokens"`` (OpenAI).
        reasoning_effort: Send ``reasoning_effort`` for the thinking level.
        minimal_effort: The server knows ``"minimal"`` (else ``"low"`` is sent).
        stream_usage: Ask for usage in the last chunk (``stream_options``).
        tool_result_name: Put the tool's ``name`` on ``tool`` messages.

    OpenAI Responses:
        reasoning_effort: The model reasons: send ``reasoning`` (effort and
            summary) for the thinking level, and, when the provider does not
            store responses, ask for the reasoning's ``encrypted_content``
            (which models that cannot reason refuse).
        minimal_effort: As for Chat Completions.
    """

    thinking: Literal["adaptive", "budget", "none"] = "adaptive"
    effort: bool = True
    prompt_caching: bool = True
    cache_ttl: Literal["5m", "1h"] = attrs.field(
        default="5m", validator=attrs.validators.in_(("5m", "1h"))
    )
    system_role: Literal["system", "developer"] = "system"
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    reasoning_effort: bool = False
    minimal_effort: bool = True
    stream_usage: bool = True
    tool_result_name: bool = False


#: The official APIs' roots, used when neither an argument nor the environment names one.
DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com"
DEFAULT_OPENAI_URL = "https://api.openai.com/v1"


def base_url_from_env(variable: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    """The API root named by ``variable`` (``ANTHROPIC_BASE_URL``...), else ``default``.

    As the official SDKs read it: the value is the root that the API's paths
    follow (``/v1/messages`` for Anthropic, ``/chat/completions`` for OpenAI,
    whose root ends in ``/v1``), a trailing ``/`` makes no difference, and it
    is read when the config is made, not when agentloop is imported. One
    difference: an empty value counts as unset (the SDKs would send every
    request to a relative URL, and fail).

    >>> base_url_from_env("ANTHROPIC_BASE_URL", DEFAULT_ANTHROPIC_URL, {})
    'https://api.anthropic.com'
    >>> gateway = {"ANTHROPIC_BASE_URL": "http://gw:8080/"}
    >>> base_url_from_env("ANTHROPIC_BASE_URL", DEFAULT_ANTHROPIC_URL, gateway)
    'http://gw:8080'
    """
    value = (os.environ if environ is None else environ).get(variable)
    if not value:
        return default
    return value.rstrip("/") or value


def _headers_repr(headers: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{name!r}: '***'" for name in headers) + "}"


def _url_repr(url: str) -> str:
    from .._secrets import redact_url  # the regular expressions load when first needed

    return repr(redact_url(url))


@attrs.frozen(kw_only=True)
class ModelConfig:
    """A model and how to reach it.

    Build one with :meth:`anthropic`, :meth:`openai`, :meth:`openai_responses`
    or :meth:`openai_compatible`, which know the common models' limits and
    prices::

        config = ModelConfig.anthropic("claude-sonnet-5")
        local = ModelConfig.openai_compatible("qwen3:32b", "http://localhost:11434/v1")

    The API key comes from ``api_key``, else from the environment variable
    ``api_key_env`` (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``...) when the
    request is made. It is held as a :class:`Secret` and never appears in a
    ``repr``, an event, a log line or an error message. Header values, and the
    credentials in ``base_url`` (a password, ``?key=``...), are hidden from
    ``repr`` too.

    Attributes:
        id: The model id the API expects.
        api: The wire format: ``"anthropic"`` (Messages), ``"openai"``
            (Chat Completions) or ``"openai-responses"`` (OpenAI's Responses API).
        provider: Who serves it (``"anthropic"``, ``"openai"``, ``"ollama"``...),
            put on the messages it produces.
        base_url: The API's root: ``https://api.anthropic.com``,
            ``https://api.openai.com/v1``...
        context_window, max_tokens: The model's limits, in tokens; ``max_tokens``
            is the default output limit of a request.
        cost: Prices per million tokens; a message's ``usage.cost`` is computed
            from them (``0.0`` when unknown).
        headers: Extra HTTP headers for every request.
        compat: The API's quirks.
    """

    id: str
    api: Literal["anthropic", "openai", "openai-responses"]
    provider: str
    base_url: str = attrs.field(repr=_url_repr)
    api_key: Secret | None = attrs.field(default=None, converter=_secret)
    api_key_env: str | None = None
    requires_api_key: bool = True
    context_window: int = 200_000
    max_tokens: int = 8192
    cost: ModelCost = ModelCost()
    headers: Mapping[str, str] = attrs.field(factory=dict, repr=_headers_repr)
    compat: Compat = Compat()

    def resolve_api_key(self) -> str | None:
        """The key to send: ``api_key``, else the ``api_key_env`` variable, else None."""
        if self.api_key is not None:
            return self.api_key.reveal()
        if self.api_key_env:
            return os.environ.get(self.api_key_env) or None
        return None

    # ----------------------------------------------------------------- presets

    @classmethod
    def anthropic(
        cls, id: str = "claude-sonnet-5", *, api_key: str | Secret | None = None, **changes: Any
    ) -> ModelConfig:
        """A Claude model on Anthropic's API; known ids get their limits and prices.

        Unknown ids are allowed (new models): they get a 200K window, 32K output,
        no prices, and adaptive thinking unless the id looks like a pre-4.6 model.
        The API's root is ``base_url=`` when given, else ``ANTHROPIC_BASE_URL``
        when set (read now; see :func:`base_url_from_env`), else
        ``https://api.anthropic.com``.
        """
        preset = _ANTHROPIC.get(id)
        if preset is None:
            old = any(marker in id for marker in ("claude-3", "-4-0", "-4-1", "-4-5", "-4-2025"))
            preset = {
                "context_window": 200_000,
                "max_tokens": 32_000,
                "compat": Compat(thinking="budget", effort=False) if old else Compat(),
            }
        config = cls(
            id=id,
            api="anthropic",
            provider="anthropic",
            base_url=base_url_from_env("ANTHROPIC_BASE_URL", DEFAULT_ANTHROPIC_URL),
            api_key=api_key,
            api_key_env="ANTHROPIC_API_KEY",
            **preset,
        )
        return attrs.evolve(config, **changes)

    @classmethod
    def openai(
        cls, id: str = "gpt-5.4", *, api_key: str | Secret | None = None, **changes: Any
    ) -> ModelConfig:
        """A model on OpenAI's API; known ids get their limits and prices.

        OpenAI's own API gets the ``developer`` role, ``max_completion_tokens``
        and ``reasoning_effort``. The API's root is ``base_url=`` when given,
        else ``OPENAI_BASE_URL`` when set (read now; see
        :func:`base_url_from_env`), else ``https://api.openai.com/v1``.
        """
        preset = _OPENAI.get(id, {"context_window": 128_000, "max_tokens": 16_384})
        config = cls(
            id=id,
            api="openai",
            provider="openai",
            base_url=base_url_from_env("OPENAI_BASE_URL", DEFAULT_OPENAI_URL),
            api_key=api_key,
            api_key_env="OPENAI_API_KEY",
            compat=Compat(
                system_role="developer",
                max_tokens_field="max_completion_tokens",
                reasoning_effort=True,
            ),
            **preset,
        )
        return attrs.evolve(config, **changes)

    @classmethod
    def openai_responses(
        cls, id: str = "gpt-5.4", *, api_key: str | Secret | None = None, **changes: Any
    ) -> ModelConfig:
        """A model on OpenAI's Responses API (``POST /v1/responses``).

        Known ids get the limits and prices of :meth:`openai`. The model is taken
        to reason (``compat.reasoning_effort``) unless its id names one that
        cannot (``gpt-4...``, ``gpt-3.5...``, ``chatgpt-...``, ``...-chat...``):
        a model that cannot reason refuses the reasoning fields. Another server
        that speaks the Responses API is a ``base_url=`` (and ``provider=``) away;
        without one, ``OPENAI_BASE_URL`` is honoured as by :meth:`openai`.
        """
        config = cls.openai(id, api_key=api_key)  # the same server, limits and prices
        return attrs.evolve(
            config, api="openai-responses", compat=Compat(reasoning_effort=_reasons(id)), **changes
        )

    @classmethod
    def openai_compatible(
        cls,
        id: str,
        base_url: str,
        *,
        provider: str = "openai-compatible",
        api_key: str | Secret | None = None,
        api_key_env: str | None = None,
        **changes: Any,
    ) -> ModelConfig:
        """A model behind any server that speaks Chat Completions.

        Ollama, vLLM, llama.cpp's server, LiteLLM, OpenRouter, Groq... No API key
        is required unless ``api_key`` or ``api_key_env`` is given.
        """
        config = cls(
            id=id,
            api="openai",
            provider=provider,
            base_url=base_url.rstrip("/"),
            api_key=api_key,
            api_key_env=api_key_env,
            requires_api_key=api_key is not None or api_key_env is not None,
            context_window=128_000,
            max_tokens=8192,
        )
        return attrs.evolve(config, **changes)


def _reasons(id: str) -> bool:
    """Whether an OpenAI model id names a model that reasons (the ``o`` series, GPT-5...)."""
    name = id.rpartition("/")[2].lower()
    return not (name.startswith(("gpt-4", "gpt-3.5", "chatgpt-")) or "-chat" in name)


def _claude(
    context_window: int, max_tokens: int, input: float, output: float, *, thinking: str
) -> dict[str, Any]:
    return {
        "context_window": context_window,
        "max_tokens": max_tokens,
        "cost": ModelCost(input, output, cache_read=input / 10, cache_write=input * 1.25),
        "compat": Compat(thinking=thinking, effort=thinking == "adaptive"),  # type: ignore[arg-type]
    }


def _gpt(input: float, cached: float, output: float) -> dict[str, Any]:
    return {
        "context_window": 1_000_000,
        "max_tokens": 128_000,
        "cost": ModelCost(input, output, cache_read=cached),
    }


# Read off Anthropic's models overview and OpenAI's pricing page (see PRICES_AS_OF).
_ANTHROPIC: dict[str, dict[str, Any]] = {
    "claude-fable-5": _claude(1_000_000, 128_000, 10.0, 50.0, thinking="adaptive"),
    "claude-opus-5": _claude(1_000_000, 128_000, 5.0, 25.0, thinking="adaptive"),
    "claude-sonnet-5": _claude(1_000_000, 128_000, 2.0, 10.0, thinking="adaptive"),
    "claude-sonnet-4-6": _claude(1_000_000, 64_000, 3.0, 15.0, thinking="adaptive"),
    "claude-haiku-4-5": _claude(200_000, 64_000, 1.0, 5.0, thinking="budget"),
}
_OPENAI: dict[str, dict[str, Any]] = {
    "gpt-5.5": _gpt(5.0, 0.50, 30.0),
    "gpt-5.4": _gpt(2.50, 0.25, 15.0),
    "gpt-5.4-mini": _gpt(0.75, 0.075, 4.50),
    "gpt-5.4-nano": _gpt(0.20, 0.02, 1.25),
}
