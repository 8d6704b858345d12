"""What a project's settings would allow beyond the user's own: the part that needs trust.

A project's ``.agentloop/settings.toml`` comes with the repository, so whoever
wrote it is not the user. What in it only narrows what the agent may do applies
in every folder; what widens it applies only in a folder the user trusted
(see ``_trust``). :func:`review_project` splits a project's file in two:

- narrowing: ``deny`` and ``ask`` rules (they add to the user's), a ``default``
  or ``sandboxed`` answer no more lenient than the user's, ``[sandbox]
  enabled = true``, ``network = false``, ``read = "restricted"`` (or a list of
  paths, where everything was readable), ``write`` paths the user's settings
  already let commands write, an ``allow`` list the user's already holds, and
  ``output_format`` (it only changes how the run is shown);
- widening: everything else: ``allow`` rules, a more lenient ``default`` or
  ``sandboxed``, ``mcp_servers`` (they run commands, or connect somewhere),
  ``model``, ``base_url`` and ``api_key_env`` (they choose where the user's key
  goes), more readable or writable paths, ``network = true``, ``enabled =
  false``, ``read = "all"``.

A key the command line overrides (``--model``, ``--mcp-config``; ``--sandbox``
and ``--auto`` for ``enabled``, ``--auto`` for ``sandboxed``) changes nothing
and is not asked about. A value equal to the user's widens nothing either.
Paths are compared after following links, so a link in the project to a place
outside counts as that place.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from .._visible import visible_line
from ._settings import FLAG_SANDBOX_DEFAULTS, McpFile, inside

__all__ = ["ProjectReview", "Widening", "review_project"]

_RANK = {"deny": 0, "ask": 1, "allow": 2}
_MODEL_KEYS = ("model", "base_url", "api_key_env")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@attrs.frozen(kw_only=True)
class Widening:
    """One thing a project's settings would let the agent do that the user's do not.

    Attributes:
        key: Where it is in the file: ``"permissions.allow"``, ``"mcp_servers.NAME"``,
            ``"model"``, ``"sandbox.write"``...
        text: What it is, short, for a warning: ``"allow bash(*)"``.
        effect: What it would do, for the trust question (may be empty).
    """

    key: str
    text: str
    effect: str = ""

    @property
    def line(self) -> str:
        """``text``, then ``effect``: a line of the trust question."""
        return f"{self.text}: {self.effect}" if self.effect else self.text


@attrs.frozen(kw_only=True)
class ProjectReview:
    """A project's settings, split.

    Attributes:
        narrowing: The part of the project's data that applies in a folder that
            is not trusted (as ``read_settings`` gives it, keys left out).
        widening: What the rest would allow, in the file's order.
    """

    narrowing: Mapping[str, Any]
    widening: tuple[Widening, ...]


def _shown(path: str | os.PathLike[str]) -> str:
    """A path as the user knows it: under the home directory, ``~/...``."""
    text = os.fspath(path)
    home = os.path.expanduser("~")
    if home not in ("", "/", "~") and (text == home or text.startswith(home + os.sep)):
        text = "~" + text[len(home) :]
    return text


def _item(key: str, text: str, effect: str = "") -> Widening:
    return Widening(key=key, text=visible_line(text), effect=visible_line(effect))


def review_project(
    user: Mapping[str, Any] | None,
    project: Mapping[str, Any],
    *,
    root: Path,
    sandbox_flag: Literal["on", "auto"] | None = None,
    model_flag: bool = False,
    mcp_flag: bool = False,
    any_run: bool = False,
) -> ProjectReview:
    """Split ``project``'s settings data into what narrows and what widens ``user``'s.

    ``user`` and ``project`` are as ``read_settings`` gives them (``project``'s
    ``mcp_servers`` file read, see ``McpFile``); ``root`` is the agent's
    working directory (what sandboxed commands may always read);
    ``sandbox_flag``, ``model_flag`` and ``mcp_flag`` say which command-line
    options are given (see the module docstring).

    ``any_run``: what the file could widen in any run, whatever the options (as
    the user trusts the file, not one run of it): the sandbox is compared with
    the flags' defaults (:data:`FLAG_SANDBOX_DEFAULTS`), and no option is taken
    to override a key; the flags are ignored.
    """
    if any_run:
        sandbox_flag, model_flag, mcp_flag = None, False, False
    mine = user or {}
    narrowing: dict[str, Any] = {}
    widening: list[Widening] = []
    for key, value in project.items():
        if key == "output_format":
            narrowing[key] = value
        elif key == "model":
            if model_flag:
                continue
            if all(project.get(k) == mine.get(k) for k in _MODEL_KEYS):
                narrowing.update({k: project[k] for k in _MODEL_KEYS if k in project})
            else:
                widening.append(_model(project))
        elif key == "permissions":
            found, wider = _permissions(mine.get("permissions", {}), value, sandbox_flag)
            if found:
                narrowing[key] = found
            widening += wider
        elif key == "sandbox":
            found, wider = _sandbox(mine.get("sandbox", {}), value, root, sandbox_flag, any_run)
            if found:
                narrowing[key] = found
            widening += wider
        elif key == "mcp_servers":
            if mcp_flag:
                continue
            wider = _mcp_servers(mine.get("mcp_servers"), value)
            if wider:
                widening += wider
            else:
                narrowing[key] = value
        elif key not in _MODEL_KEYS:  # nothing else is known to narrow
            widening.append(_item(key, f"{key} = {json.dumps(value, default=str)}"))
    return ProjectReview(narrowing=narrowing, widening=tuple(widening))


def _model(project: Mapping[str, Any]) -> Widening:
    base_url, named = project.get("base_url"), project.get("api_key_env")
    text = f"model {project['model']}"
    text += f" at {base_url}" if base_url else ""
    text += f" with ${named}" if named else ""
    effect = ""
    if base_url and named:
        effect = f"the conversation and the key in ${named} are sent there"
    elif base_url:
        effect = "the conversation (and $OPENAI_API_KEY, if set) is sent there"
    return _item("model", text, effect)


def _permissions(
    mine: Mapping[str, Any],
    theirs: Mapping[str, Any],
    sandbox_flag: Literal["on", "auto"] | None,
) -> tuple[dict[str, Any], list[Widening]]:
    found: dict[str, Any] = {}
    wider: list[Widening] = []
    for key in ("deny", "ask"):  # they add to the user's
        if key in theirs:
            found[key] = theirs[key]
    if "allow" in theirs:
        new = [rule for rule in theirs["allow"] if rule not in mine.get("allow", ())]
        if new:
            effect = "the calls it matches run without asking"
            wider += [_item("permissions.allow", f"allow {rule}", effect) for rule in new]
        else:
            found["allow"] = theirs["allow"]
    default = mine.get("default") or "ask"
    if "default" in theirs:
        if _RANK[theirs["default"]] <= _RANK[default]:
            found["default"] = theirs["default"]
        else:
            wider.append(
                _item(
                    "permissions.default",
                    f'default = "{theirs["default"]}"',
                    f'calls no rule matches get "{theirs["default"]}", not "{default}"',
                )
            )
    if "sandboxed" in theirs and sandbox_flag != "auto":  # --auto says "allow" anyway
        value = theirs["sandboxed"]
        before = mine.get("sandboxed")
        after_default = found.get("default", default)
        if before is not None:
            narrower = _RANK[value] <= _RANK[before]
        else:
            # Setting it takes bash out of the tools that always ask: unsandboxed
            # commands then get the default, so that must not allow either.
            narrower = value != "allow" and after_default != "allow"
        if narrower:
            found["sandboxed"] = value
        else:
            was = before or "ask"
            wider.append(
                _item(
                    "permissions.sandboxed",
                    f'sandboxed = "{value}"',
                    f'sandboxed commands no rule matches get "{value}", not "{was}"',
                )
            )
    return found, wider


def _covered(path: str, places: Iterable[str | os.PathLike[str]]) -> bool:
    return any(inside(path, place) for place in places)


def _sandbox(
    mine: Mapping[str, Any],
    theirs: Mapping[str, Any],
    root: Path,
    sandbox_flag: Literal["on", "auto"] | None,
    any_run: bool,
) -> tuple[dict[str, Any], list[Widening]]:
    base: dict[str, Any] = {"enabled": False, "network": True, "read": "all"}
    if sandbox_flag is not None or any_run:
        base.update(FLAG_SANDBOX_DEFAULTS)
    base.update(mine)
    if sandbox_flag is not None:
        base["enabled"] = True  # whatever the files say
    found: dict[str, Any] = {}
    wider: list[Widening] = []
    if "enabled" in theirs:
        if theirs["enabled"] or not base["enabled"]:
            found["enabled"] = theirs["enabled"]
        elif sandbox_flag is None:  # the flags turn it on whatever the file says
            wider.append(
                _item("sandbox.enabled", "sandbox enabled = false", "commands run without it")
            )
    if "network" in theirs:
        if not theirs["network"] or base["network"]:
            found["network"] = theirs["network"]
        else:
            wider.append(
                _item(
                    "sandbox.network",
                    "sandbox network = true",
                    "sandboxed commands may open network connections",
                )
            )
    if theirs.get("read") == "all" and base["read"] == "restricted":
        wider.append(
            _item(
                "sandbox.read",
                'sandbox read = "all"',
                "sandboxed commands may read every file (your home's too)",
            )
        )
    elif "read" in theirs:
        found["read"] = theirs["read"]
    if "readable" in theirs:
        readable = [root, *base.get("readable", ()), *base.get("write", ())]
        new = [] if base["read"] == "all" else [
            path for path in theirs["readable"] if not _covered(path, readable)
        ]  # fmt: skip
        if new:
            effect = "sandboxed commands may read there"
            wider += [_item("sandbox.read", f"sandbox read {_shown(p)}", effect) for p in new]
        else:
            found["readable"] = theirs["readable"]
    if "write" in theirs:
        writable = base.get("write", ())
        new = [path for path in theirs["write"] if not _covered(path, writable)]
        if new:
            effect = "sandboxed commands may write there"
            wider += [_item("sandbox.write", f"sandbox write {_shown(p)}", effect) for p in new]
        else:
            found["write"] = theirs["write"]
    return found, wider


def _mcp_servers(mine: object, theirs: object) -> list[Widening]:
    """What the project's servers would run; empty: nothing the user's do not."""
    if isinstance(theirs, McpFile):
        config = theirs.config
        servers = config.get("mcpServers") if isinstance(config, Mapping) else None
        if not isinstance(servers, Mapping):
            return [_item("mcp_servers", f"mcp_servers {_shown(theirs.path)}")]
        where = f" (from {_shown(theirs.path)})"
        known: Mapping[str, Any] = {}
    else:
        servers = theirs if isinstance(theirs, Mapping) else {}
        where = ""
        known = mine if isinstance(mine, Mapping) else {}
    wider = []
    for name, entry in servers.items():
        if known.get(name) == entry:
            continue
        if isinstance(entry, Mapping) and entry.get("disabled") is True:
            continue
        wider.append(_item(f"mcp_servers.{name}", f"mcp_servers {name}", _server(entry) + where))
    return wider


def _server(entry: object) -> str:
    """What an ``mcpServers`` entry does: ``runs CMD ARGS`` or ``connects to URL``."""
    if not isinstance(entry, Mapping):
        return f"an MCP server: {json.dumps(entry, default=str)}"
    if "url" in entry:
        what = f"connects to {entry['url']}"
    else:
        args = entry.get("args", [])
        words = [str(entry.get("command", "")), *(args if isinstance(args, list) else [args])]
        what = "runs " + shlex.join(str(word) for word in words)
    variables = sorted(set(_VARIABLE.findall(json.dumps(entry, default=str))))
    if variables:
        what += ", given " + ", ".join(f"${name}" for name in variables)
    return what
