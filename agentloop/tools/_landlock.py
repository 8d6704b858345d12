"""Landlock through ``ctypes`` system calls, and the launcher that sandboxes a command.

Standard library only, and no import of the package (its two siblings,
:mod:`._protect` and :mod:`._seccomp`, are standard library only too): this file
is also run as a script, ``python -I -S _landlock.py SPEC... -- argv...``, by the
sandbox of :mod:`agentloop.tools._sandbox`. Run that way it

1. if there are protected paths, enters a mount namespace of its own and mounts
   them read-only over themselves (:mod:`._protect`);
2. if it runs as root, drops every capability but Docker's default set less
   ``CAP_MKNOD``;
3. restricts itself: no new privileges, then a Landlock domain;
4. with the network refused, installs the seccomp filter of :mod:`._seccomp`;
5. restores the signals Python ignores, and ``exec``\\ s ``argv``.

The command and every process it starts are confined, and nothing runs
unconfined. If any step fails it writes one line starting with
:data:`FAILURE_MARK` to stderr and exits with :data:`FAILURE_CODE`, without
running ``argv``. ``python -I -S _landlock.py --probe [user|mount]`` tries step 1 (and 2) on a
directory of its own and exits, 0 if they work: the sandbox asks once per
process whether protected paths can be enforced here.

The spec on the command line: the handled file-system, network and scope rights
(decimal integers), ``1`` to install the seccomp filter (else ``0``), the
namespace to enter (``user`` or ``mount``), the number of protected paths and
each of them, the number of rules, then each rule as two
words, its allowed rights and its path. A path that cannot be opened (missing, a
dangling symlink, out of reach) is skipped, which only takes rights away; a rule
on a file (not a directory) keeps only the rights that apply to files.

The Landlock interface (``include/uapi/linux/landlock.h``): three system calls,
numbered 444, 445 and 446 on every architecture (but Alpha); an ABI version that
grows with the kernel. What each version adds, and what the sandbox uses:

====  ======  ================================================================
ABI   Linux   adds
====  ======  ================================================================
1     5.13    file-system rights (execute, read, write, make and remove files)
2     5.19    ``REFER``: renames and links across directories (ABI 1 refuses all)
3     6.2     ``TRUNCATE``: ``truncate(2)`` (not controlled before)
4     6.7     TCP ``bind`` and ``connect`` rights
5     6.10    ``IOCTL_DEV``: ``ioctl`` on device files
6     6.12    scopes: abstract unix sockets and signals outside the domain
7     6.15    audit logging flags (not used)
====  ======  ================================================================

A Landlock domain also refuses every ``mount``, ``umount``, ``pivot_root`` and
``move_mount`` (from ABI 1): a confined command cannot undo step 1.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # not signal: its enums cost ~15 ms to import
import ctypes
import os
import stat
import sys

TYPE_CHECKING = False  # typing costs a run-time import too (~15 ms): the launcher starts fast
if TYPE_CHECKING:
    from typing import Any

if __package__:
    from . import _protect, _seccomp
else:  # run as a script (``-I``): its directory is not on sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _protect  # type: ignore[import-not-found,no-redef]
    import _seccomp  # type: ignore[import-not-found,no-redef]

SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

# File-system rights (handled_access_fs, allowed_access of a path rule).
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5

# Network rights (handled_access_net), ABI 4.
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1

# Scopes (scoped), ABI 6.
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

#: Rights to read: run files, read files, list directories.
FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
#: Rights to change a tree (ABI 1), then with what later ABIs add.
FS_WRITE = (
    FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_CHAR
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SOCK
    | FS_MAKE_FIFO
    | FS_MAKE_BLOCK
    | FS_MAKE_SYM
    | FS_REFER
    | FS_TRUNCATE
    | FS_IOCTL_DEV
)
#: The rights that apply to a file (a rule on a file may hold only these).
FS_FILE = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV

#: The launcher's exit status when it could not sandbox (or run) the command.
FAILURE_CODE = 125
#: The start of the launcher's one line on stderr when it fails.
FAILURE_MARK = "agentloop-sandbox: "


def fs_rights(abi: int) -> int:
    """The file-system rights Landlock ABI ``abi`` knows (what a ruleset can handle)."""
    rights = FS_READ | FS_WRITE
    if abi < 2:
        rights &= ~FS_REFER
    if abi < 3:
        rights &= ~FS_TRUNCATE
    if abi < 5:
        rights &= ~FS_IOCTL_DEV
    return rights if abi >= 1 else 0


def net_rights(abi: int) -> int:
    """The network rights ABI ``abi`` knows: TCP bind and connect from ABI 4."""
    return NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0


def scopes(abi: int) -> int:
    """The scopes ABI ``abi`` knows: abstract unix sockets and signals from ABI 6."""
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)): 12 bytes
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _error(what: str) -> OSError:
    number = ctypes.get_errno()
    return OSError(number, f"{what}: {os.strerror(number)}")


def abi_version() -> int:
    """The kernel's Landlock ABI version.

    Raises:
        OSError: Landlock cannot be used: not Linux (``ENOSYS``), a kernel without
            it (``ENOSYS``), disabled at boot (``EOPNOTSUPP``), or system calls
            blocked (``EPERM``, a seccomp filter).
    """
    if not sys.platform.startswith("linux"):
        raise OSError(38, f"Landlock is a Linux feature; this is {sys.platform}")
    libc = _libc()
    syscall = libc.syscall
    version = syscall(
        SYS_LANDLOCK_CREATE_RULESET,
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(CREATE_RULESET_VERSION),
    )
    if version < 0:
        raise _error("landlock_create_ruleset")
    return int(version)


def restrict(fs: int, net: int, scoped: int, rules: list[tuple[int, str]]) -> None:
    """Confine this thread (and what it runs next) to ``rules``; irreversible.

    ``fs``, ``net`` and ``scoped`` are the handled rights: a handled right is
    refused unless a rule allows it (there are no network rules: handled TCP
    rights are refused everywhere). Sets ``no_new_privs`` first, as Landlock
    requires of an unprivileged process (setuid programs then gain nothing).

    Raises:
        OSError: a step failed; the thread may be partly restricted (no new
            privileges), never less than before.
    """
    libc = _libc()
    syscall = libc.syscall
    attr = _RulesetAttr(fs, net, scoped)
    size = 24 if scoped else 16 if net else 8  # older kernels know shorter structs
    ruleset = syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise _error("landlock_create_ruleset")
    try:
        for access, path in rules:
            allowed = access & fs
            if not allowed:
                continue
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:  # missing, or out of reach: a right less, never one more
                continue
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    allowed &= FS_FILE
                rule = _PathBeneathAttr(allowed, fd)
                if syscall(
                    SYS_LANDLOCK_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0
                ):
                    raise _error(f"landlock_add_rule({path!r})")
            finally:
                os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            raise _error("prctl(PR_SET_NO_NEW_PRIVS)")
        if syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0):
            raise _error("landlock_restrict_self")
    finally:
        os.close(ruleset)


def launcher_spec(
    fs: int,
    net: int,
    scoped: int,
    rules: list[tuple[int, str]],
    *,
    protect: list[str] | tuple[str, ...] = (),
    namespace: str = "user",
    seccomp: bool = False,
) -> list[str]:
    """The launcher's arguments before ``--`` for these rights, rules, protected
    paths (absolute), namespace (``"user"`` or ``"mount"``: see
    :func:`._protect.enter`) and seccomp filter."""
    words = [str(fs), str(net), str(scoped), "1" if seccomp else "0", namespace]
    words += [str(len(protect)), *protect, str(len(rules))]
    for access, path in rules:
        words += [str(access), path]
    return words


class _Spec:
    __slots__ = ("argv", "fs", "namespace", "net", "protect", "rules", "scoped", "seccomp")

    def __init__(self, words: list[str]) -> None:
        self.fs, self.net, self.scoped = (int(word) for word in words[:3])
        self.seccomp = words[3] == "1"
        self.namespace = words[4]
        if self.namespace not in ("user", "mount"):
            raise ValueError(f"unknown namespace {self.namespace!r}")
        count = int(words[5])
        self.protect = words[6 : 6 + count]
        at = 6 + count
        rules = int(words[at])
        self.rules = [(int(words[at + 1 + 2 * i]), words[at + 2 + 2 * i]) for i in range(rules)]
        rest = words[at + 1 + 2 * rules :]
        if not rest or rest[0] != "--" or len(rest) < 2:
            raise ValueError("expected '--' and a command after the rules")
        self.argv = rest[1:]


def _fail(message: str) -> None:
    os.write(2, f"{FAILURE_MARK}{message}\n".encode(errors="replace"))
    os._exit(FAILURE_CODE)


def _writable(rules: list[tuple[int, str]]) -> list[str]:
    return [path for access, path in rules if access & FS_MAKE_REG and os.path.isdir(path)]


def probe(namespace: str) -> None:
    """Try a read-only mount in a namespace of its own (and, as root, the capability
    trim) on the launcher's directory; exit 0 if it works. Never returns."""
    step = "entering a mount namespace"
    try:
        _protect.enter(namespace)
        step = "mounting a path read-only"
        _protect.bind(os.path.dirname(os.path.abspath(__file__)), read_only=True)
        if os.geteuid() == 0:
            step = "dropping capabilities"
            _protect.trim_capabilities()
    except OSError as error:
        _fail(f"{step}: {error.strerror or error}")
    os._exit(0)


def main(words: list[str]) -> None:
    """Restrict this process, then exec the command; never returns."""
    if words[:1] == ["--probe"]:
        probe(words[1] if len(words) > 1 else _protect.mode())
        return
    try:
        spec = _Spec(words)
    except (ValueError, IndexError) as error:
        _fail(f"bad launcher arguments: {error}")
        return
    try:
        if spec.protect:
            _protect.enter(spec.namespace)
            _protect.apply(_protect.plan(spec.protect, _writable(spec.rules)))
        if os.geteuid() == 0:
            _protect.trim_capabilities()
        restrict(spec.fs, spec.net, spec.scoped, spec.rules)
        if spec.seccomp:
            machine = _seccomp.architecture()
            if machine is None:
                raise OSError(0, f"no seccomp filter for this architecture ({os.uname().machine})")
            _seccomp.install(machine)
    except OSError as error:
        _fail(f"cannot apply the sandbox ({error.strerror or error}); the command did not run")
        return
    # Python ignores these; an ignored signal stays ignored across exec, and a
    # shell pipeline (`yes | head`) relies on SIGPIPE killing the writer.
    for signum in (_signal.SIGPIPE, _signal.SIGXFSZ):
        _signal.signal(signum, _signal.SIG_DFL)
    argv = spec.argv
    try:
        os.execvp(argv[0], argv)
    except OSError as error:
        _fail(f"cannot run {argv[0]!r}: {error.strerror or error}")


if __name__ == "__main__":
    main(sys.argv[1:])
