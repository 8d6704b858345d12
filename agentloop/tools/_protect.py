"""Protected paths: read-only in a command's own mount namespace, though the root is writable.

Standard library only, and no import of the package: the sandbox's launcher
(:mod:`agentloop.tools._landlock`, run as a script) imports it. Landlock's rights
are the union over a file's ancestors, so a writable root makes everything under
it writable; to keep ``root/.git/hooks`` read-only the launcher, before it
restricts itself with Landlock:

1. enters a mount namespace of its own (:func:`enter`): as root (with
   ``CAP_SYS_ADMIN``) a mount namespace alone; otherwise a user namespace too,
   which maps the user's own uid and gid to themselves (so files of other users
   show as ``nobody``, and supplementary groups as ``nogroup``), and makes every
   mount private, so nothing propagates out;
2. mounts each existing protected path read-only over itself (``open_tree`` of a
   clone, ``mount_setattr``, ``move_mount``: :func:`apply`), and "pins" every
   directory on the way to it that could be renamed (a directory beneath a
   writable path) by mounting it over itself, read-write: a mount point cannot be
   renamed or removed (``EBUSY``), so ``mv .git x && mkdir .git`` fails;
   a symlink on the way is pinned the same way and its target protected too; a
   file where a directory was expected (the ``.git`` *file* of a linked worktree,
   which names the git directory) is made read-only;
3. drops, if it runs as root, every capability but Docker's default set less
   ``CAP_MKNOD`` (:func:`trim_capabilities`): no ``CAP_SYS_ADMIN`` (mounts),
   ``CAP_DAC_READ_SEARCH`` (``open_by_handle_at`` reaches a file under any
   mount), ``CAP_MKNOD`` (a disk's device node), ``CAP_SYS_PTRACE`` or
   ``CAP_PERFMON`` (which let root read other processes' memory maps and
   ``/proc/<pid>/environ`` despite Landlock).

The command then cannot undo the mounts: Landlock refuses every ``mount``,
``umount`` and ``pivot_root`` to a sandboxed process, a non-root command has no
capability after ``exec``, a root one no ``CAP_SYS_ADMIN``, and mounts copied
into a namespace the command creates (``unshare -Urm``) are locked by the kernel.

A protected path that does not exist when the command starts is not protected
(nothing to mount over): the command may create it.
"""

from __future__ import annotations

import ctypes
import os
import stat

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_REC = 1 << 14
MS_PRIVATE = 1 << 18
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = 0o2000000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
# The new mount API's system calls: the same numbers on every architecture (but Alpha).
SYS_OPEN_TREE = 428
SYS_MOVE_MOUNT = 429
SYS_MOUNT_SETATTR = 442

PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAP_SYS_ADMIN = 21
_CAPABILITY_VERSION_3 = 0x20080522
#: The capabilities a root command keeps: Docker's default set, less CAP_MKNOD (27).
KEPT_CAPABILITIES = frozenset(
    {
        0,  # CAP_CHOWN
        1,  # CAP_DAC_OVERRIDE
        3,  # CAP_FOWNER
        4,  # CAP_FSETID
        5,  # CAP_KILL
        6,  # CAP_SETGID
        7,  # CAP_SETUID
        8,  # CAP_SETPCAP
        10,  # CAP_NET_BIND_SERVICE
        13,  # CAP_NET_RAW
        18,  # CAP_SYS_CHROOT
        29,  # CAP_AUDIT_WRITE
        31,  # CAP_SETFCAP
    }
)

_libc_handle: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    if not _libc_handle:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        _libc_handle.append(libc)
    return _libc_handle[0]


def _check(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")
    return result


def _effective_capabilities() -> int:
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def mode() -> str:
    """``"mount"`` (a mount namespace alone) for root with ``CAP_SYS_ADMIN``, else ``"user"``."""
    if os.geteuid() == 0 and _effective_capabilities() >> CAP_SYS_ADMIN & 1:
        return "mount"
    return "user"


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter(how: str) -> None:
    """Enter a new mount namespace (and for ``"user"``, a user namespace) with private mounts.

    Raises:
        OSError: a step was refused (the message names it).
    """
    libc = _libc()
    if how == "mount":
        _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    else:
        uid, gid = os.geteuid(), os.getegid()
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER|CLONE_NEWNS)")
        try:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as error:
            why = f"mapping the user in the user namespace: {error.strerror}"
            raise OSError(error.errno, why) from error
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making the mounts private")


def _beneath(path: str, directories: list[str]) -> bool:
    return any(path == top or path.startswith(top.rstrip("/") + "/") for top in directories)


def _walk(path: str, writable: list[str], steps: dict[str, bool], depth: int = 0) -> None:
    """Add ``path``'s mounts to ``steps`` (path -> read-only?), following symlinks."""
    parts = [part for part in path.split("/") if part]
    current = "/"
    for index, name in enumerate(parts):
        candidate = os.path.join(current, name)
        try:
            mode_bits = os.lstat(candidate).st_mode
        except OSError:
            return  # missing (or out of reach): nothing to mount over
        movable = _beneath(current, writable)  # its directory is writable: it can be renamed
        last = index == len(parts) - 1
        if stat.S_ISLNK(mode_bits):
            if movable:
                steps[candidate] = True  # the link itself, pinned
            if depth < 8:
                rest = parts[index + 1 :]
                _walk(os.path.join(os.path.realpath(candidate), *rest), writable, steps, depth + 1)
            return
        if last or not stat.S_ISDIR(mode_bits):
            # The protected path, or a file standing where a directory of it should be.
            if _beneath(candidate, writable):
                steps[candidate] = True
            return
        if movable:
            steps.setdefault(candidate, False)  # a directory on the way, pinned
        current = candidate


def plan(protect: list[str], writable: list[str]) -> list[tuple[str, bool]]:
    """The mounts that keep ``protect`` read-only: ``(path, read_only)``, outermost first.

    ``protect`` holds absolute paths; ``writable`` the directories commands may
    write under. Only what is writable (beneath one of them) needs a mount.
    """
    tops = [os.path.realpath(path) for path in writable]
    steps: dict[str, bool] = {}
    for path in protect:
        _walk(os.path.normpath(path), tops, steps)
    ordered = sorted(steps.items(), key=lambda step: (step[0].count("/"), step[0]))
    kept: list[tuple[str, bool]] = []
    for path, read_only in ordered:
        if not any(ro and _beneath(path, [top]) for top, ro in kept):  # inside one: already
            kept.append((path, read_only))
    return kept


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def bind(path: str, *, read_only: bool) -> None:
    """Mount ``path`` over itself (a symlink: the link itself), read-only if asked.

    Raises:
        OSError: a step was refused (the message names it and the path).
    """
    libc = _libc()
    encoded = os.fsencode(path)
    flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW
    fd = _check(libc.syscall(SYS_OPEN_TREE, AT_FDCWD, encoded, flags), f"open_tree({path!r})")
    try:
        if read_only:
            attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0)
            _check(
                libc.syscall(
                    SYS_MOUNT_SETATTR,
                    fd,
                    b"",
                    AT_EMPTY_PATH | AT_RECURSIVE,
                    ctypes.byref(attr),
                    ctypes.c_size_t(ctypes.sizeof(attr)),
                ),
                f"mount_setattr({path!r})",
            )
        _check(
            libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, encoded, MOVE_MOUNT_F_EMPTY_PATH),
            f"move_mount({path!r})",
        )
    finally:
        os.close(fd)


def apply(steps: list[tuple[str, bool]]) -> None:
    """Make the mounts of :func:`plan`, then look up the working directory again
    (it was found before the mounts, beneath them).

    Raises:
        OSError: a mount was refused.
    """
    for path, read_only in steps:
        bind(path, read_only=read_only)
    if steps:
        os.chdir(os.getcwd())


def trim_capabilities() -> None:
    """Keep only :data:`KEPT_CAPABILITIES` in every set, the bounding set included
    (so a root ``exec`` gets no more back); clear the ambient set.

    Raises:
        OSError: the kernel refused (no ``CAP_SETPCAP``).
    """
    libc = _libc()
    try:
        with open("/proc/sys/kernel/cap_last_cap", "rb") as file:
            last = int(file.read())
    except (OSError, ValueError):
        last = 40
    zero = ctypes.c_ulong(0)
    for capability in range(last + 1):
        if capability not in KEPT_CAPABILITIES:
            _check(
                libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(capability), zero, zero, zero),
                f"dropping capability {capability} from the bounding set",
            )
    libc.prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), zero, zero, zero)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two of {effective, permitted, inheritable}
    _check(libc.capget(header, data), "capget")
    kept = sum(1 << capability for capability in KEPT_CAPABILITIES)
    for index in range(6):
        data[index] &= kept >> (32 * (index // 3)) & 0xFFFFFFFF
    _check(libc.capset(header, data), "capset")
