"""The terminal agent's sandbox: --sandbox, --auto, and the settings' ``sandboxed`` rule.

Real runs of the program (scripted model, real bash, real files); TMPDIR is a
directory of its own, so a directory beside the project is outside everything the
sandbox lets commands write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import STATUS, cli_env

from agentloop._cli._settings import PermissionSettings
from agentloop._cli._setup import make_permissions
from agentloop.tools import BashTool, Sandbox, sandbox_status

pytestmark = pytest.mark.skipif(
    not sandbox_status().available, reason=f"no sandbox here: {sandbox_status().reason}"
)


def run(tmp_path: Path, *flags: str, settings: str | None = None) -> tuple[list[str], Path]:
    work, outside, tmp = tmp_path / "work", tmp_path / "outside", tmp_path / "tmp"
    for path in (work, outside, tmp):
        path.mkdir(exist_ok=True)
    if settings is not None:
        (work / ".agentloop").mkdir(exist_ok=True)
        (work / ".agentloop" / "settings.toml").write_text(settings)
    # Short, so that no line wraps; stderr only, so that no other stream interleaves.
    command = "touch inside.txt && touch ../outside/x.txt"
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            [{"text": "Writing.", "calls": [{"name": "bash", "args": {"command": command}}]},
             {"text": "Done."}]
        )
    )  # fmt: skip
    env = {**cli_env(tmp_path / "h"), "TMPDIR": str(tmp)}
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "--model", f"scripted:{script}", "-C", str(work),
         *flags, *(["--trust"] if settings is not None else []), "-p", "go"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "Done.\n")  # the answer; the run on stderr
    lines = done.stderr.splitlines()
    assert STATUS.match(lines[-1])
    return lines[1:-1], outside


PROTECTED = (
    " These stay read-only: .agentloop, .git/hooks, .git/config, .claude, .vscode, .idea."
    if Sandbox().status().protected
    else " (.agentloop, .git/hooks, .git/config, .claude, .vscode, .idea are not kept "
    f"read-only here: {Sandbox().status().gaps[-1].partition(': ')[2]}.)"
)


def test_auto_runs_sandboxed_commands_without_asking(tmp_path: Path) -> None:
    lines, outside = run(tmp_path, "--auto")
    tmp, work = tmp_path / "tmp", tmp_path / "work"
    assert lines == [
        "agentloop: commands run in a sandbox: they can write only under the working "
        f"directory, {tmp} (anything else fails with 'Permission denied'), read only those "
        f"and the system directories, and cannot open network connections.{PROTECTED}",
        "",
        "Writing.",
        '→ bash(command="touch inside.txt && touch ../outside/x.txt")',
        "  │ touch: cannot touch '../outside/x.txt': Permission denied",
        "✓ bash: Exit code: 1 (+4 lines)",
        "Done.",
    ]
    assert sorted(os.listdir(work)) == ["inside.txt"]
    assert os.listdir(outside) == []


def test_sandbox_alone_still_asks(tmp_path: Path) -> None:
    lines, _outside = run(tmp_path, "--sandbox")
    assert lines[3:5] == [
        "Allow bash(touch inside.txt && touch ../outside/x.txt)? [y/N] ",
        "  not allowed (no more input)",
    ]
    assert os.listdir(tmp_path / "work") == []


def test_the_settings_can_say_the_same(tmp_path: Path) -> None:
    settings = '[sandbox]\nenabled = true\n\n[permissions]\nsandboxed = "allow"\n'
    lines, _outside = run(tmp_path, settings=settings)
    assert lines[4] == "  │ touch: cannot touch '../outside/x.txt': Permission denied"
    assert sorted(os.listdir(tmp_path / "work")) == [".agentloop", "inside.txt"]


async def test_an_unsandboxed_command_still_asks(tmp_path: Path) -> None:
    """Where the sandbox cannot run, sandboxed="allow" gives bash no pass."""
    asked: list[str] = []

    def approver(request: object) -> bool:
        asked.append(str(getattr(request, "subject", None)))
        return False

    policy = make_permissions(approver, settings=PermissionSettings(sandboxed="allow"))
    confined = BashTool(tmp_path, sandbox=True)
    loose = BashTool(tmp_path)
    assert (confined.sandboxed, loose.sandboxed) == (True, False)
    assert await policy.check(confined, "bash", "1", {"command": "make"}) is None
    assert await policy.check(loose, "bash", "2", {"command": "make"}) == (
        "bash 'make' was not approved"
    )
    assert asked == ["('command', 'make')"]
    # deny and ask rules still apply to sandboxed commands
    strict = make_permissions(
        approver, settings=PermissionSettings(sandboxed="allow", deny=("bash(rm *)",))
    )
    assert await strict.check(confined, "bash", "3", {"command": "rm -rf x"}) == (
        "bash 'rm -rf x' is refused by the rule deny(bash(rm *))"
    )
