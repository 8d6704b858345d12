"""The seccomp filter of ``network=False``: what Landlock's TCP rules do not see.

Standard library only, and no import of the package: the sandbox's launcher
(:mod:`agentloop.tools._landlock`, run as a script) imports it. Landlock refuses
TCP ``connect`` and ``bind``; it does not see UDP, raw, ICMP or packet sockets,
MPTCP (``IPPROTO_MPTCP``), TCP Fast Open (``sendto`` with ``MSG_FASTOPEN``
connects without ``connect``), a TCP socket that listens without ``bind`` (the
kernel gives it a port on every address), or ``io_uring``, which can connect and
send without these system calls. The filter refuses them, with ``EACCES``
("Permission denied", as Landlock refuses):

- ``socket()`` of every family but ``AF_UNIX`` and ``AF_NETLINK``: no IPv4 or
  IPv6 socket of any kind (TCP included: a connection is refused at ``socket``
  rather than at ``connect``), no ``AF_PACKET``, ``AF_VSOCK``, Bluetooth...
  ``socketpair()`` is untouched;
- ``sendto``, ``sendmsg`` and ``sendmmsg`` with ``MSG_FASTOPEN`` (on a socket
  received from outside the sandbox over a unix socket, say);
- ``setsockopt(IPPROTO_TCP, TCP_FASTOPEN or TCP_FASTOPEN_CONNECT)``;
- ``io_uring_setup``, ``io_uring_enter`` and ``io_uring_register``.

Before anything else the filter checks the system call's architecture: a call of
another one (32-bit ``int 0x80`` calls on x86-64, x32 calls, 32-bit ARM on
AArch64) kills the process (``SIGSYS``), since its numbers mean other calls.
So a 32-bit program cannot run with the network off.

The filter is classic BPF, built here with :mod:`struct`, and installed with
``prctl(PR_SET_SECCOMP)`` after ``no_new_privs`` is set; it is inherited across
``fork`` and ``exec`` and cannot be removed. What it cannot see: the address
behind a pointer, so a unix socket's path (``connect`` to the Docker socket or a
D-Bus bus is not refused).
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

#: The errno of a refused call.
EACCES = 13

AF_UNIX = 1
AF_NETLINK = 16
MSG_FASTOPEN = 0x20000000
IPPROTO_TCP = 6
TCP_FASTOPEN = 23
TCP_FASTOPEN_CONNECT = 30

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

# Classic BPF opcodes.
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K

# The system calls the filter looks at, by their numbers in the generic table
# (AArch64, RISC-V, LoongArch) and on x86-64. io_uring's are the same everywhere.
_GENERIC = {"socket": 198, "sendto": 206, "setsockopt": 208, "sendmsg": 211, "sendmmsg": 269}
_X86_64 = {"socket": 41, "sendto": 44, "sendmsg": 46, "setsockopt": 54, "sendmmsg": 307}
_IO_URING = (425, 426, 427)  # setup, enter, register
#: Architecture (``uname -m`` of a 64-bit process) -> (AUDIT_ARCH_*, numbers, x32 bit).
ARCHITECTURES: dict[str, tuple[int, dict[str, int], int | None]] = {
    "x86_64": (0xC000003E, _X86_64, 0x40000000),
    "aarch64": (0xC00000B7, _GENERIC, None),
    "arm64": (0xC00000B7, _GENERIC, None),
    "riscv64": (0xC00000F3, _GENERIC, None),
    "loongarch64": (0xC0000102, _GENERIC, None),
}


def architecture() -> str | None:
    """This process's architecture, if the filter knows it (a 64-bit process on one of
    :data:`ARCHITECTURES`); else None."""
    if not sys.platform.startswith("linux") or struct.calcsize("P") != 8:
        return None  # a 32-bit Python (even on a 64-bit kernel): other numbers
    machine = os.uname().machine
    return machine if machine in ARCHITECTURES else None


def program(machine: str) -> bytes:
    """The filter for ``machine`` (a key of :data:`ARCHITECTURES`), as ``sock_filter`` bytes."""
    audit_arch, numbers, x32_bit = ARCHITECTURES[machine]
    little = sys.byteorder == "little"

    def arg(index: int) -> int:  # the offset of an argument's low 32 bits in seccomp_data
        return 16 + 8 * index + (0 if little else 4)

    deny = SECCOMP_RET_ERRNO | EACCES
    # (opcode, jump if true, jump if false, k): jumps are labels or 0 (the next one).
    code: list[tuple[int, str | int, str | int, int] | str] = [
        (_LD_W_ABS, 0, 0, 4),  # arch
        (_JEQ, 0, "kill", audit_arch),
        (_LD_W_ABS, 0, 0, 0),  # nr
    ]
    if x32_bit is not None:
        code.append((_JGE, "kill", 0, x32_bit))
    code += [
        (_JEQ, "socket", 0, numbers["socket"]),
        (_JEQ, "flags_at_3", 0, numbers["sendto"]),
        (_JEQ, "flags_at_3", 0, numbers["sendmmsg"]),
        (_JEQ, "flags_at_2", 0, numbers["sendmsg"]),
        (_JEQ, "sockopt", 0, numbers["setsockopt"]),
        *((_JEQ, "deny", 0, number) for number in _IO_URING),
        (_RET, 0, 0, SECCOMP_RET_ALLOW),
        "socket",
        (_LD_W_ABS, 0, 0, arg(0)),  # family (an int: the kernel reads the low 32 bits)
        (_JEQ, "allow_socket", 0, AF_UNIX),
        (_JEQ, "allow_socket", "deny", AF_NETLINK),
        "allow_socket",
        (_RET, 0, 0, SECCOMP_RET_ALLOW),
        "flags_at_3",
        (_LD_W_ABS, 0, 0, arg(3)),
        (_JSET, "deny", 0, MSG_FASTOPEN),
        (_RET, 0, 0, SECCOMP_RET_ALLOW),
        "flags_at_2",
        (_LD_W_ABS, 0, 0, arg(2)),
        (_JSET, "deny", 0, MSG_FASTOPEN),
        (_RET, 0, 0, SECCOMP_RET_ALLOW),
        "sockopt",
        (_LD_W_ABS, 0, 0, arg(1)),  # level
        (_JEQ, 0, "allow_sockopt", IPPROTO_TCP),
        (_LD_W_ABS, 0, 0, arg(2)),  # option
        (_JEQ, "deny", 0, TCP_FASTOPEN),
        (_JEQ, "deny", 0, TCP_FASTOPEN_CONNECT),
        "allow_sockopt",
        (_RET, 0, 0, SECCOMP_RET_ALLOW),
        "deny",
        (_RET, 0, 0, deny),
        "kill",
        (_RET, 0, 0, SECCOMP_RET_KILL_PROCESS),
    ]
    labels: dict[str, int] = {}
    count = 0
    for item in code:
        if isinstance(item, str):
            labels[item] = count
        else:
            count += 1
    out = bytearray()
    position = 0
    for item in code:
        if isinstance(item, str):
            continue
        opcode, true, false, k = item
        jumps = [labels[j] - position - 1 if isinstance(j, str) else j for j in (true, false)]
        if not all(0 <= jump < 256 for jump in jumps):  # pragma: no cover - a bug here
            raise ValueError(f"bad jump in the seccomp program at {position}")
        out += struct.pack("=HBBI", opcode, jumps[0], jumps[1], k)
        position += 1
    return bytes(out)


class _Program(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def install(machine: str) -> None:
    """Install :func:`program` on this thread (and what it runs next); irreversible.

    ``no_new_privs`` must be set (the Landlock step sets it).

    Raises:
        OSError: the kernel refused the filter.
    """
    code = program(machine)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _Program(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p).value)
    libc = ctypes.CDLL(None, use_errno=True)
    zero = ctypes.c_ulong(0)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), zero, zero):
        number = ctypes.get_errno()
        raise OSError(number, f"prctl(PR_SET_SECCOMP): {os.strerror(number)}")
