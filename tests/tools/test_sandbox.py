"""The Landlock sandbox: real bash, real files, real sockets; the fallback and fail-closed paths.

Each directory of a test is its own: ``root`` (the workspace), ``outside`` (next
to it: what a command must not touch) and ``temp`` (the sandbox's temporary
directory, in place of the machine's ``/tmp``, which holds ``outside`` too).
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.tools import (
    BashTool,
    Sandbox,
    SandboxStatus,
    SearchTool,
    _landlock,
    _sandbox,
    default_tools,
    sandbox_status,
)

STATUS = sandbox_status()
needs_landlock = pytest.mark.skipif(not STATUS.available, reason=f"sandbox {STATUS}")
needs_network_rules = pytest.mark.skipif(
    not sandbox_status(network=False).available, reason="Landlock ABI < 4: no TCP rules"
)


@attrs.frozen
class Dirs:
    root: Path
    outside: Path
    temp: Path

    def bash(self, **options: Any) -> BashTool:
        return BashTool(self.root, sandbox=Sandbox(temp=self.temp, **options), exclusive=False)


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    made = Dirs(tmp_path / "root", tmp_path / "outside", tmp_path / "temp")
    for path in attrs.astuple(made):
        path.mkdir()
    (made.outside / "existing.txt").write_text("keep me\n")
    return made


@pytest.fixture
def fresh_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the kernel probes and the warnings given, for a test that fakes the kernel."""
    monkeypatch.setattr(_sandbox, "_abi_cache", [])
    monkeypatch.setattr(_sandbox, "_probe_cache", [])
    monkeypatch.setattr(_sandbox, "_warned", set())


def context() -> al.ToolContext:
    return al.ToolContext("id", "bash", trio.CancelScope())


async def run(tool: BashTool, command: str, **params: Any) -> al.ToolResult:
    with trio.fail_after(10):
        return await tool.execute({"command": command, **params}, context())


async def run_error(tool: BashTool, command: str) -> str:
    with trio.fail_after(10), pytest.raises(al.ToolError) as caught:
        await tool.execute({"command": command}, context())
    return str(caught.value)


def failed(stderr: str, code: int = 1) -> str:
    """The result text of a command that printed only ``stderr`` and exited with ``code``."""
    return f"Exit code: {code}\nSTDOUT:\n\nSTDERR:\n{stderr}"


# --------------------------------------------------------------------------- writes


@needs_landlock
async def test_a_write_outside_the_root_is_refused_with_the_os_error(dirs: Dirs) -> None:
    """The command sees EACCES, reports it, and the result is an ordinary one."""
    target = dirs.outside / "new.txt"
    result = await run(dirs.bash(), f"touch {target}")
    assert result.text_content == failed(f"touch: cannot touch '{target}': Permission denied\n")
    assert result.details == {
        "exit_code": 1,
        "stdout_bytes": 0,
        "stderr_bytes": len(f"touch: cannot touch '{target}': Permission denied\n"),
        "truncated": False,
    }
    assert not target.exists()


@needs_landlock
@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("echo x > ../outside/dotdot", "bash: line 1: ../outside/dotdot: Permission denied\n"),
        ("echo x > link/symlink", "bash: line 1: link/symlink: Permission denied\n"),
        (
            "echo x > /proc/self/cwd/../outside/proc",
            "bash: line 1: /proc/self/cwd/../outside/proc: Permission denied\n",
        ),
        (
            "cd / && echo x > /proc/self/cwd{outside}/proc",
            "bash: line 1: /proc/self/cwd{outside}/proc: Permission denied\n",
        ),
        (
            "cd / && bash -c 'sh -c \"touch {outside}/grandchild\"'",
            "touch: cannot touch '{outside}/grandchild': Permission denied\n",
        ),
        (
            "cd / && echo x > {outside}/after_cd",
            "bash: line 1: {outside}/after_cd: Permission denied\n",
        ),
        (
            "truncate -s 0 {outside}/existing.txt",
            "truncate: cannot open '{outside}/existing.txt' for writing: Permission denied\n",
        ),
        (
            "touch mine && mv mine {outside}/moved",
            "mv: cannot move 'mine' to '{outside}/moved': Permission denied\n",
        ),
        (
            "ln {outside}/existing.txt hardlink",
            "ln: failed to create hard link 'hardlink' => '{outside}/existing.txt': "
            "Invalid cross-device link\n",
        ),
    ],
    ids=[
        "dotdot",
        "symlink",
        "proc-cwd",
        "proc-cwd-after-cd",
        "grandchild",
        "after-cd",
        "truncate",
        "rename-out",
        "hard-link-in",
    ],
)
async def test_no_route_writes_outside(dirs: Dirs, command: str, message: str) -> None:
    """``..``, a symlink in the root, /proc/self/cwd, a grandchild, cd /, truncation,
    a rename out of the root and a hard link in: each refused, nothing outside changed."""
    (dirs.root / "link").symlink_to(dirs.outside)
    result = await run(dirs.bash(), command.format(outside=dirs.outside))
    assert result.text_content == failed(message.format(outside=dirs.outside))
    assert sorted(path.name for path in dirs.outside.iterdir()) == ["existing.txt"]
    assert (dirs.outside / "existing.txt").read_text() == "keep me\n"


@needs_landlock
async def test_rm_rf_of_a_directory_outside_is_refused(dirs: Dirs) -> None:
    tree = dirs.outside / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "file.txt").write_text("data")
    result = await run(dirs.bash(), f"rm -rf {tree}")
    assert result.text_content == failed(
        f"rm: cannot remove '{tree}/sub/file.txt': Permission denied\n"
    )
    assert (tree / "sub" / "file.txt").read_text() == "data"


@needs_landlock
async def test_writes_in_the_root_and_the_temporary_directory_work(dirs: Dirs) -> None:
    command = (
        "mkdir -p a/b && echo one > a/b/f.txt && mv a/b/f.txt a/g.txt && ln -s g.txt a/h"
        " && echo two > $TMPDIR/t.txt && mktemp > /dev/null && rm -r a/b"
        f" && cd / && echo three >> {dirs.root}/a/g.txt && cat {dirs.root}/a/h $TMPDIR/t.txt"
        " && echo $TMPDIR"
    )
    result = await run(dirs.bash(), command)
    assert result.text_content == f"Exit code: 0\none\nthree\ntwo\n{dirs.temp}\n"
    assert (dirs.root / "a" / "g.txt").read_text() == "one\nthree\n"
    assert (dirs.temp / "t.txt").read_text() == "two\n"


@needs_landlock
async def test_extra_writable_paths_and_devices(dirs: Dirs) -> None:
    """``write=[...]`` opens a path; /dev/null and friends always work; pipes, process
    substitution and SIGPIPE behave as without a sandbox."""
    extra = dirs.outside / "extra"
    extra.mkdir()
    tool = dirs.bash(write=[extra])
    command = (
        f"echo x > {extra}/ok && echo gone > /dev/null && head -c 3 /dev/zero | wc -c"
        " && cat <(echo substituted) && yes | head -n 2 && echo out > /dev/stdout"
    )
    result = await run(tool, command)
    assert result.text_content == "Exit code: 0\n3\nsubstituted\ny\ny\nout\n"
    assert (extra / "ok").read_text() == "x\n"


# --------------------------------------------------------------------------- reads


@needs_landlock
async def test_restricted_reads_keep_home_out(dirs: Dirs, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "secret.txt").write_text("s3cret\n")
    everywhere = BashTool(
        dirs.root, sandbox=Sandbox(temp=dirs.temp), env={"HOME": str(home)}, exclusive=False
    )
    restricted = BashTool(
        dirs.root,
        sandbox=Sandbox(temp=dirs.temp, read="restricted"),
        env={"HOME": str(home)},
        exclusive=False,
    )
    (dirs.root / "mine.txt").write_text("mine\n")
    command = "cat mine.txt && head -c 5 /etc/passwd | wc -c && cat ~/secret.txt"
    assert (await run(everywhere, command)).text_content == "Exit code: 0\nmine\n5\ns3cret\n"
    assert (await run(restricted, command)).text_content == (
        f"Exit code: 1\nSTDOUT:\nmine\n5\n\nSTDERR:\ncat: {home}/secret.txt: Permission denied\n"
    )
    listing = await run(restricted, f"ls {home}")
    assert listing.text_content == failed(
        f"ls: cannot open directory '{home}': Permission denied\n", code=2
    )


@needs_landlock
async def test_restricted_reads_refuse_the_real_home(dirs: Dirs) -> None:
    real_home = Path.home().resolve()
    readable = [dirs.root, dirs.temp, *map(Path, _sandbox.SYSTEM_PATHS)]
    if not real_home.is_dir() or any(real_home.is_relative_to(path) for path in readable):
        pytest.skip("no home directory outside the readable paths")
    result = await run(dirs.bash(read="restricted"), f"ls {real_home} > /dev/null")
    assert result.text_content == failed(
        f"ls: cannot open directory '{real_home}': Permission denied\n", code=2
    )


@needs_landlock
@pytest.mark.parametrize("what", ["mem", "environ", "maps"])
async def test_other_processes_are_out_of_reach(dirs: Dirs, what: str) -> None:
    """The agent's memory, environment and memory map cannot be read (Landlock's
    ptrace rule; as root, only once CAP_SYS_ADMIN and CAP_PERFMON are dropped, which
    let root read them anyway); from ABI 6 it cannot be signalled."""
    me = os.getpid()
    result = await run(dirs.bash(), f"head -c 1 /proc/{me}/{what}")
    assert result.text_content == failed(
        f"head: cannot open '/proc/{me}/{what}' for reading: Permission denied\n"
    )
    if STATUS.abi >= 6:
        result = await run(dirs.bash(), f"kill -0 {me}")
        assert result.text_content == failed(
            f"bash: line 1: kill: ({me}) - Operation not permitted\n"
        )


# --------------------------------------------------------------------------- network


@needs_network_rules
async def test_network_off_refuses_listening_too(dirs: Dirs) -> None:
    script = "import socket; socket.socket().bind(('127.0.0.1', 0))"
    result = await run(dirs.bash(network=False), f'python3 -c "{script}" 2>&1 | tail -1')
    assert result.text_content == "Exit code: 0\nPermissionError: [Errno 13] Permission denied\n"


# --------------------------------------------------------------------------- the process


@needs_landlock
async def test_a_sandboxed_command_is_still_killed_on_timeout(dirs: Dirs) -> None:
    """The launcher execs the shell: the pid and process group are the command's."""
    with trio.fail_after(10), pytest.raises(al.ToolError, match=r"^Command timed out after 200ms"):
        await dirs.bash().execute({"command": "sleep 30 & wait", "timeout": 0.2}, context())


@needs_landlock
async def test_the_model_is_told_about_the_sandbox(dirs: Dirs) -> None:
    tool = dirs.bash(network=False, protect=())
    assert tool.sandboxed
    assert tool.sandbox_status == STATUS
    assert tool.description.endswith(
        f"Commands run in a sandbox: they can write only under the working directory, "
        f"{dirs.temp} (anything else fails with 'Permission denied'), and cannot open "
        "network connections."
    )
    assert "sandbox" not in BashTool(dirs.root).description


# --------------------------------------------------------------------------- fail closed


@needs_landlock
async def test_a_sandbox_that_cannot_be_applied_runs_nothing(
    dirs: Dirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel rejects the ruleset (a right it does not know): the call is an error
    and the command never ran."""
    real = _landlock.fs_rights
    monkeypatch.setattr(_landlock, "fs_rights", lambda abi: real(abi) | 1 << 62)
    tool = dirs.bash()
    assert tool.sandboxed
    message = await run_error(tool, "touch ran.txt")
    assert message == (
        "Sandbox error: cannot apply the sandbox (landlock_create_ruleset: Invalid argument); "
        "the command did not run"
    )
    assert list(dirs.root.iterdir()) == []


@needs_landlock
async def test_a_shell_that_is_missing_is_a_sandbox_error(dirs: Dirs) -> None:
    tool = BashTool(dirs.root, sandbox=Sandbox(temp=dirs.temp), shell="no-such-shell")
    message = await run_error(tool, "true")
    assert message == "Sandbox error: cannot run 'no-such-shell': No such file or directory"


@needs_landlock
async def test_the_command_may_not_fake_a_sandbox_failure_into_success(dirs: Dirs) -> None:
    """A command printing the launcher's mark among other output is a normal result."""
    result = await run(dirs.bash(), f"echo out; echo '{_landlock.FAILURE_MARK}x' >&2; exit 125")
    assert result.details["exit_code"] == 125


# --------------------------------------------------------------------------- unavailable


@pytest.mark.parametrize(
    ("probe", "sandbox", "reason"),
    [
        (
            OSError(errno.ENOSYS, "no"),
            Sandbox(),
            "this kernel has no Landlock (Linux 5.13 or later, built with it, is needed)",
        ),
        (
            OSError(errno.EOPNOTSUPP, "off"),
            Sandbox(),
            "Landlock is disabled on this system (the kernel's lsm= boot parameter)",
        ),
        (
            2,
            Sandbox(),
            "the kernel's Landlock ABI 2 is too old: the sandbox needs ABI 3 (Linux 6.2), "
            "which controls truncation",
        ),
        (
            3,
            Sandbox(network=False),
            "the kernel's Landlock ABI 3 cannot refuse network connections: "
            "network=False needs ABI 4 (Linux 6.7)",
        ),
    ],
    ids=["no-landlock", "disabled", "abi-2", "abi-3-no-network"],
)
async def test_an_unavailable_sandbox_is_said_once_and_asks(
    dirs: Dirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fresh_probe: None,
    probe: int | OSError,
    sandbox: Sandbox,
    reason: str,
) -> None:
    """The tool warns once, runs commands unsandboxed, and never claims a sandbox:
    ``sandboxed`` is False, so a policy that trusts sandboxed commands asks."""

    def abi_version() -> int:
        if isinstance(probe, OSError):
            raise probe
        return probe

    monkeypatch.setattr(_landlock, "abi_version", abi_version)
    sandbox = attrs.evolve(sandbox, temp=dirs.temp)
    with caplog.at_level(logging.WARNING, logger="agentloop.tools"):
        tools = [BashTool(dirs.root, sandbox=sandbox), *default_tools(dirs.root, sandbox=sandbox)]
    assert [record.getMessage() for record in caplog.records] == [
        f"The sandbox is unavailable ({reason}): commands run unsandboxed, and permissions "
        "treat them so"
    ]
    bash = tools[0]
    assert isinstance(bash, BashTool)
    assert not bash.sandboxed
    assert bash.sandbox_status == SandboxStatus(
        available=False, abi=probe if isinstance(probe, int) else 0, reason=reason
    )
    assert "sandbox" not in bash.description
    with pytest.raises(RuntimeError, match=r"^the sandbox is unavailable: "):
        sandbox.wrap(["true"], dirs.root)

    policy = al.Permissions(default="ask", sandboxed="allow")
    why = await policy.check(bash, "bash", "id", {"command": "touch x"})
    assert why == "bash 'touch x' needs approval (the default), and no approver is set"
    # Unsandboxed, it really writes outside: the tool said so, and the policy asked.
    target = dirs.outside / "unsandboxed.txt"
    assert (await run(bash, f"touch {target}")).text_content == "Exit code: 0\n"
    assert target.exists()


def test_sandbox_status_on_another_system(
    monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert sandbox_status() == SandboxStatus(
        available=False, abi=0, reason="Landlock is a Linux feature; this system is darwin"
    )


# --------------------------------------------------------------------------- permissions


@pytest.mark.parametrize(
    ("sandboxed", "command", "expected"),
    [
        (True, "make test", "allow None"),
        (False, "make test", "ask None"),
        (True, "rm -rf build", "deny bash(rm *)"),
        (True, "git push origin", "ask bash(git push *)"),
        (False, "ls -la", "allow bash(ls *)"),
    ],
)
def test_the_policy_lets_sandboxed_commands_run(
    sandboxed: bool, command: str, expected: str
) -> None:
    """deny and ask rules still apply to sandboxed commands; only the fallback changes."""
    policy = al.Permissions(
        allow=["bash(ls *)"],
        ask=["bash(git push *)"],
        deny=["bash(rm *)"],
        default="ask",
        sandboxed="allow",
    )
    action, rule = policy.decide("bash", ("command", command), sandboxed=sandboxed)
    assert f"{action} {rule}" == expected


def test_the_sandboxed_setting_is_checked() -> None:
    with pytest.raises(ValueError, match=r"^sandboxed must be None, 'allow', 'ask' or 'deny'"):
        al.Permissions(sandboxed="yes")  # type: ignore[arg-type]


@needs_landlock
async def test_the_approver_hears_whether_a_call_is_sandboxed(dirs: Dirs) -> None:
    asked: list[tuple[str, bool]] = []

    def approver(request: al.PermissionRequest) -> bool:
        asked.append((request.tool_name, request.sandboxed))
        return False

    policy = al.Permissions(default="ask", approver=approver)
    await policy.check(dirs.bash(), "bash", "1", {"command": "ls"})
    await policy.check(BashTool(dirs.root), "bash", "2", {"command": "ls"})
    assert asked == [("bash", True), ("bash", False)]
    trusting = al.Permissions(default="deny", sandboxed="allow")
    assert await trusting.check(dirs.bash(), "bash", "3", {"command": "ls"}) is None
    assert await trusting.check(BashTool(dirs.root), "bash", "4", {"command": "ls"}) == (
        "no rule allows bash calls here"
    )


# --------------------------------------------------------------------------- search


needs_rg = pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed")


@needs_landlock
@needs_rg
async def test_search_runs_ripgrep_in_the_sandbox(dirs: Dirs) -> None:
    (dirs.root / "a.py").write_text("needle = 1\n")
    tools = default_tools(dirs.root, sandbox=Sandbox(temp=dirs.temp))
    search = tools[-1]
    assert isinstance(search, SearchTool)
    assert search.sandbox == Sandbox(temp=dirs.temp)
    result = await search.execute({"pattern": "needle"}, context())
    assert result.text_content == "a.py:1:needle = 1\n\n(1 match in 1 file)"
    assert result.details["engine"] == "rg"


@needs_landlock
@needs_rg
async def test_search_falls_back_to_python_when_rg_cannot_be_sandboxed(
    dirs: Dirs, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = _landlock.fs_rights
    monkeypatch.setattr(_landlock, "fs_rights", lambda abi: real(abi) | 1 << 62)
    (dirs.root / "a.py").write_text("needle = 1\n")
    search = SearchTool(dirs.root, sandbox=Sandbox(temp=dirs.temp))
    with caplog.at_level(logging.WARNING, logger="agentloop.tools"):
        result = await search.execute({"pattern": "needle"}, context())
    assert result.text_content == "a.py:1:needle = 1\n\n(1 match in 1 file)"
    assert result.details["engine"] == "python"
    assert [record.getMessage() for record in caplog.records] == [
        "search: rg could not be sandboxed, using the Python engine: cannot apply the sandbox "
        "(landlock_create_ruleset: Invalid argument); the command did not run"
    ]


@needs_landlock
def test_ripgrep_rules_are_read_only(dirs: Dirs) -> None:
    rules = Sandbox(temp=dirs.temp, write=[dirs.outside]).rules(dirs.root, read_only=True)
    writable = {path for access, path in rules if access & _landlock.FS_WRITE_FILE}
    assert writable == {"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}


# --------------------------------------------------------------------------- benchmark


def test_the_benchmark_runs() -> None:
    """benchmarks/sandbox.py prints its table (timings are not asserted)."""
    script = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "sandbox.py"
    done = subprocess.run(
        [sys.executable, str(script), "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[1].startswith("case ")
    labels = [line.split(" | ")[0].strip() for line in lines[3:] if " | " in line]
    expected = ["bash -c true (subprocess)", "BashTool, no sandbox"]
    if STATUS.available:
        expected = [
            "bash -c true (subprocess)",
            "through the launcher",
            "+ protected paths",
            *(["+ network off (seccomp)"] if sandbox_status(network=False).available else []),
            "restricted in preexec_fn",
            "BashTool, no sandbox",
            "BashTool, sandboxed",
        ]
    assert labels == expected


@needs_landlock
async def test_an_agent_runs_sandboxed_commands_unasked(dirs: Dirs) -> None:
    """In the loop's gate, ``sandboxed="allow"`` lets the sandboxed command run with no
    approver, and the command is confined."""
    model = ScriptedProvider(
        [reply(call("bash", {"command": f"touch made.txt {dirs.outside}/x"})), reply("Done.")]
    )
    agent = al.Agent(
        model,
        tools=default_tools(dirs.root, sandbox=Sandbox(temp=dirs.temp)),
        permissions=al.Permissions(default="ask", sandboxed="allow"),
    )
    with trio.fail_after(10):
        await agent.run("Make a file")
    result = agent.messages[2]
    assert isinstance(result, al.ToolResultMessage)
    assert not result.is_error
    assert result.content[0] == al.TextContent(
        failed(f"touch: cannot touch '{dirs.outside}/x': Permission denied\n")
    )
    assert (dirs.root / "made.txt").exists()
