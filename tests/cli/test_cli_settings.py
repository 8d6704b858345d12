"""The terminal agent's settings files: where they are, what they hold, which wins.

The user's file and the project's, in TOML; the project's overrides the user's, the
command line both. The last tests run the real program with settings, and one drives
it in a real terminal (tmux).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_cli import PROMPT, Terminal, terminal  # noqa: F401  (terminal: a fixture)

import agentloop as al
from agentloop._cli import main
from agentloop._cli._args import apply_settings, parse_args
from agentloop._cli._settings import (
    PermissionSettings,
    SandboxSettings,
    Settings,
    SettingsError,
    read_settings,
    read_settings_files,
    user_settings_path,
)
from agentloop._cli._setup import make_permissions
from agentloop._cli._trust import load_settings

MCP_SERVERS = Path(__file__).parent.parent / "mcp_servers.py"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def project(tmp_path: Path) -> Path:
    """A repository with a subdirectory to work in."""
    top = tmp_path / "project"
    (top / ".git").mkdir(parents=True)
    (top / "src").mkdir()
    return top


# --------------------------------------------------------------------------- where


def test_where_the_files_are(tmp_path: Path) -> None:
    """User: $AGENTLOOP_HOME, else $XDG_CONFIG_HOME/agentloop, else ~/.config/agentloop."""
    assert user_settings_path({"AGENTLOOP_HOME": "/a", "XDG_CONFIG_HOME": "/x"}) == Path(
        "/a/settings.toml"
    )
    assert user_settings_path({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}) == Path(
        "/x/agentloop/settings.toml"
    )
    assert user_settings_path({"HOME": "/h"}) == Path("/h/.config/agentloop/settings.toml")
    # Project: at the repository's top, else in the directory itself.
    env = {"AGENTLOOP_HOME": str(tmp_path / "h")}
    top = project(tmp_path)
    assert read_settings_files(top / "src", env).project_path == (
        top / ".agentloop" / "settings.toml"
    )
    loose = tmp_path / "loose"
    loose.mkdir()
    assert read_settings_files(loose, env).project_path == loose / ".agentloop" / "settings.toml"


def test_no_files_no_settings(tmp_path: Path) -> None:
    assert load_settings(tmp_path, {"AGENTLOOP_HOME": str(tmp_path / "h")}, trusted=False) == (
        Settings()
    )


# --------------------------------------------------------------------------- what


def test_every_key(tmp_path: Path) -> None:
    top = project(tmp_path)
    path = write(
        top / ".agentloop" / "settings.toml",
        """
model = "openai:qwen3"
base_url = "http://localhost:11434/v1"
api_key_env = "LOCAL_KEY"
output_format = "stream-json"
mcp_servers = "tools/mcp.json"

[permissions]
allow = ["bash(git status)", "bash(npm test)"]
ask = ["write_file(docs/*)"]
deny = ["bash(rm *)"]
default = "deny"

[sandbox]
enabled = true
network = false
read = ["~/notes", "/opt/data"]
write = ["build"]
""",
    )
    settings = load_settings(top / "src", {"AGENTLOOP_HOME": str(tmp_path / "h")}, trusted=True)
    assert settings == Settings(
        model="openai:qwen3",
        base_url="http://localhost:11434/v1",
        api_key_env="LOCAL_KEY",
        output_format="stream-json",
        permissions=PermissionSettings(
            allow=("bash(git status)", "bash(npm test)"),
            ask=("write_file(docs/*)",),
            deny=("bash(rm *)",),
            default="deny",
        ),
        sandbox=SandboxSettings(
            enabled=True,
            network=False,
            read="restricted",
            readable=(str(Path("~/notes").expanduser()), "/opt/data"),
            write=(str(top / "build"),),
        ),
        mcp_servers=top / "tools" / "mcp.json",  # relative to the project
        sources=(path,),
        model_source=path,
    )


def test_mcp_servers_inline_and_sandbox_read_modes(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.toml",
        """
[mcp_servers.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]

[mcp_servers.search]
url = "https://mcp.example.com/mcp"

[sandbox]
read = "all"
""",
    )
    data = read_settings(path)
    assert data == {
        "mcp_servers": {
            "files": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
            },
            "search": {"url": "https://mcp.example.com/mcp"},
        },
        "sandbox": {"read": "all"},
    }


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('modle = "x"', "unknown key 'modle' (known: model, base_url, api_key_env, "
         "output_format, permissions, sandbox, mcp_servers, trust)"),
        ("model = 3", "model must be a non-empty string, not a number (3)"),
        ('model = ""', "model must be a non-empty string, not a string ('')"),
        ('output_format = "yaml"',
         'output_format must be "text", "json" or "stream-json", not a string (\'yaml\')'),
        ('base_url = "http://h/v1"',
         "base_url goes with model (the model it is for), and this file names none"),
        ('model = "anthropic"\nbase_url = "http://h"',
         "base_url goes with model = \"openai:MODEL\" (the model's name on that server), "
         "not model = 'anthropic'"),
        ('permissions = ["bash"]', "permissions must be a table, not a list (['bash'])"),
        ("[permissions]\nallow = \"bash\"",
         "permissions.allow must be a list of strings, not a string ('bash')"),
        ("[permissions]\nallow = [\"bash(\"]",
         "permissions.allow: not a permission rule: 'bash(' (expected 'tool' or "
         "'tool(pattern)')"),
        ("[permissions]\ndefault = \"maybe\"",
         'permissions.default must be "allow", "ask" or "deny", not a string (\'maybe\')'),
        ("[permissions]\nallways = []",
         "unknown key [permissions] 'allways' (known: allow, ask, deny, default, sandboxed)"),
        ("[sandbox]\nenabled = \"yes\"", "sandbox.enabled must be true or false, not a string "
         "('yes')"),
        ("[sandbox]\nread = 1",
         'sandbox.read must be "all", "restricted" or a list of paths, not a number (1)'),
        ("[sandbox]\nnet = true",
         "unknown key [sandbox] 'net' (known: enabled, network, read, write)"),
        ("mcp_servers = 1", "mcp_servers must be a file's path or a table of servers, not a "
         "number (1)"),
        ("[mcp_servers]\nfiles = \"npx\"",
         "mcp_servers.files must be a table (command and args, or url), not a string ('npx')"),
    ],
)  # fmt: skip
def test_a_bad_file_names_itself_the_key_and_what_is_wanted(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = write(tmp_path / "settings.toml", text)
    with pytest.raises(SettingsError) as error:
        read_settings(path)
    assert str(error.value) == f"{path}: {problem}"


def test_not_toml(tmp_path: Path) -> None:
    path = write(tmp_path / "settings.toml", "model = \n")
    with pytest.raises(SettingsError) as error:
        read_settings(path)
    assert str(error.value).startswith(f"{path} is not valid TOML: ")
    assert read_settings(tmp_path / "none.toml") is None


# --------------------------------------------------------------------------- which wins


def test_the_project_overrides_the_user_key_by_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    user = write(
        home / "settings.toml",
        """
model = "openai:qwen3"
base_url = "http://localhost:11434/v1"
output_format = "json"
[permissions]
allow = ["bash(ls)"]
deny = ["bash(rm *)"]
[mcp_servers.a]
command = "a"
[mcp_servers.b]
command = "b"
""",
    )
    top = project(tmp_path)
    mine = write(
        top / ".agentloop" / "settings.toml",
        """
model = "anthropic:claude-opus-5"
[permissions]
allow = ["bash(npm test)"]
[mcp_servers.b]
command = "b2"
""",
    )
    settings = load_settings(top / "src", {"AGENTLOOP_HOME": str(home)}, trusted=True)
    assert settings.sources == (user, mine)
    # The model comes with its own base_url: the user's does not stick to the project's.
    assert (settings.model, settings.base_url, settings.model_source) == (
        "anthropic:claude-opus-5",
        None,
        mine,
    )
    assert settings.output_format == "json"  # the project says nothing: the user's
    assert settings.permissions == PermissionSettings(
        allow=("bash(npm test)",), deny=("bash(rm *)",)
    )
    assert settings.mcp_servers == {"mcpServers": {"a": {"command": "a"}, "b": {"command": "b2"}}}


def test_flags_override_the_settings(tmp_path: Path) -> None:
    settings = Settings(
        model="openai:qwen3",
        base_url="http://localhost:11434/v1",
        api_key_env="LOCAL_KEY",
        output_format="json",
        mcp_servers=Path("/m.json"),
        permissions=PermissionSettings(allow=("bash(ls)",)),
        sources=(Path("/s.toml"),),
    )
    options = apply_settings(parse_args(["-C", str(tmp_path), "-p", "hi"]), settings)
    assert (options.model, options.base_url, options.api_key_env) == (
        "openai:qwen3",
        "http://localhost:11434/v1",
        "LOCAL_KEY",
    )
    assert (options.format, options.mcp_config, options.settings_sources) == (
        "json",
        Path("/m.json"),
        (Path("/s.toml"),),
    )
    assert options.permissions.allow == ("bash(ls)",)
    flags = parse_args(
        ["-C", str(tmp_path), "-p", "hi", "--model", "anthropic", "--output-format", "text",
         "--mcp-config", "/other.json", "--api-key-env", "MINE"]
    )  # fmt: skip
    options = apply_settings(flags, settings)
    assert (options.model, options.base_url, options.api_key_env) == ("anthropic", None, "MINE")
    assert (options.format, options.mcp_config) == ("text", Path("/other.json"))
    # --api-key-env alone changes the settings' model's key variable only.
    options = apply_settings(parse_args(["--api-key-env", "MINE"]), settings)
    assert (options.model, options.api_key_env) == ("openai:qwen3", "MINE")
    # An interactive session is shown as text whatever output_format says.
    assert apply_settings(parse_args([]), settings).format == "text"


def test_permission_rules_join_the_agents_own() -> None:
    async def approve(request: al.PermissionRequest) -> bool:
        return True

    policy = make_permissions(
        approve,
        settings=PermissionSettings(
            allow=("bash(git status)",), deny=("write_file(.env)",), ask=("read_file(secrets/*)",)
        ),
    )
    assert policy.decide("bash", ("command", "git status"))[0] == "allow"
    assert policy.decide("bash", ("command", "make"))[0] == "ask"  # the default
    assert policy.decide("read_file", ("path", "secrets/k"))[0] == "ask"
    assert policy.decide("read_file", ("path", "src/k"))[0] == "allow"
    assert policy.decide("write_file", ("path", ".env"))[0] == "deny"
    assert policy.decide("edit_file", ("path", "a.py"))[0] == "ask"
    # A default of "allow" still asks about the tools that change things, unless allowed.
    lenient = make_permissions(approve, settings=PermissionSettings(default="allow"))
    assert lenient.decide("bash", ("command", "make"))[0] == "ask"
    assert lenient.decide("some_mcp__tool", None)[0] == "allow"


# --------------------------------------------------------------------------- the program


def env_for(home: Path, **more: str) -> dict[str, str]:
    drop = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "XDG_CONFIG_HOME")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return env | {"AGENTLOOP_HOME": str(home), "TMPDIR": str(home.parent)} | more


def run(*args: str, cwd: Path, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentloop", *args],
        cwd=cwd, env=env_for(home, **env), stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip


ECHO = [
    {"text": "Let me run it.", "calls": [{"name": "bash", "args": {"command": "echo hi"}}]},
    {"text": "Done."},
]


def script(path: Path, turns: list[Any]) -> Path:
    return write(path, json.dumps(turns))


def test_the_program_follows_the_settings(tmp_path: Path) -> None:
    """The model and the rules from the project's file; the user's output format."""
    home, top = tmp_path / "home", project(tmp_path)
    turns = script(tmp_path / "s.json", ECHO)
    write(home / "settings.toml", 'output_format = "json"\nmodel = "demo"\n')
    write(
        top / ".agentloop" / "settings.toml",
        f'model = "scripted:{turns}"\n[permissions]\nallow = ["bash(echo *)"]\n',
    )
    done = run("-p", "hi", "--trust", cwd=top / "src", home=home)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["result"], result["model"], result["stop_reason"]["kind"]) == (
        "Done.",
        f"scripted:{turns}",
        "completed",
    )
    assert done.stderr.splitlines() == [f"agentloop: using the scripted model {turns}.", ""]
    # The flags win: another model, text.
    other = script(tmp_path / "o.json", [{"text": "Other."}])
    done = run(
        "-p", "hi", "--model", f"scripted:{other}", "--output-format", "text", "--trust",
        cwd=top / "src", home=home,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "Other.\n"), done.stderr
    assert done.stderr.splitlines()[:3] == [
        f"agentloop: using the scripted model {other}.",
        "",
        "Other.",
    ]


def test_a_bad_settings_file_is_a_usage_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = write(home / "settings.toml", "[permissions]\nallow = 'bash'\n")
    done = run("-p", "hi", cwd=tmp_path, home=home)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"agentloop: {path}: permissions.allow must be a list of strings, not a string ('bash')\n"
    )


def test_mcp_servers_from_the_settings(tmp_path: Path) -> None:
    """An inline [mcp_servers.NAME] table adds that server's tools."""
    pytest.importorskip("mcp")
    home, top = tmp_path / "home", project(tmp_path)
    write(
        top / ".agentloop" / "settings.toml",
        f"[mcp_servers.t]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(MCP_SERVERS))}, "stdio"]\n',
    )
    turns = script(tmp_path / "s.json", [])
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "--model", f"scripted:{turns}", "--trust"],
        cwd=top, env=env_for(home), input="/tools\n", capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "  t__echo " in done.stdout


def test_the_sandbox_of_the_settings_confines_commands(tmp_path: Path) -> None:
    """[sandbox] enabled: a command may write in the project, not beside it."""
    from agentloop.tools import sandbox_status

    home, top, outside = tmp_path / "home", project(tmp_path), tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "tmp").mkdir()
    write(
        home / "settings.toml",
        '[sandbox]\nenabled = true\nnetwork = false\n[permissions]\nallow = ["bash(touch *)"]\n',
    )
    command = f"touch inside.txt {outside / 'outside.txt'}"
    turns = script(
        tmp_path / "s.json",
        [{"calls": [{"name": "bash", "args": {"command": command}}]}, {"text": "Done."}],
    )
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "--model", f"scripted:{turns}", "-p", "hi"],
        cwd=top, env=env_for(home) | {"TMPDIR": str(tmp_path / "tmp")},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (top / "inside.txt").exists()
    status = sandbox_status(network=False)
    if status.available:
        assert not (outside / "outside.txt").exists()
        assert "Permission denied" in done.stderr
    else:  # said, and the command ran unconfined
        assert done.stderr.splitlines()[1] == (
            f"agentloop: the sandbox is {status}: commands run without it (they are still "
            "asked about)"
        )
        assert (outside / "outside.txt").exists()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"agentloop {al.__version__}\n"


def test_terminal_settings_and_instructions(
    terminal: Terminal,  # noqa: F811
    tmp_path: Path,
) -> None:
    """In a real terminal: the settings' model and rules, the instructions said once."""
    home, top = tmp_path / "home", project(tmp_path)
    write(top / "AGENTS.md", "Use tabs.\n")
    write(top / "src" / "CLAUDE.md", "Be brief.\n")
    write(home / "settings.toml", f"[trust]\nfolders = [{json.dumps(str(top))}]\n")
    turns = script(tmp_path / "s.json", ECHO)
    write(
        top / ".agentloop" / "settings.toml",
        f'model = "scripted:{turns}"\n[permissions]\nallow = ["bash(echo *)"]\n',
    )
    terminal.start([], cwd=top / "src", home=home)
    terminal.wait_for(PROMPT)
    terminal.type("say hi")
    lines = terminal.wait_for_prompt("Done.")
    assert lines[:2] == [
        f"agentloop: using the scripted model {turns}.",
        "agentloop: project instructions from AGENTS.md, src/CLAUDE.md.",
    ]
    assert "  │ hi" in lines  # ran without asking: the settings allow it
    assert not any(line.startswith("Allow bash") for line in lines)
    terminal.type("/permissions")
    lines = terminal.wait_for_prompt(f"{PROMPT} /permissions")
    shown = lines.index(f"{PROMPT} /permissions")
    assert lines[shown + 1 : shown + 5] == [
        "  allow: read_file, list_files, search, bash(echo *)",
        "  ask:   write_file, edit_file",
        "  deny:  (none)",
        "  any other tool: ask",
    ]
    assert sum("project instructions" in line for line in lines) == 1
