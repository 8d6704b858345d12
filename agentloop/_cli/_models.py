"""Choosing the model: ``--model provider[:model]``, or by the API keys that are set."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from .._errors import AgentloopError
from .._secrets import redact_url
from .._text import loads
from .._types import AssistantMessage, ThinkingContent
from ..providers import (
    DEFAULT_ANTHROPIC_URL,
    DEFAULT_OPENAI_URL,
    AnthropicProvider,
    Emit,
    ModelConfig,
    ModelRequest,
    OpenAIProvider,
    OpenAIResponsesProvider,
    Provider,
    ProviderError,
    ScriptedBlock,
    ScriptedProvider,
    ScriptedTurn,
    base_url_from_env,
    call,
    reply,
)
from ._args import Options
from ._demo import demo_provider, make_project

__all__ = [
    "DEMO_NOTE",
    "ModelChoice",
    "ModelError",
    "ScriptEnd",
    "choose_model",
    "demo_workspace",
    "load_script",
]

DEMO_NOTE = "agentloop: using the offline demo model (no ANTHROPIC_API_KEY or OPENAI_API_KEY set)."
_PROVIDERS = ("anthropic", "openai", "openai-responses", "demo", "scripted")
_TURN_KEYS = frozenset({"text", "thinking", "calls", "delay"})
_CALL_KEYS = frozenset({"name", "args", "id"})


class ModelError(AgentloopError, ValueError):
    """The model asked for cannot be used; the message says why, for the user."""


@attrs.frozen(kw_only=True)
class ModelChoice:
    """The model to run, and how to speak of it.

    Attributes:
        provider: The model.
        label: Short and stable, for session files: ``"anthropic:claude-sonnet-5"``.
            A server's URL in it has its credentials redacted (it is shown, and
            written to the session file and the JSON output).
        note: The line that tells the user which model is used (URLs redacted too).
        demo: The offline demo model (see :func:`demo_workspace`).
        base_url_env: The variable that moved the API's root, and its value
            (``("ANTHROPIC_BASE_URL", "http://127.0.0.1:8080")``, credentials
            redacted), if one did.
    """

    provider: Provider
    label: str
    note: str
    demo: bool = False
    base_url_env: tuple[str, str] | None = None


class ScriptEnd:
    """A scripted model that says so when its script is used up, instead of crashing.

    Each request past the end fails with a :class:`ProviderError` (the run ends
    with that error message), or, with ``restart``, the script starts over.
    """

    def __init__(
        self,
        provider: ScriptedProvider,
        what: str,
        *,
        restart: Callable[[], ScriptedProvider] | None = None,
    ) -> None:
        self.provider = provider
        self.what = what
        self.restart = restart

    def __repr__(self) -> str:
        return f"ScriptEnd({self.what!r})"

    async def stream(self, request: ModelRequest, emit: Emit) -> AssistantMessage:
        """Play the next turn of the script; see the class docstring."""
        if self.provider.remaining == 0:
            if self.restart is None:
                played = len(self.provider.requests)
                raise ProviderError(f"{self.what} has no turn left (all {played} played)")
            self.provider = self.restart()
        return await self.provider.stream(request, emit)


def _fail(path: Path, where: str, problem: str) -> ModelError:
    return ModelError(f"the script {path}: {where}: {problem}")


def _call_of(path: Path, where: str, data: Any) -> ScriptedBlock:
    if not isinstance(data, dict):
        raise _fail(path, where, f"a call is an object, got {json.dumps(data)}")
    unknown = sorted(set(data) - _CALL_KEYS)
    if unknown:
        raise _fail(path, where, f"unknown key {unknown[0]!r} (a call has name, args, id)")
    name, args, call_id = data.get("name"), data.get("args", {}), data.get("id")
    if not isinstance(name, str) or not name:
        raise _fail(path, where, "a call needs a 'name' string")
    if not isinstance(args, dict):
        raise _fail(path, where, "'args' is an object")
    if call_id is not None and not isinstance(call_id, str):
        raise _fail(path, where, "'id' is a string")
    return call(name, args, id=call_id)


def _turn_of(path: Path, number: int, data: Any) -> ScriptedTurn:
    where = f"turn {number}"
    if not isinstance(data, dict):
        raise _fail(path, where, f"a turn is an object, got {json.dumps(data)}")
    unknown = sorted(set(data) - _TURN_KEYS)
    if unknown:
        raise _fail(
            path, where, f"unknown key {unknown[0]!r} (a turn has {', '.join(sorted(_TURN_KEYS))})"
        )
    blocks: list[ScriptedBlock] = []
    thinking, text, calls, delay = (data.get(k) for k in ("thinking", "text", "calls", "delay"))
    if thinking is not None:
        if not isinstance(thinking, str):
            raise _fail(path, where, "'thinking' is a string")
        blocks.append(ThinkingContent(thinking))
    if text is not None:
        if not isinstance(text, str):
            raise _fail(path, where, "'text' is a string")
        blocks.append(text)
    if calls is not None:
        if not isinstance(calls, list):
            raise _fail(path, where, "'calls' is a list")
        blocks += [_call_of(path, f"{where}, call {i}", c) for i, c in enumerate(calls, 1)]
    if delay is not None and (
        isinstance(delay, bool)
        or not isinstance(delay, int | float)
        or not math.isfinite(delay)
        or delay < 0
    ):
        raise _fail(path, where, "'delay' is a number of seconds >= 0")
    return reply(*blocks, delay=None if delay is None else float(delay))


def load_script(path: str | Path) -> list[ScriptedTurn]:
    """The turns of a JSON script file.

    The file holds a list of turns, each an object with any of ``text``,
    ``thinking``, ``calls`` (a list of ``{"name": ..., "args": {...}}``) and
    ``delay`` (seconds to wait before the turn streams). A turn streams its
    thinking, then its text, then its calls.

    Raises:
        ModelError: the file cannot be read, is not JSON, or is not such a list.
    """
    path = Path(path)
    try:
        data = loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ModelError(f"cannot read the script {path}: {error.strerror or error}") from error
    except ValueError as error:
        raise ModelError(f"the script {path} is not JSON: {error}") from error
    if not isinstance(data, list):
        raise ModelError(f"the script {path}: expected a list of turns")
    return [_turn_of(path, number, turn) for number, turn in enumerate(data, 1)]


def scripted_provider(path: str | Path, *, delta_delay: float = 0.02) -> ScriptEnd:
    """A model that plays the script at ``path`` (see :func:`load_script`), streaming visibly."""
    path = Path(path)
    provider = ScriptedProvider(load_script(path), delta_delay=delta_delay, model=path.name)
    return ScriptEnd(provider, f"the script {path}")


def _key(environ: Mapping[str, str], name: str, spec: str) -> str:
    key = environ.get(name)
    if not key:
        raise ModelError(
            f"--model {spec} needs an API key: set {name} (or name another variable with "
            "--api-key-env)"
        )
    return key


def _env_url(environ: Mapping[str, str], variable: str, default: str) -> tuple[str, str] | None:
    """``(variable, URL)`` when ``variable`` names another root than the API's own."""
    url = base_url_from_env(variable, default, environ)
    return None if url == default else (variable, redact_url(url))


def _at(moved: tuple[str, str] | None) -> str:
    return "" if moved is None else f" at {moved[1]} ({moved[0]})"


def choose_model(
    environ: Mapping[str, str],
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    paced: bool = False,
) -> ModelChoice:
    """The model the options and the environment ask for.

    ``model`` is ``anthropic[:MODEL]``, ``openai[:MODEL]`` (with ``base_url``:
    any OpenAI-compatible server), ``openai-responses[:MODEL]`` (OpenAI's
    Responses API), ``demo`` or ``scripted:FILE``. ``ANTHROPIC_BASE_URL`` and
    ``OPENAI_BASE_URL`` in ``environ`` move the API's root, as the official
    SDKs do (``base_url`` wins over them). Without ``model``:
    Anthropic if ``ANTHROPIC_API_KEY`` is set, else OpenAI if
    ``OPENAI_API_KEY`` is set, else the offline demo. API keys are read from
    ``environ`` (``api_key_env`` names another variable). ``paced`` makes the
    demo stream like a real model (for people watching, not pipes).

    Raises:
        ModelError: an unknown provider, a missing key, or a bad script.
    """
    if model is None:
        if base_url is not None:
            raise ModelError("--base-url needs --model openai:MODEL")
        if api_key_env is not None:
            raise ModelError(
                "--api-key-env needs --model anthropic[:MODEL], openai[:MODEL] or "
                "openai-responses[:MODEL]"
            )
        if environ.get("ANTHROPIC_API_KEY"):
            return choose_model(environ, model="anthropic")
        if environ.get("OPENAI_API_KEY"):
            return choose_model(environ, model="openai")
        return _demo(DEMO_NOTE, paced)
    name, _, model_id = model.partition(":")
    if name not in _PROVIDERS:
        raise ModelError(
            f"unknown model provider {name!r} in --model {model} "
            "(use anthropic[:MODEL], openai[:MODEL], openai-responses[:MODEL], demo or "
            "scripted:FILE)"
        )
    if base_url is not None and name != "openai":
        raise ModelError("--base-url works with --model openai:MODEL only")
    if name == "demo":
        return _demo("agentloop: using the offline demo model.", paced)
    if name == "scripted":
        if not model_id:
            raise ModelError("--model scripted:FILE needs the script's path")
        return ModelChoice(
            provider=scripted_provider(model_id),
            label=f"scripted:{model_id}",
            note=f"agentloop: using the scripted model {model_id}.",
        )
    if name == "anthropic":
        anthropic_id = model_id or ModelConfig.anthropic().id
        key = _key(environ, api_key_env or "ANTHROPIC_API_KEY", model)
        moved = _env_url(environ, "ANTHROPIC_BASE_URL", DEFAULT_ANTHROPIC_URL)
        url = base_url_from_env("ANTHROPIC_BASE_URL", DEFAULT_ANTHROPIC_URL, environ)
        anthropic = AnthropicProvider(
            ModelConfig.anthropic(anthropic_id, api_key=key, base_url=url)
        )
        return ModelChoice(
            provider=anthropic,
            label=f"anthropic:{anthropic_id}",
            note=f"agentloop: using Anthropic model {anthropic_id}{_at(moved)}.",
            base_url_env=moved,
        )
    moved = _env_url(environ, "OPENAI_BASE_URL", DEFAULT_OPENAI_URL)
    url = base_url_from_env("OPENAI_BASE_URL", DEFAULT_OPENAI_URL, environ)
    if name == "openai-responses":
        responses_id = model_id or ModelConfig.openai_responses().id
        key = _key(environ, api_key_env or "OPENAI_API_KEY", model)
        config = ModelConfig.openai_responses(responses_id, api_key=key, base_url=url)
        return ModelChoice(
            provider=OpenAIResponsesProvider(config),
            label=f"openai-responses:{responses_id}",
            note=f"agentloop: using OpenAI model {responses_id} (Responses API){_at(moved)}.",
            base_url_env=moved,
        )
    if base_url is None:
        openai_id = model_id or ModelConfig.openai().id
        key = _key(environ, api_key_env or "OPENAI_API_KEY", model)
        openai = OpenAIProvider(ModelConfig.openai(openai_id, api_key=key, base_url=url))
        return ModelChoice(
            provider=openai,
            label=f"openai:{openai_id}",
            note=f"agentloop: using OpenAI model {openai_id}{_at(moved)}.",
            base_url_env=moved,
        )
    if not model_id:
        raise ModelError("--base-url needs --model openai:MODEL (the model's name on that server)")
    # A local server needs no key: send one only if asked to, or if OPENAI_API_KEY is set.
    key_value = (
        _key(environ, api_key_env, model) if api_key_env else environ.get("OPENAI_API_KEY") or None
    )
    config = ModelConfig.openai_compatible(model_id, base_url, api_key=key_value)
    shown = redact_url(config.base_url)
    return ModelChoice(
        provider=OpenAIProvider(config),
        label=f"openai:{model_id}@{shown}",
        note=f"agentloop: using model {model_id} at {shown}.",
    )


def _demo(note: str, paced: bool) -> ModelChoice:
    return ModelChoice(
        provider=ScriptEnd(
            demo_provider(paced=paced),
            "the offline demo model",
            restart=lambda: demo_provider(paced=paced),
        ),
        label="demo",
        note=note,
        demo=True,
    )


def demo_workspace(options: Options, choice: ModelChoice) -> tuple[Options, ModelChoice]:
    """Where the model works: the offline demo on a scratch project of its own.

    A new session of the demo model works in a new temporary directory holding
    the demo's project, never in the user's; the note says where. Resuming a
    session, or listing them, stays in the directory asked for.

    Raises:
        ModelError: the scratch project cannot be written.
    """
    if not choice.demo or options.resume is not None or options.sessions:
        return options, choice
    try:
        directory = make_project()
    except OSError as error:
        raise ModelError(f"cannot write the demo's scratch project: {error}") from error
    why = " (no ANTHROPIC_API_KEY or OPENAI_API_KEY set)" if options.model is None else ""
    note = (
        f"agentloop: offline demo{why}: a scripted model works on a scratch project in "
        f"{directory}; nothing of yours is touched."
    )
    return attrs.evolve(options, directory=directory), attrs.evolve(choice, note=note)
