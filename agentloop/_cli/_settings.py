"""Settings files: the user's and the project's, in TOML; the command line overrides both.

The user's file is ``$AGENTLOOP_HOME/settings.toml`` when ``AGENTLOOP_HOME`` is
set, else ``$XDG_CONFIG_HOME/agentloop/settings.toml``, else
``~/.config/agentloop/settings.toml``. The project's is
``.agentloop/settings.toml`` in the project's folder: the top of the repository
(the nearest directory up from the working directory holding ``.git``), else
the working directory. Neither needs to exist.

A key the project's file sets replaces the user's; in the tables
(``[permissions]``, ``[sandbox]``, ``[mcp_servers]``) key by key; but ``deny``
and ``ask`` rules add up: a project never removes the user's. ``model``,
``base_url`` and ``api_key_env`` go together: they come from the file that
names the ``model`` (or from the command line, when ``--model`` is given).

This module reads and merges; which part of a project's file applies (all of
it in a trusted folder, else only what narrows) is decided by ``_trust`` and
``_widening``. A project's file, and the ``mcp_servers`` file it names, are read
only if they really are in the project's folder (not links out of it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from .._errors import AgentloopError
from .._instructions import find_repository_top
from .._text import loads

__all__ = [
    "FLAG_SANDBOX_DEFAULTS",
    "OUTPUT_FORMATS",
    "McpFile",
    "OutputFormat",
    "PermissionSettings",
    "SandboxSettings",
    "Settings",
    "SettingsError",
    "SettingsFiles",
    "inside",
    "merge_settings",
    "read_settings",
    "read_settings_files",
    "sha256",
    "user_settings_path",
]

OutputFormat = Literal["text", "json", "stream-json"]
#: The values of ``output_format`` and ``--output-format``.
OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("text", "json", "stream-json")

_TOP_KEYS = (
    "model",
    "base_url",
    "api_key_env",
    "output_format",
    "permissions",
    "sandbox",
    "mcp_servers",
    "trust",
)
_PERMISSION_KEYS = ("allow", "ask", "deny", "default", "sandboxed")
_SANDBOX_KEYS = ("enabled", "network", "read", "write")
_TRUST_KEYS = ("folders",)

#: What ``--sandbox`` and ``--auto`` change in the sandbox's defaults: under the
#: settings, so that a file that says otherwise (the user's, a trusted project's) wins.
FLAG_SANDBOX_DEFAULTS: Mapping[str, Any] = {"network": False, "read": "restricted"}


class SettingsError(AgentloopError, ValueError):
    """A settings file cannot be used; the message names the file, the key and what is wanted."""


@attrs.frozen(kw_only=True)
class PermissionSettings:
    """The ``[permissions]`` table: rule texts (``"tool"`` or ``"tool(pattern)"``).

    Attributes:
        allow, ask, deny: Rules added to the terminal agent's own.
        default: What happens to a call no rule matches (``"allow"``, ``"ask"``,
            ``"deny"``); None: the agent's default (``"ask"``).
        sandboxed: What happens to a sandboxed command no rule matches
            (``Permissions(sandboxed=...)``); None: as any other command.
    """

    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    default: Literal["allow", "ask", "deny"] | None = None
    sandboxed: Literal["allow", "ask", "deny"] | None = None


@attrs.frozen(kw_only=True)
class SandboxSettings:
    """The ``[sandbox]`` table: where ``bash`` commands may reach.

    The fields are those of the tools' sandbox (``Sandbox(write=, read=,
    readable=, network=)``), plus ``enabled``.

    Attributes:
        enabled: Run commands in the sandbox.
        network: Let sandboxed commands open network connections.
        read: ``"all"`` (every file) or ``"restricted"`` (the working directory,
            the writable paths, the system's directories and ``readable``).
            In the file, a list of paths means ``"restricted"`` plus those.
        readable: More paths commands may read, with ``read = "restricted"``.
        write: More paths commands may write, besides the working directory
            and the temporary one.
    """

    enabled: bool = False
    network: bool = True
    read: Literal["all", "restricted"] = "all"
    readable: tuple[str, ...] = ()
    write: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Settings:
    """The settings of one file, or of the files merged.

    Attributes:
        model: As ``--model``: ``provider[:model]``.
        base_url: As ``--base-url`` (with ``model = "openai:MODEL"``).
        api_key_env: As ``--api-key-env``.
        output_format: As ``--output-format``: ``text``, ``json``, ``stream-json``.
        permissions: The ``[permissions]`` rules.
        sandbox: The ``[sandbox]`` table (over :data:`FLAG_SANDBOX_DEFAULTS`
            with ``--sandbox`` or ``--auto``); None when no file has one and no
            flag turns the sandbox on.
        mcp_servers: As ``--mcp-config``: a file's path (relative to the
            settings file it is in) or the servers as in an ``mcpServers``
            object (``{"mcpServers": {...}}``); a project's file is read with
            the settings, and is that object.
        sources: The files read, in the order they apply (the user's first).
        model_source: The file that named ``model`` (None: no file did).
    """

    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    output_format: OutputFormat | None = None
    permissions: PermissionSettings = attrs.field(factory=PermissionSettings)
    sandbox: SandboxSettings | None = None
    mcp_servers: Path | Mapping[str, Any] | None = None
    sources: tuple[Path, ...] = ()
    model_source: Path | None = None


def user_settings_path(environ: Mapping[str, str]) -> Path:
    """Where the user's settings are (see the module docstring)."""
    home = environ.get("AGENTLOOP_HOME")
    if home:
        return Path(home) / "settings.toml"
    config = environ.get("XDG_CONFIG_HOME")
    base = Path(config) if config else Path(environ.get("HOME") or Path.home()) / ".config"
    return base / "agentloop" / "settings.toml"


def project_folder(directory: Path) -> Path:
    """The project's folder, for an agent working in ``directory``: the top of its
    repository, else ``directory`` itself (resolved). Its settings are in it, and it
    is what the user trusts."""
    top = find_repository_top(directory)
    return top if top is not None else Path(directory).resolve()


def inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is ``folder`` or under it, all links followed (on both)."""
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def sha256(data: bytes) -> str:
    """The SHA-256 of ``data``, as trust records keep it: ``"sha256:<hex>"``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


class _File:
    """One file's data, with errors that name it."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    def error(self, key: str, expected: str, value: object) -> SettingsError:
        return SettingsError(
            f"{self.path}: {key} must be {expected}, not {_type_name(value)} ({value!r})"
        )

    def unknown(self, table: str | None, key: str, known: tuple[str, ...]) -> SettingsError:
        where = f"[{table}] " if table else ""
        return SettingsError(f"{self.path}: unknown key {where}{key!r} (known: {', '.join(known)})")

    def string(self, table: Mapping[str, Any], key: str, name: str) -> str | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.error(name, "a non-empty string", value)
        return value

    def boolean(self, table: Mapping[str, Any], key: str, name: str) -> bool | None:
        value = table.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise self.error(name, "true or false", value)

    def strings(self, table: Mapping[str, Any], key: str, name: str) -> tuple[str, ...] | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(name, "a list of strings", value)
        return tuple(value)

    def table(self, key: str) -> dict[str, Any] | None:
        value = self.data.get(key)
        if value is None or isinstance(value, dict):
            return value
        raise self.error(key, "a table", value)


def read_settings(path: Path) -> dict[str, Any] | None:
    """The checked data of one settings file, as plain values; None if it does not exist.

    The result has only the keys the file sets; rules are checked with the
    permission rules' parser, the output format and the MCP servers' shape too.

    Raises:
        SettingsError: the file cannot be read, is not TOML, or has an unknown
            key or a value of the wrong type.
    """
    raw = _read(path)
    return None if raw is None else parse_settings(path, raw)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise SettingsError(f"cannot read {path}: {error.strerror or error}") from error


def parse_settings(path: Path, raw: bytes) -> dict[str, Any]:
    """The checked data of the settings file ``path`` holding ``raw`` (see :func:`read_settings`).

    Raises:
        SettingsError: as :func:`read_settings`.
    """
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise SettingsError(f"{path} is not UTF-8 text: {error}") from error
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"{path} is not valid TOML: {error}") from error
    file = _File(path, data)
    for key in data:
        if key not in _TOP_KEYS:
            raise file.unknown(None, key, _TOP_KEYS)
    found: dict[str, Any] = {}
    for key in ("model", "base_url", "api_key_env"):
        value = file.string(data, key, key)
        if value is not None:
            found[key] = value
    output = data.get("output_format")
    if output is not None:
        if output not in OUTPUT_FORMATS:
            raise file.error("output_format", '"text", "json" or "stream-json"', output)
        found["output_format"] = output
    if ("base_url" in found or "api_key_env" in found) and "model" not in found:
        key = "base_url" if "base_url" in found else "api_key_env"
        raise SettingsError(
            f"{path}: {key} goes with model (the model it is for), and this file names none"
        )
    model = found.get("model", "")
    provider, _, model_id = model.partition(":")
    if "base_url" in found and (provider != "openai" or not model_id):
        raise SettingsError(
            f'{path}: base_url goes with model = "openai:MODEL" (the model\'s name on that '
            f"server), not model = {model!r}"
        )
    permissions = file.table("permissions")
    if permissions is not None:
        found["permissions"] = _permissions(file, permissions)
    sandbox = file.table("sandbox")
    if sandbox is not None:
        found["sandbox"] = _sandbox(file, sandbox)
    servers = data.get("mcp_servers")
    if servers is not None:
        found["mcp_servers"] = _mcp_servers(file, servers)
    trust = file.table("trust")
    if trust is not None:
        found["trust"] = _trust(file, trust)
    return found


def _trust(file: _File, table: Mapping[str, Any]) -> dict[str, Any]:
    for key in table:
        if key not in _TRUST_KEYS:
            raise file.unknown("trust", key, _TRUST_KEYS)
    folders = file.strings(table, "folders", "trust.folders") or ()
    resolved = []
    for folder in folders:
        path = Path(folder).expanduser()
        if not path.is_absolute():
            raise SettingsError(
                f"{file.path}: trust.folders: {folder!r} is not an absolute path (nor ~/...)"
            )
        resolved.append(Path(os.path.realpath(path)))
    return {"folders": tuple(resolved)}


def _permissions(file: _File, table: Mapping[str, Any]) -> dict[str, Any]:
    from .._tool import PermissionRule

    found: dict[str, Any] = {}
    for key in table:
        if key not in _PERMISSION_KEYS:
            raise file.unknown("permissions", key, _PERMISSION_KEYS)
    for key in ("allow", "ask", "deny"):
        rules = file.strings(table, key, f"permissions.{key}")
        if rules is None:
            continue
        for rule in rules:
            try:
                PermissionRule.parse(key, rule)  # type: ignore[arg-type]
            except ValueError as error:
                raise SettingsError(f"{file.path}: permissions.{key}: {error}") from error
        found[key] = rules
    for key in ("default", "sandboxed"):
        value = table.get(key)
        if value is not None:
            if value not in ("allow", "ask", "deny"):
                raise file.error(f"permissions.{key}", '"allow", "ask" or "deny"', value)
            found[key] = value
    return found


def _sandbox(file: _File, table: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key in table:
        if key not in _SANDBOX_KEYS:
            raise file.unknown("sandbox", key, _SANDBOX_KEYS)
    for key in ("enabled", "network"):
        flag = file.boolean(table, key, f"sandbox.{key}")
        if flag is not None:
            found[key] = flag
    read = table.get("read")
    if read in ("all", "restricted"):
        found["read"] = read
    elif isinstance(read, list) and all(isinstance(path, str) for path in read):
        found["read"] = "restricted"
        found["readable"] = tuple(_resolve(file.path, path) for path in read)
    elif read is not None:
        raise file.error("sandbox.read", '"all", "restricted" or a list of paths', read)
    paths = file.strings(table, "write", "sandbox.write")
    if paths is not None:
        found["write"] = tuple(_resolve(file.path, p) for p in paths)
    return found


def _resolve(settings: Path, path: str) -> str:
    """A path of a settings file: ``~`` expanded, relative to the project or the file."""
    expanded = Path(path).expanduser()
    if expanded.is_absolute():
        return str(expanded)
    base = settings.parent
    if base.name == ".agentloop":  # the project's file: relative to the project
        base = base.parent
    return str(base / expanded)


def _mcp_servers(file: _File, value: object) -> Path | dict[str, Any]:
    if isinstance(value, str):
        if not value.strip():
            raise file.error("mcp_servers", "a file's path or a table of servers", value)
        return Path(_resolve(file.path, value))
    if not isinstance(value, dict):
        raise file.error("mcp_servers", "a file's path or a table of servers", value)
    for name, server in value.items():
        if not isinstance(server, dict):
            raise file.error(f"mcp_servers.{name}", "a table (command and args, or url)", server)
    return dict(value)


@attrs.frozen(kw_only=True)
class McpFile:
    """A project's ``mcp_servers`` file, read with the settings: the servers that run
    are the ones the trust was given for, whatever the file holds later.

    Attributes:
        path: The file.
        config: Its JSON (an ``mcpServers`` object, if well made); None: it
            cannot be read or is not JSON (the agent says so when it uses it).
    """

    path: Path
    config: Any


@attrs.frozen(kw_only=True)
class SettingsFiles:
    """The user's and the project's settings files, read and checked, not merged yet.

    Attributes:
        user_path: Where the user's file is (it need not exist).
        user: Its data (as :func:`read_settings` gives it); None: no file.
        folder: The project's folder (see :func:`project_folder`).
        project_path: Where the project's file is.
        project: Its data; None: no file, or one that is not read (see ``notes``).
            A ``mcp_servers`` path in it is a :class:`McpFile`.
        fingerprints: The project's files the data was read from (the settings
            file, its ``mcp_servers`` file), with their :func:`sha256` (``"absent"``:
            a file that cannot be read).
        notes: What was left out, and why: one line each, for the user.
    """

    user_path: Path
    user: Mapping[str, Any] | None = None
    folder: Path
    project_path: Path
    project: Mapping[str, Any] | None = None
    fingerprints: Mapping[Path, str] = attrs.field(factory=dict)
    notes: tuple[str, ...] = ()


def read_settings_files(directory: Path, environ: Mapping[str, str]) -> SettingsFiles:
    """The user's file and the project's, for an agent working in ``directory``.

    A project's file (or the ``.agentloop`` directory) that is a link to a place
    outside the project's folder is not read, and neither is a ``mcp_servers``
    file outside it: each is a note. The project's ``mcp_servers`` file is read
    now (see :class:`McpFile`).

    Raises:
        SettingsError: a file cannot be used (see :func:`read_settings`), or
            the project's file sets ``trust``.
    """
    user_path = user_settings_path(environ)
    user = read_settings(user_path)
    folder = project_folder(directory)
    path = folder / ".agentloop" / "settings.toml"
    files = SettingsFiles(user_path=user_path, user=user, folder=folder, project_path=path)
    if os.path.realpath(path) == os.path.realpath(user_path) or not path.exists():
        return files
    if not inside(path, folder):
        note = (
            f"agentloop: {path} is not read: it leads to {os.path.realpath(path)}, outside "
            f"the project's folder ({folder})"
        )
        return attrs.evolve(files, notes=(note,))
    raw = _read(path)
    if raw is None:
        return files
    project = parse_settings(path, raw)
    if "trust" in project:
        raise SettingsError(
            f"{path}: trust: a project's settings cannot say which folders are trusted "
            f"(only yours can, in {user_path})"
        )
    fingerprints = {path: sha256(raw)}
    notes: list[str] = []
    servers = project.get("mcp_servers")
    if isinstance(servers, Path):
        del project["mcp_servers"]
        if servers.exists() and not inside(servers, folder):
            notes.append(
                f"agentloop: mcp_servers of {path} is not read: {servers} leads to "
                f"{os.path.realpath(servers)}, outside the project's folder ({folder})"
            )
        else:
            config: Any = None  # unreadable: the agent says why when it connects
            try:
                data = servers.read_bytes()
            except OSError:
                fingerprints[servers] = "absent"
            else:
                fingerprints[servers] = sha256(data)
                with contextlib.suppress(ValueError):  # not UTF-8, not JSON, too deep
                    config = loads(data.decode("utf-8"))
            project["mcp_servers"] = McpFile(path=servers, config=config)
    return attrs.evolve(files, project=project, fingerprints=fingerprints, notes=tuple(notes))


def _merge(lower: dict[str, Any], upper: Mapping[str, Any]) -> dict[str, Any]:
    """``upper`` over ``lower``: tables key by key, other values whole."""
    merged = dict(lower)
    for key, value in upper.items():
        below = merged.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            merged[key] = {**below, **value}
        else:
            merged[key] = value
    return merged


def merge_settings(
    files: SettingsFiles,
    project: Mapping[str, Any] | None,
    *,
    sandbox_flag: Literal["on", "auto"] | None = None,
) -> Settings:
    """The user's settings with ``project`` (the part of the project's that applies) over them.

    ``deny`` and ``ask`` rules add up: the project's join the user's, never
    replace them. With ``sandbox_flag`` (``--sandbox``, ``--auto``), the sandbox
    defaults to :data:`FLAG_SANDBOX_DEFAULTS` where no file says otherwise.
    """
    merged: dict[str, Any] = {}
    model_source: Path | None = None
    layers = ((files.user_path, files.user), (files.project_path, project))
    for path, data in layers:
        if data is None:
            continue
        if "model" in data:  # the model, its server and its key's variable: one choice
            for key in ("model", "base_url", "api_key_env"):
                merged.pop(key, None)
            model_source = path
        merged = _merge(merged, data)
    permissions = dict(merged.get("permissions", {}))
    for key in ("deny", "ask"):
        rules = [
            rule for _, data in layers for rule in (data or {}).get("permissions", {}).get(key, ())
        ]
        if rules:
            permissions[key] = tuple(dict.fromkeys(rules))
    servers = merged.get("mcp_servers")
    if isinstance(servers, McpFile):
        servers = servers.path if servers.config is None else servers.config
    elif isinstance(servers, dict):
        servers = {"mcpServers": servers}
    sandbox = merged.get("sandbox")
    if sandbox_flag is not None:
        sandbox = {**FLAG_SANDBOX_DEFAULTS, **(sandbox or {})}
    sources = tuple(
        path
        for path, data in ((files.user_path, files.user), (files.project_path, files.project))
        if data is not None
    )
    return Settings(
        model=merged.get("model"),
        base_url=merged.get("base_url"),
        api_key_env=merged.get("api_key_env"),
        output_format=merged.get("output_format"),
        permissions=PermissionSettings(**permissions),
        sandbox=None if sandbox is None else SandboxSettings(**sandbox),
        mcp_servers=servers,
        sources=sources,
        model_source=model_source,
    )
