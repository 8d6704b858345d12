"""Sandbox: confine a command and everything it starts, with Linux Landlock.

``BashTool(root, sandbox=Sandbox())`` runs each command through a small
launcher (``python -I -S agentloop/tools/_landlock.py ... -- bash -c
command``) that confines itself and then ``exec``\\ s the shell. The
restriction is inherited by every child, grandchild and ``exec``, and cannot be
lifted; it needs no root and no extra program, only a kernel with Landlock
(ABI 3, Linux 6.2, or later) enabled. What a confined command may do:

- **Write** (create, change, truncate, rename, link, remove) only beneath the
  workspace root, the temporary directory (``Sandbox.temp``, by default
  :func:`tempfile.gettempdir`), ``/dev/shm``, the paths in ``Sandbox.write``,
  and the device files ``/dev/null``, ``/dev/zero``, ``/dev/full`` and
  ``/dev/tty``. Paths are checked on the file itself, whatever name reaches
  it: ``..``, symlinks, ``/proc/self/cwd``, hard links to a directory outside
  are all refused. A refused write fails with ``EACCES`` ("Permission
  denied"), which the command reports as it would any other error.
- **Protected paths** (``Sandbox.protect``, :data:`DEFAULT_PROTECT`: the
  agent's settings, git's hooks and configuration, other tools' project
  settings that run commands) stay read-only even beneath the root: the
  launcher mounts each that exists read-only over itself in a mount namespace
  of the command's own (see :mod:`._protect`); a write fails with ``EROFS``,
  moving or removing one (or a directory on the way to it) with ``EBUSY``. One
  that does not exist when the command starts can be created. Where this system
  refuses namespaces, commands are still confined by the rest, and the status
  says the paths are not protected (``protected`` False, ``gaps``).
- **Read**: ``read="all"`` (the default): every file but the devices in
  ``/dev`` (``null``, ``zero``, ``full``, ``random``, ``urandom`` and ``tty``
  only: no other terminal can be read, so no one's keystrokes). Every directory
  can be listed. ``read="restricted"``: only the root, the temporary
  directories, the writable paths, the system directories (:data:`SYSTEM_PATHS`),
  this Python's installation and ``Sandbox.readable``; the rest (``$HOME``!)
  cannot be read nor listed.
- **Network**: ``network=False`` refuses TCP ``connect`` and ``bind`` (needs
  ABI 4, Linux 6.7), from ABI 6 connecting to abstract unix sockets of
  processes outside the sandbox, and, with a seccomp filter (see
  :mod:`._seccomp`), every socket but unix and netlink ones (UDP, MPTCP, raw,
  ICMP, packet sockets, and TCP ones, which could listen without ``bind``),
  TCP Fast Open and ``io_uring``. Not covered: unix sockets with a path in the
  file system (the Docker socket, a D-Bus bus: connecting is not writing, and
  seccomp cannot see the path).
- **Signals** (ABI 6): a command cannot signal processes outside its sandbox
  (the agent, your editor); its own children, yes.
- **Devices** (ABI 5): ``ioctl`` on a device file only where writes are
  allowed (no terminal injection with ``TIOCSTI``).
- ``no_new_privs`` is set: setuid programs (``sudo``, ``su``) do not gain
  privileges. Processes outside the sandbox are out of reach as Landlock's
  ``ptrace`` rule makes them: ``ptrace`` of them, and their
  ``/proc/<pid>/mem``, ``environ``, ``maps``, ``fd``, ``cwd`` and ``root``, are
  refused. (Root reads ``environ`` and ``maps`` despite Landlock with
  ``CAP_SYS_ADMIN`` or ``CAP_PERFMON``: a command run as root keeps only
  Docker's default capabilities, less ``CAP_MKNOD``.) Their
  ``/proc/<pid>/cmdline`` is readable by anyone. An *unsandboxed* command of
  the same user reads the ``environ`` of the user's other processes, the
  agent's included: :func:`~agentloop.tools.hide_process_credentials` wipes the
  credentials from the agent's.

Not covered: pathname unix sockets (above), shared memory segments, how much
CPU, memory or disk a command uses, and reading secrets under the root itself.
Landlock is an allow-list on top of the usual permissions, never instead of
them: a file that a user cannot write stays so.

Where Landlock is missing, disabled, blocked or too old, or on another system
than Linux, :func:`sandbox_status` says why; the tool logs that once (a
WARNING on the ``agentloop.tools`` logger), runs commands unsandboxed, and
reports ``sandboxed = False`` so that a :class:`~agentloop.Permissions` policy
asks about them. If restricting fails when a command starts, the command does
not run: the call is an error result (fail closed).

Start-up cost: one Python interpreter start (``-I -S``, no site packages)
before the shell, some 20 ms; the namespace, mounts and filter add under a
millisecond. ``benchmarks/sandbox.py`` measures it.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from . import _landlock, _protect, _seccomp
from ._landlock import FAILURE_CODE, FAILURE_MARK

__all__ = [
    "DEFAULT_PROTECT",
    "FAILURE_CODE",
    "FAILURE_MARK",
    "SYSTEM_PATHS",
    "Sandbox",
    "SandboxStatus",
    "as_sandbox",
    "failure_message",
    "sandbox_status",
    "warn_unavailable",
]

log = logging.getLogger("agentloop.tools")

#: The lowest Landlock ABI the sandbox uses: 3, where truncation is controlled.
MIN_ABI = 3
#: The lowest ABI that can refuse network connections (TCP rights).
NETWORK_ABI = 4

#: What ``read="restricted"`` lets a command read besides the root and the temporary
#: and writable directories (those that exist).
SYSTEM_PATHS: tuple[str, ...] = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/proc",
    "/sys",
    "/nix/store",
    "/run/systemd/resolve",
    "/run/resolvconf",
)

#: What ``Sandbox.protect`` keeps read-only by default, relative to the root: what
#: would run later, outside the sandbox, without showing in ``git diff``. The
#: agent's own settings (``.agentloop``: MCP servers start, permission rules
#: apply), git's hooks and configuration (git runs what they name: hooks,
#: ``core.fsmonitor``, ``core.hooksPath``, aliases, filters), and the project
#: settings of tools that run commands from them (Claude Code's hooks in
#: ``.claude``; VS Code's ``tasks.json`` tasks run when the folder opens, and its
#: settings name programs it starts; JetBrains IDEs' startup tasks in ``.idea``).
DEFAULT_PROTECT: tuple[str, ...] = (
    ".agentloop",
    ".git/hooks",
    ".git/config",
    ".claude",
    ".vscode",
    ".idea",
)

#: Device files every command may read and write.
_WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
#: Device files every command may read.
_READABLE_DEVICES = (*_WRITABLE_DEVICES, "/dev/random", "/dev/urandom")
_SHM = "/dev/shm"
_LAUNCHER = str(Path(__file__).with_name("_landlock.py"))

_READ = _landlock.FS_READ
_READ_WRITE = _landlock.FS_READ | _landlock.FS_WRITE


@attrs.frozen(kw_only=True)
class SandboxStatus:
    """Whether the sandbox can be used here, and if not, why.

    >>> str(SandboxStatus(available=False, abi=0, reason="Landlock is disabled"))
    'unavailable: Landlock is disabled'
    """

    #: True when commands can be confined.
    available: bool
    #: The kernel's Landlock ABI version; 0 when there is none.
    abi: int
    #: Why the sandbox is unavailable; None when it is available.
    reason: str | None = None
    #: True when commands see the sandbox's protected paths read-only; False when
    #: it has none, or when this system cannot (then ``gaps`` says why).
    protected: bool = False
    #: What the sandbox was asked for but does not enforce here, a sentence each
    #: (the commands are still confined by the rest).
    gaps: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.available:
            return "; ".join([f"Landlock ABI {self.abi}", *self.gaps])
        return f"unavailable: {self.reason}"


_abi_cache: list[int | OSError] = []


def _kernel_abi() -> int | OSError:
    """The kernel's Landlock ABI, or why it has none; asked once per process."""
    if not _abi_cache:
        try:
            _abi_cache.append(_landlock.abi_version())
        except OSError as error:
            _abi_cache.append(error)
    return _abi_cache[0]


def sandbox_status(*, network: bool = True, protect: bool = False) -> SandboxStatus:
    """Whether this system can run sandboxed commands (``network=False``: without
    network; ``protect``: with protected paths kept read-only).

    Asks the kernel once per process (``landlock_create_ruleset`` with
    ``LANDLOCK_CREATE_RULESET_VERSION``), which changes nothing. With ``protect``,
    also tries once per process whether a command can get a mount namespace of its
    own with a read-only mount in it (it runs the launcher, some 20 ms); if not,
    the status is available but not ``protected``, and ``gaps`` says why.
    ``network=False`` on an architecture the seccomp filter does not know is a gap
    too (only TCP is refused). Never raises.
    """
    abi = _kernel_abi()
    if isinstance(abi, OSError):
        return SandboxStatus(available=False, abi=0, reason=_why(abi))
    if abi < MIN_ABI:
        return SandboxStatus(
            available=False,
            abi=abi,
            reason=(
                f"the kernel's Landlock ABI {abi} is too old: the sandbox needs ABI "
                f"{MIN_ABI} (Linux 6.2), which controls truncation"
            ),
        )
    if not network and abi < NETWORK_ABI:
        return SandboxStatus(
            available=False,
            abi=abi,
            reason=(
                f"the kernel's Landlock ABI {abi} cannot refuse network connections: "
                f"network=False needs ABI {NETWORK_ABI} (Linux 6.7)"
            ),
        )
    if not sys.executable:
        return SandboxStatus(
            available=False, abi=abi, reason="no Python interpreter to start the sandbox with"
        )
    gaps = []
    if not network and _seccomp.architecture() is None:
        gaps.append(
            "the network is refused over TCP only (UDP and other sockets are not): no "
            f"seccomp filter for this architecture ({_machine()})"
        )
    protected = False
    if protect:
        why = _protection_probe()
        if why is None:
            protected = True
        else:
            gaps.append(f"the protected paths are not read-only: {why}")
    return SandboxStatus(available=True, abi=abi, protected=protected, gaps=tuple(gaps))


def _machine() -> str:
    return f"{os.uname().machine}, {64 if sys.maxsize > 2**32 else 32}-bit Python"


_probe_cache: list[str | None] = []


def _protection_probe() -> str | None:
    """Why protected paths cannot be enforced here; None if they can. Probed once."""
    if not _probe_cache:
        _probe_cache.append(_run_probe())
    return _probe_cache[0]


def _run_probe() -> str | None:
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", _LAUNCHER, "--probe", _protect.mode()],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"the launcher did not run ({error})"
    if done.returncode == 0:
        return None
    why = failure_message(done.returncode, done.stdout, done.stderr)
    if why is None:
        why = done.stderr.decode("utf-8", "replace").strip() or f"exit status {done.returncode}"
    try:
        with open("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "rb") as file:
            restricted = file.read().strip() == b"1"
    except OSError:
        restricted = False
    if restricted:
        why += " (AppArmor restricts unprivileged user namespaces here)"
    return why


def _why(error: OSError) -> str:
    if not sys.platform.startswith("linux"):
        return f"Landlock is a Linux feature; this system is {sys.platform}"
    if error.errno == errno.ENOSYS:
        return "this kernel has no Landlock (Linux 5.13 or later, built with it, is needed)"
    if error.errno == errno.EOPNOTSUPP:
        return "Landlock is disabled on this system (the kernel's lsm= boot parameter)"
    return f"Landlock cannot be used here ({os.strerror(error.errno or 0)})"


_warned: set[str] = set()


def warn_unavailable(status: SandboxStatus) -> None:
    """Log, once per process and reason, that commands will run unsandboxed, or
    which of the sandbox's parts (``status.gaps``) this system does not enforce."""
    if status.available:
        for gap in status.gaps:
            if gap not in _warned:
                _warned.add(gap)
                log.warning("The sandbox is partial here: %s", gap)
        return
    reason = status.reason or "unknown"
    if reason in _warned:
        return
    _warned.add(reason)
    log.warning(
        "The sandbox is unavailable (%s): commands run unsandboxed, and permissions treat them so",
        reason,
    )


def _paths(value: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    if isinstance(value, str | os.PathLike):
        raise TypeError(f"expected a list of paths, got {value!r}")
    return tuple(os.path.abspath(os.path.expanduser(os.fspath(path))) for path in value)


def _relative_paths(value: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    if isinstance(value, str | os.PathLike):
        raise TypeError(f"expected a list of paths, got {value!r}")
    return tuple(os.path.normpath(os.path.expanduser(os.fspath(path))) for path in value)


def _temp(value: str | os.PathLike[str] | None) -> str | None:
    return None if value is None else os.path.abspath(os.fspath(value))


def _read_mode(instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in ("all", "restricted"):
        raise ValueError(f"read must be 'all' or 'restricted', got {value!r}")


@attrs.frozen(kw_only=True)
class Sandbox:
    """How commands are confined; see the module docstring for what each part means.

    >>> Sandbox(network=False).network
    False

    Args:
        write: More paths (directories or files) commands may write under, on top of
            the root, ``temp`` and ``/dev/shm``; ``~`` is expanded. Missing ones are
            skipped.
        read: ``"all"`` (every file but terminals and other devices) or
            ``"restricted"`` (the root, the writable paths, :data:`SYSTEM_PATHS`,
            this Python's installation and ``readable``).
        readable: More paths commands may read under, with ``read="restricted"``.
        network: False refuses TCP connections and listening sockets (not UDP).
        temp: The temporary directory commands may write under (and ``TMPDIR``
            for them); None for none but ``/dev/shm``.
        protect: Paths commands may not change even where they may write
            (:data:`DEFAULT_PROTECT` by default: ``.agentloop``, ``.git/hooks``,
            ``.git/config``, ``.claude``, ``.vscode``, ``.idea``); relative ones
            are relative to the root, ``~`` is expanded. Each that exists when a
            command starts is mounted read-only over itself in the command's own
            mount namespace (a write fails with ``EROFS``, "Read-only file
            system"; moving or removing it, or a directory on the way to it,
            with ``EBUSY``); one that does not exist yet is not protected. Where
            this system cannot (no user namespaces), ``status().protected`` is
            False and ``status().gaps`` says why. ``()`` for none.

    Raises:
        ValueError: ``read`` is neither ``"all"`` nor ``"restricted"``.
        TypeError: ``write``, ``readable`` or ``protect`` is one string instead of a list.
    """

    write: tuple[str, ...] = attrs.field(default=(), converter=_paths)
    read: Literal["all", "restricted"] = attrs.field(default="all", validator=_read_mode)
    readable: tuple[str, ...] = attrs.field(default=(), converter=_paths)
    network: bool = True
    temp: str | None = attrs.field(factory=tempfile.gettempdir, converter=_temp)
    protect: tuple[str, ...] = attrs.field(default=DEFAULT_PROTECT, converter=_relative_paths)

    def status(self) -> SandboxStatus:
        """Whether commands can be confined this way here (see :func:`sandbox_status`)."""
        return sandbox_status(network=self.network, protect=bool(self.protect))

    def protected_paths(self, root: str | os.PathLike[str]) -> list[str]:
        """``protect`` as absolute paths for commands run in ``root`` (symlinks kept)."""
        base = os.path.realpath(root)
        return [os.path.normpath(os.path.join(base, path)) for path in self.protect]

    def rules(
        self, root: str | os.PathLike[str], *, read_only: bool = False
    ) -> list[tuple[int, str]]:
        """The Landlock rules, ``(allowed rights, path)``, for commands run in ``root``.

        ``read_only``: no writes but to the writable devices, whatever ``write`` says
        (for a program that only reads, such as the search tool's ripgrep).
        """
        root_path = os.path.realpath(root)
        writable = [] if read_only else [root_path, *self._temps(), *self.write]
        rules: list[tuple[int, str]] = [(_READ_WRITE, path) for path in writable]
        rules += [(_READ_WRITE, device) for device in _WRITABLE_DEVICES]
        rules += [
            (_READ, device) for device in _READABLE_DEVICES if device not in _WRITABLE_DEVICES
        ]
        if self.read == "all":
            rules.append((_landlock.FS_READ_DIR, "/"))
            rules += [(_READ, path) for path in _top_level() if path != "/dev"]
        else:
            prefixes = {sys.base_prefix, sys.prefix, sys.exec_prefix}
            readable = [root_path, *self._temps(), *self.write, *SYSTEM_PATHS, *prefixes]
            rules += [(_READ, path) for path in [*readable, *self.readable]]
        return rules

    def wrap(
        self, argv: Sequence[str], root: str | os.PathLike[str], *, read_only: bool = False
    ) -> list[str]:
        """The command line that runs ``argv`` confined (see :meth:`rules`).

        The launcher it starts exits with :data:`FAILURE_CODE` and one line of
        stderr starting with :data:`FAILURE_MARK` (see :func:`failure_message`),
        without running ``argv``, when it cannot confine it.

        Raises:
            RuntimeError: the sandbox is unavailable here (the message says why).
        """
        status = self.status()
        if not status.available:
            raise RuntimeError(f"the sandbox is {status}")
        abi = status.abi
        networked = self.network and not read_only
        fs = _landlock.fs_rights(abi)
        net = 0 if networked else _landlock.net_rights(abi)
        scoped = _landlock.scopes(abi)
        if networked:
            scoped &= ~_landlock.SCOPE_ABSTRACT_UNIX_SOCKET
        spec = _landlock.launcher_spec(
            fs,
            net,
            scoped,
            self.rules(root, read_only=read_only),
            # A read-only command writes nothing: no namespace needed.
            protect=self.protected_paths(root) if status.protected and not read_only else (),
            namespace=_protect.mode(),
            seccomp=not networked and _seccomp.architecture() is not None,
        )
        return [sys.executable, "-I", "-S", _LAUNCHER, *spec, "--", *argv]

    def describe(self) -> str:
        """One sentence for a model: what a confined command may not do."""
        places = ["the working directory", *self._temps()[:1], *self.write]
        text = (
            "Commands run in a sandbox: they can write only under "
            + ", ".join(places)
            + " (anything else fails with 'Permission denied')"
        )
        if self.read == "restricted":
            text += ", read only those and the system directories"
        if not self.network:
            text += ", and cannot open network connections"
        text += "."
        if self.protect:
            names = ", ".join(self.protect)
            status = self.status()
            if status.protected:
                text += f" These stay read-only: {names}."
            elif status.available:
                why = next(gap for gap in status.gaps if "protected" in gap)
                text += f" ({names} are not kept read-only here: {why.partition(': ')[2]}.)"
        return text

    def _temps(self) -> list[str]:
        return [self.temp, _SHM] if self.temp is not None else [_SHM]


def _top_level() -> list[str]:
    try:
        return sorted(os.path.join("/", name) for name in os.listdir("/"))
    except OSError:
        return []


def as_sandbox(value: Sandbox | bool | None) -> Sandbox | None:
    """``value`` as a tool's ``sandbox`` setting: True is ``Sandbox()``, False is None."""
    if value is True:
        return Sandbox()
    if value is False or value is None:
        return None
    if isinstance(value, Sandbox):
        return value
    raise TypeError(f"sandbox must be a Sandbox, True, False or None, got {value!r}")


def failure_message(
    returncode: int | None, stdout: bytes | bytearray, stderr: bytes | bytearray
) -> str | None:
    """The launcher's reason when a sandboxed process did not run, else None."""
    if returncode != FAILURE_CODE or stdout:
        return None
    text = bytes(stderr).decode("utf-8", "replace")
    if not text.startswith(FAILURE_MARK) or text.count("\n") > 1:
        return None
    return text[len(FAILURE_MARK) :].strip()
