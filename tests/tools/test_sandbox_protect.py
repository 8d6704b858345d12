"""Protected paths: read-only for sandboxed commands though the root is writable.

Real bash, real git, real mounts: each escape a command could try (write, truncate,
remove, move the directory away and recreate it, a symlink, a hard link, a
grandchild, ``umount``, a remount) is run and must fail, and the files must be
unchanged afterwards. The "user" namespace (what an ordinary user gets) is run too,
as root by the launcher's spec, and as ``nobody`` where this test runs as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import agentloop as al
from agentloop.tools import DEFAULT_PROTECT, BashTool, Sandbox, _landlock, _protect, _sandbox

STATUS = Sandbox().status()


def _namespaces_refused() -> str | None:
    """Why this system gives no process a mount namespace of its own, else None (then
    the protection must work: a failing probe fails the tests rather than skip them)."""
    flags = ["--mount"] if os.geteuid() == 0 else ["--user", "--map-current-user", "--mount"]
    try:
        done = subprocess.run(["unshare", *flags, "true"], capture_output=True, check=False)
    except OSError as error:
        return f"no unshare program: {error}"
    return done.stderr.decode(errors="replace").strip() or None if done.returncode else None


REFUSED = _namespaces_refused() if STATUS.available else "no Landlock"
pytestmark = pytest.mark.skipif(REFUSED is not None, reason=f"no namespaces here: {REFUSED}")

SETTINGS = 'model = "anthropic"\n'


@attrs.frozen
class Project:
    root: Path
    temp: Path

    def bash(self, **options: Any) -> BashTool:
        return BashTool(self.root, sandbox=Sandbox(temp=self.temp, **options), exclusive=False)

    def snapshot(self) -> dict[str, bytes]:
        """The protected files' contents."""
        files = [self.root / ".agentloop" / "settings.toml", self.root / ".git" / "config"]
        files += sorted((self.root / ".git" / "hooks").iterdir())
        return {str(path.relative_to(self.root)): path.read_bytes() for path in files}


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A git repository with the agent's settings; a temporary directory beside it."""
    root, temp = tmp_path / "root", tmp_path / "temp"
    root.mkdir()
    temp.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\ntouch hook-ran\n")
    hook.chmod(0o755)
    (root / ".agentloop").mkdir()
    (root / ".agentloop" / "settings.toml").write_text(SETTINGS)
    return Project(root, temp)


def context() -> al.ToolContext:
    return al.ToolContext("id", "bash", trio.CancelScope())


async def run(tool: BashTool, command: str) -> str:
    with trio.fail_after(20):
        return (await tool.execute({"command": command}, context())).text_content


def failed(stderr: str, code: int = 1, stdout: str = "") -> str:
    return f"Exit code: {code}\nSTDOUT:\n{stdout}\nSTDERR:\n{stderr}"


ROFS = "Read-only file system"
BUSY = "Device or resource busy"
SYSCALL = (
    "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
    "print(libc.{call}, os.strerror(ctypes.get_errno()))"
)


def python(call: str) -> str:
    return f'python3 -c "{SYSCALL.format(call=call)}"'


ESCAPES = [
    (
        "echo 'model = \"evil\"' >> .agentloop/settings.toml",
        failed(f"bash: line 1: .agentloop/settings.toml: {ROFS}\n"),
    ),
    (
        "printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/post-checkout",
        failed(f"bash: line 1: .git/hooks/post-checkout: {ROFS}\n"),
    ),
    (
        "truncate -s 0 .git/config",
        failed(f"truncate: cannot open '.git/config' for writing: {ROFS}\n"),
    ),
    (
        "chmod 777 .git/hooks/pre-commit",
        failed(f"chmod: changing permissions of '.git/hooks/pre-commit': {ROFS}\n"),
    ),
    ("rm -rf .agentloop", failed(f"rm: cannot remove '.agentloop/settings.toml': {ROFS}\n")),
    # moved away (to be recreated): the directory, or the one on the way to it
    (
        "mv .agentloop old && mkdir .agentloop",
        failed(f"mv: cannot move '.agentloop' to 'old': {BUSY}\n"),
    ),
    ("mv .git old && git init -q", failed(f"mv: cannot move '.git' to 'old': {BUSY}\n")),
    ("mv .git/hooks .git/old", failed(f"mv: cannot move '.git/hooks' to '.git/old': {BUSY}\n")),
    ("mv .git/config .git/old", failed(f"mv: cannot move '.git/config' to '.git/old': {BUSY}\n")),
    (
        "touch new && mv new .git/config",
        failed(
            "mv: inter-device move failed: 'new' to '.git/config'; unable to remove target: "
            f"{BUSY}\n"
        ),
    ),
    ("ln -s .git/config link && echo x >> link", failed(f"bash: line 1: link: {ROFS}\n")),
    (
        "ln .git/config hard",
        failed(
            "ln: failed to create hard link 'hard' => '.git/config': Invalid cross-device link\n"
        ),
    ),
    (
        "bash -c 'sh -c \"echo x > .git/hooks/pre-push\"'",
        failed(f"sh: 1: cannot create .git/hooks/pre-push: {ROFS}\n", code=2),
    ),
    (
        "git config core.fsmonitor 'touch pwned'",
        failed(f"error: could not write config file .git/config: {BUSY}\n", code=4),
    ),
    # the mounts cannot be undone: Landlock refuses them, and the capability is gone
    (python("umount2(b'.git/hooks', 0)"), "Exit code: 0\n-1 Operation not permitted\n"),
    (
        python("mount(None, b'.git/hooks', None, 32 | 4096, None)"),  # MS_REMOUNT | MS_BIND
        "Exit code: 0\n-1 Operation not permitted\n",
    ),
    (
        "mount -o remount,rw .git/hooks 2>&1 | head -1",
        "Exit code: 0\nmount: {root}/.git/hooks: permission denied.\n",
    ),
    (  # a namespace of its own: Landlock keeps it from writing its uid map
        "unshare -Urm umount .git/hooks",
        failed("unshare: cannot open /proc/self/uid_map: Permission denied\n"),
    ),
]


@pytest.mark.parametrize(("command", "expected"), ESCAPES, ids=[c for c, _ in ESCAPES])
async def test_no_command_changes_a_protected_path(
    project: Project, command: str, expected: str
) -> None:
    before = project.snapshot()
    assert await run(project.bash(), command) == expected.format(root=project.root)
    assert project.snapshot() == before
    assert not (project.root / "pwned").exists()


async def test_git_still_works_in_a_protected_repository(project: Project) -> None:
    """The pinned .git stays writable: add, commit, branch, gc; the hook ran, as
    hooks do (the sandbox keeps them from being changed, not from running)."""
    command = (
        "echo hi > f && git add f .agentloop "
        "&& git -c user.name=a -c user.email=a@b commit -q -m one "
        "&& git checkout -q -b two && git gc -q && git log --format=%s && ls hook-ran"
    )
    assert await run(project.bash(), command) == "Exit code: 0\none\nhook-ran\n"


async def test_the_model_is_told_which_paths_are_read_only(project: Project) -> None:
    assert STATUS.protected
    assert STATUS.gaps == ()
    assert project.bash().description.endswith(
        "(anything else fails with 'Permission denied'). These stay read-only: .agentloop, "
        ".git/hooks, .git/config, .claude, .vscode, .idea."
    )
    none = project.bash(protect=())
    assert none.description.endswith("(anything else fails with 'Permission denied').")


async def test_without_protected_paths_the_root_is_all_writable(project: Project) -> None:
    """protect=() asks for no namespace: the hook directory is writable, as before."""
    result = await run(project.bash(protect=()), "echo x > .git/hooks/post-checkout")
    assert result == "Exit code: 0\n"
    assert (project.root / ".git" / "hooks" / "post-checkout").read_text() == "x\n"


async def test_a_protected_path_that_does_not_exist_is_not_protected(project: Project) -> None:
    """Nothing to mount over: a command may create it (the terminal agent asks again
    about a project's settings that appear)."""
    result = await run(project.bash(), "mkdir .claude && echo '{}' > .claude/settings.json")
    assert result == "Exit code: 0\n"
    assert (project.root / ".claude" / "settings.json").read_text() == "{}\n"
    # from the next command on, it exists: protected
    assert await run(project.bash(), "echo x >> .claude/settings.json") == failed(
        f"bash: line 1: .claude/settings.json: {ROFS}\n"
    )


async def test_a_git_file_naming_the_git_directory_is_read_only(tmp_path: Path) -> None:
    """A linked worktree's .git is a file naming its git directory: rewriting it would
    point git at planted hooks, so it is read-only (.git/hooks is beyond it)."""
    main, temp = tmp_path / "main", tmp_path / "temp"
    temp.mkdir()
    await trio.run_process(["git", "init", "-q", str(main)])
    git = ["git", "-C", str(main), "-c", "user.name=a", "-c", "user.email=a@b"]
    await trio.run_process([*git, "commit", "-q", "--allow-empty", "-m", "x"])
    await trio.run_process([*git, "worktree", "add", "-q", str(tmp_path / "wt")])
    pointer = (tmp_path / "wt" / ".git").read_text()
    tool = BashTool(tmp_path / "wt", sandbox=Sandbox(temp=temp), exclusive=False)
    assert await run(tool, "echo 'gitdir: /tmp/evil' > .git") == failed(
        f"bash: line 1: .git: {ROFS}\n"
    )
    assert await run(tool, "rm .git") == failed(f"rm: cannot remove '.git': {BUSY}\n")
    assert (tmp_path / "wt" / ".git").read_text() == pointer


async def test_a_root_inside_a_writable_directory_cannot_be_moved_away(tmp_path: Path) -> None:
    """With the root's parent writable, the root itself is pinned: ``mv root x && mkdir
    root`` would plant a new .agentloop where the next start looks."""
    project = tmp_path / "project"
    (project / ".agentloop").mkdir(parents=True)
    (project / ".agentloop" / "settings.toml").write_text(SETTINGS)
    tool = BashTool(project, sandbox=Sandbox(temp=tmp_path), exclusive=False)
    result = await run(tool, f"mv {project} {tmp_path}/moved && mkdir -p {project}/.agentloop")
    assert result == failed(f"mv: cannot move '{project}' to '{tmp_path}/moved': {BUSY}\n")
    # the command starts in the pinned root: its relative paths meet the mounts too
    assert await run(tool, "echo x >> .agentloop/settings.toml") == failed(
        f"bash: line 1: .agentloop/settings.toml: {ROFS}\n"
    )
    assert (project / ".agentloop" / "settings.toml").read_text() == SETTINGS
    # moving into or out of a pinned directory copies instead of renaming: it still works
    assert await run(tool, f"touch {tmp_path}/a && mv {tmp_path}/a {project}/a") == "Exit code: 0\n"


async def test_a_symlinked_protected_path_is_protected_at_both_ends(tmp_path: Path) -> None:
    """.git/hooks as a link to a tracked directory: the link cannot be replaced, the
    directory it names cannot be changed."""
    root, temp = tmp_path / "root", tmp_path / "temp"
    temp.mkdir()
    await trio.run_process(["git", "init", "-q", str(root)])
    shutil.rmtree(root / ".git" / "hooks")
    (root / "hooks").mkdir()
    (root / ".git" / "hooks").symlink_to("../hooks")
    tool = BashTool(root, sandbox=Sandbox(temp=temp), exclusive=False)
    assert await run(tool, "rm .git/hooks && mkdir .git/hooks") == failed(
        f"rm: cannot remove '.git/hooks': {BUSY}\n"
    )
    assert await run(tool, "echo x > hooks/pre-commit") == failed(
        f"bash: line 1: hooks/pre-commit: {ROFS}\n"
    )
    assert os.readlink(root / ".git" / "hooks") == "../hooks"
    assert list((root / "hooks").iterdir()) == []


def test_protect_takes_paths_relative_to_the_root_or_absolute(tmp_path: Path) -> None:
    sandbox = Sandbox(protect=["~/.config/agentloop", "./docs/../.envrc", tmp_path / "x"])
    assert sandbox.protect == (
        os.path.expanduser("~/.config/agentloop"),
        ".envrc",
        str(tmp_path / "x"),
    )
    assert sandbox.protected_paths(tmp_path / "root") == [
        os.path.expanduser("~/.config/agentloop"),
        str(tmp_path.resolve() / "root" / ".envrc"),
        str(tmp_path / "x"),
    ]
    assert Sandbox().protect == DEFAULT_PROTECT
    with pytest.raises(TypeError, match=r"^expected a list of paths, got '.git'$"):
        Sandbox(protect=".git")  # type: ignore[arg-type]


def test_the_plan_pins_the_way_and_protects_the_end(tmp_path: Path) -> None:
    """What the launcher mounts: directories on the way that could be renamed (rw),
    the protected paths (ro); nothing for what is not writable or missing."""
    root = tmp_path / "root"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("")
    protect = [str(root / p) for p in (".git/hooks", ".git/config", ".claude", ".agentloop")]
    assert _protect.plan(protect, [str(root)]) == [
        (str(root / ".git"), False),
        (str(root / ".git" / "config"), True),
        (str(root / ".git" / "hooks"), True),
    ]
    assert _protect.plan(protect, [str(tmp_path / "elsewhere")]) == []
    assert _protect.plan([*protect, str(root)], [str(tmp_path)]) == [(str(root), True)]


@pytest.mark.skipif(os.geteuid() != 0, reason="for a command run as root")
async def test_a_root_command_keeps_only_dockers_default_capabilities(project: Project) -> None:
    """No CAP_SYS_ADMIN (mounts), CAP_MKNOD (a disk's device node), CAP_DAC_READ_SEARCH
    (open_by_handle_at), CAP_SYS_PTRACE or CAP_PERFMON (other processes' memory maps and
    environment), in any set; what root needs for files stays."""
    result = await run(project.bash(), "grep Cap /proc/self/status; mknod disk b 8 0")
    kept = f"{sum(1 << c for c in _protect.KEPT_CAPABILITIES):016x}"
    assert result == failed(
        "mknod: disk: Operation not permitted\n",
        stdout=f"CapInh:\t{0:016x}\nCapPrm:\t{kept}\nCapEff:\t{kept}\nCapBnd:\t{kept}\n"
        f"CapAmb:\t{0:016x}\n",
    )
    assert kept == "00000000a00425fb"
    assert await run(project.bash(), "touch f && chown 1:1 f && stat -c %u:%g f") == (
        "Exit code: 0\n1:1\n"
    )


# --------------------------------------------------------------------------- user namespace


async def test_the_user_namespace_way_protects_the_same(project: Project) -> None:
    """What an ordinary user gets (a user namespace mapping their own ids), run here
    by the launcher's spec: the same refusals, and the same user."""
    sandbox = Sandbox(temp=project.temp)
    status = sandbox.status()
    fs = _landlock.fs_rights(status.abi)
    scoped = _landlock.scopes(status.abi) & ~_landlock.SCOPE_ABSTRACT_UNIX_SOCKET
    spec = _landlock.launcher_spec(
        fs,
        0,
        scoped,
        sandbox.rules(project.root),
        protect=sandbox.protected_paths(project.root),
        namespace="user",
    )
    probe = await trio.run_process(
        [sys.executable, "-I", "-S", _landlock.__file__, "--probe", "user"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    if probe.returncode:
        pytest.skip(f"no user namespaces here: {probe.stderr!r}")
    command = "id -u; echo x > .git/hooks/pre-push; mv .git old; " + python(
        "umount2(b'.git/hooks', 0)"
    )
    done = await trio.run_process(
        [sys.executable, "-I", "-S", _landlock.__file__, *spec, "--", "bash", "-c", command],
        cwd=project.root,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert (done.stdout.decode(), done.stderr.decode()) == (
        f"{os.geteuid()}\n-1 Operation not permitted\n",
        f"bash: line 1: .git/hooks/pre-push: {ROFS}\nmv: cannot move '.git' to 'old': {BUSY}\n",
    )


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory that user nobody can reach (tmp_path is root's own)."""
    with tempfile.TemporaryDirectory(prefix="agentloop-nobody-") as directory:
        os.chmod(directory, 0o777)
        yield Path(directory)


def _python_for_nobody() -> str | None:
    """A Python that user nobody can run, and that can run itself again."""
    check = "import ctypes, os, sys; os.execv(sys.executable, [sys.executable, '-I', '-c', ''])"
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", candidate, "-I",
             "-c", check],
            capture_output=True, check=False,
        )  # fmt: skip
        if done.returncode == 0:
            return candidate
    return None


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
def test_an_ordinary_user_gets_the_same(public_dir: Path) -> None:
    """As user nobody: the launcher takes the user-namespace way by itself; the
    command keeps its uid, and has no capability to unmount with."""
    interpreter = _python_for_nobody()
    if interpreter is None:
        pytest.skip("no Python that user nobody can run")
    launcher = Path(_landlock.__file__)
    if not os.stat(launcher).st_mode & 0o004:
        pytest.skip("the launcher is not readable by others")
    root = public_dir / "root"
    (root / ".agentloop").mkdir(parents=True)
    (root / ".agentloop" / "settings.toml").write_text(SETTINGS)
    for path in (root, root / ".agentloop", root / ".agentloop" / "settings.toml"):
        os.chown(path, 65534, 65534)
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import _landlock as L, _protect as P;"
        "a = L.abi_version(); print(P.mode(), flush=True);"
        "spec = L.launcher_spec(L.fs_rights(a), 0, 0, [(L.FS_READ | L.FS_WRITE, sys.argv[2]),"
        " (L.FS_READ, '/')], protect=[sys.argv[2] + '/.agentloop'], namespace=P.mode());"
        "import os; os.execv(sys.executable, [sys.executable, '-I', '-S', L.__file__, *spec,"
        " '--', 'bash', '-c', sys.argv[3]])"
    )
    command = "id -u; echo x >> .agentloop/settings.toml; grep CapEff /proc/self/status; " + python(
        "umount2(b'.agentloop', 0)"
    )
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", interpreter, "-I", "-c",
         script, str(launcher.parent), str(root), command],
        cwd=root, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (done.stdout, done.stderr) == (
        "user\n65534\nCapEff:\t0000000000000000\n-1 Operation not permitted\n",
        f"bash: line 1: .agentloop/settings.toml: {ROFS}\n",
    )
    assert (root / ".agentloop" / "settings.toml").read_text() == SETTINGS


# --------------------------------------------------------------------------- where it cannot


def test_where_namespaces_are_refused_the_status_says_so(tmp_path: Path) -> None:
    """A real refusal: an agentloop run inside a sandboxed command (Landlock keeps it
    from writing its user namespace's uid map). The sandbox degrades: commands are
    still confined by Landlock, the status and the model's description say the paths
    are not protected, and a command can then write them."""
    root, temp = tmp_path / "root", tmp_path / "temp"
    (root / ".git" / "hooks").mkdir(parents=True)
    temp.mkdir()
    script = root / "nested.py"
    script.write_text(
        "import logging, subprocess, sys\n"
        "logging.basicConfig(format='%(levelname)s %(message)s')\n"
        "from agentloop.tools import BashTool, Sandbox\n"
        f"tool = BashTool({str(root)!r}, sandbox=Sandbox(temp={str(temp)!r}))\n"
        "print(tool.sandboxed, tool.sandbox_status.protected)\n"
        "print(tool.sandbox_status)\n"
        "print(tool.sandbox.describe())\n"
        "command = 'echo x > .git/hooks/pre-commit; touch /x'\n"
        f"argv = tool.sandbox.wrap(['sh', '-c', command], {str(root)!r})\n"
        f"done = subprocess.run(argv, cwd={str(root)!r}, capture_output=True, text=True)\n"
        "print(done.returncode, done.stderr, end='')\n"
    )
    outer = Sandbox(temp=temp, protect=()).wrap([sys.executable, str(script)], root)
    done = subprocess.run(outer, cwd=root, capture_output=True, text=True, check=False)
    why = "entering a mount namespace: mapping the user in the user namespace: Permission denied"
    assert done.stdout == (
        "True False\n"
        f"Landlock ABI {STATUS.abi}; the protected paths are not read-only: {why}\n"
        f"Commands run in a sandbox: they can write only under the working directory, {temp} "
        "(anything else fails with 'Permission denied'). (.agentloop, .git/hooks, .git/config, "
        f".claude, .vscode, .idea are not kept read-only here: {why}.)\n"
        "1 touch: cannot touch '/x': Permission denied\n"
    )
    assert (
        done.stderr
        == f"WARNING The sandbox is partial here: the protected paths are not read-only: {why}\n"
    )
    assert (root / ".git" / "hooks" / "pre-commit").read_text() == "x\n"


def test_the_probe_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[int] = []
    real = _sandbox._run_probe

    def counted() -> str | None:
        runs.append(1)
        return real()

    monkeypatch.setattr(_sandbox, "_probe_cache", [])
    monkeypatch.setattr(_sandbox, "_run_probe", counted)
    assert Sandbox().status() == Sandbox(network=False).status() == STATUS
    assert Sandbox(protect=()).status().protected is False
    assert runs == [1]
