"""``network=False``: what Landlock's TCP rules do not see, refused by the seccomp filter.

Real processes against real listeners on 127.0.0.1 that the test starts: MPTCP, TCP
Fast Open, UDP, raw, ICMP and packet sockets, a socket that listens without bind,
io_uring; each refused with the network off, and (where the kernel has it) reaching
the listener with the network on. Names still resolve through /etc/hosts.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import agentloop as al
from agentloop.tools import BashTool, Sandbox, _seccomp, sandbox_status

pytestmark = pytest.mark.skipif(
    not sandbox_status(network=False).available or _seccomp.architecture() is None,
    reason="no Landlock TCP rules or no seccomp filter for this architecture",
)

DENIED = "[Errno 13] Permission denied"


def context() -> al.ToolContext:
    return al.ToolContext("id", "bash", trio.CancelScope())


async def python(tmp_path: Path, code: str, *, network: bool) -> str:
    """Run ``code`` with python3 in a sandboxed bash; its output (or result text)."""
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    (root / "probe.py").write_text(code)
    tool = BashTool(root, sandbox=Sandbox(network=network, protect=()), exclusive=False)
    with trio.fail_after(20):
        result = await tool.execute({"command": "python3 probe.py 2>&1"}, context())
    return result.text_content


_MACHINE = _seccomp.architecture()
NUMBERS = _seccomp.ARCHITECTURES[_MACHINE][1] if _MACHINE else {}
SYSCALL = f"""
import ctypes, os
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
NUMBERS = {NUMBERS!r}


def syscall(name, *args):
    \"\"\"The raw system call (no C library wrapper to narrow its arguments).\"\"\"
    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    if _libc.syscall(NUMBERS[name], *args) < 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
"""


def attempt(body: str) -> str:
    """A script that runs ``body`` and prints 'ok' or the OSError."""
    return (
        f"import socket, sys\n{SYSCALL}\ntry:\n{body}\n    print('ok')\n"
        "except OSError as error:\n    print(error)\n"
    )


@pytest.fixture
def tcp_listener() -> Iterator[socket.socket]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.settimeout(5)
        yield server


@pytest.fixture
def udp_listener() -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.setblocking(False)
        yield server


def received(server: socket.socket) -> bytes | None:
    """What one accepted connection sent, or None if no connection is waiting."""
    server.setblocking(False)
    try:
        connection, _ = server.accept()
    except BlockingIOError:
        return None
    with connection:
        connection.settimeout(5)
        return connection.recv(100)


def kernel_has(family: int, kind: int, protocol: int) -> str | None:
    """Why this kernel cannot make such a socket, or None."""
    try:
        socket.socket(family, kind, protocol).close()
    except OSError as error:
        return str(error)
    return None


async def test_mptcp_is_refused(tmp_path: Path, tcp_listener: socket.socket) -> None:
    """IPPROTO_MPTCP (262): Landlock's TCP rules do not cover it."""
    missing = kernel_has(socket.AF_INET, socket.SOCK_STREAM, 262)
    if missing:
        pytest.skip(f"no MPTCP in this kernel: {missing}")
    port = tcp_listener.getsockname()[1]
    body = (
        "    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)\n"
        f"    s.connect(('127.0.0.1', {port})); s.sendall(b'mptcp')"
    )
    assert await python(tmp_path, attempt(body), network=False) == f"Exit code: 0\n{DENIED}\n"
    assert received(tcp_listener) is None
    assert await python(tmp_path, attempt(body), network=True) == "Exit code: 0\nok\n"
    assert received(tcp_listener) == b"mptcp"


_FAST_OPEN = Path("/proc/sys/net/ipv4/tcp_fastopen")
CLIENT_FAST_OPEN = _FAST_OPEN.exists() and int(_FAST_OPEN.read_text()) & 1


async def test_tcp_fast_open_is_refused(tmp_path: Path, tcp_listener: socket.socket) -> None:
    """sendto(MSG_FASTOPEN) connects without connect(), past Landlock."""
    if not CLIENT_FAST_OPEN:
        pytest.skip("TCP Fast Open is off for clients (net.ipv4.tcp_fastopen)")
    port = tcp_listener.getsockname()[1]
    body = f"    socket.socket().sendto(b'tfo', socket.MSG_FASTOPEN, ('127.0.0.1', {port}))"
    assert await python(tmp_path, attempt(body), network=False) == f"Exit code: 0\n{DENIED}\n"
    assert received(tcp_listener) is None
    assert await python(tmp_path, attempt(body), network=True) == "Exit code: 0\nok\n"
    assert received(tcp_listener) == b"tfo"


@pytest.mark.parametrize(
    "call",
    [
        "syscall('sendto', socket.socketpair()[0].fileno(), b'x', 1, socket.MSG_FASTOPEN, 0, 0)",
        "socket.socketpair()[0].sendmsg([b'x'], [], socket.MSG_FASTOPEN)",
        "socket.socketpair()[0].setsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN, 5)",
        "socket.socketpair()[0].setsockopt(socket.IPPROTO_TCP, 30, 1)",  # TCP_FASTOPEN_CONNECT
    ],
    ids=["sendto", "sendmsg", "TCP_FASTOPEN", "TCP_FASTOPEN_CONNECT"],
)
async def test_fast_open_flags_and_options_are_refused_on_any_socket(
    tmp_path: Path, call: str
) -> None:
    """On a socket received from outside (here a unix pair, which allows the flags'
    system calls otherwise): the call itself is refused, whatever the socket."""
    assert await python(tmp_path, attempt(f"    {call}"), network=False) == (
        f"Exit code: 0\n{DENIED}\n"
    )


async def test_udp_is_refused(tmp_path: Path, udp_listener: socket.socket) -> None:
    port = udp_listener.getsockname()[1]
    body = (
        "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
        f".sendto(b'udp', ('127.0.0.1', {port}))"
    )
    assert await python(tmp_path, attempt(body), network=False) == f"Exit code: 0\n{DENIED}\n"
    with pytest.raises(BlockingIOError):
        udp_listener.recv(100)  # a loopback datagram is queued before sendto returns
    assert await python(tmp_path, attempt(body), network=True) == "Exit code: 0\nok\n"
    assert udp_listener.recv(100) == b"udp"


@pytest.mark.parametrize(
    "arguments",
    [
        "socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP",
        "socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP",  # a "ping" socket
        "socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6",
        "socket.AF_PACKET, socket.SOCK_RAW, 0",
        "socket.AF_INET6, socket.SOCK_DGRAM, 0",
        "socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, 0",
        "socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP",
        "socket.AF_VSOCK, socket.SOCK_STREAM, 0",
    ],
)
async def test_other_sockets_are_refused(tmp_path: Path, arguments: str) -> None:
    body = f"    socket.socket({arguments})"
    assert await python(tmp_path, attempt(body), network=False) == f"Exit code: 0\n{DENIED}\n"


async def test_high_bits_do_not_hide_the_family(tmp_path: Path) -> None:
    """socket() takes ints: the kernel drops the high 32 bits of each argument, and
    the filter reads only the low ones, as the kernel does."""
    body = "    syscall('socket', 0x100000002, 1 | 0x500000000, 0)"
    assert await python(tmp_path, attempt(body), network=False) == f"Exit code: 0\n{DENIED}\n"


async def test_unix_and_netlink_sockets_still_work(tmp_path: Path) -> None:
    body = (
        "    a, b = socket.socketpair(); a.send(b'x'); assert b.recv(1) == b'x'\n"
        "    server = socket.socket(socket.AF_UNIX); server.bind('s.sock'); server.listen()\n"
        "    client = socket.socket(socket.AF_UNIX); client.connect('s.sock')\n"
        "    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()"
    )
    assert await python(tmp_path, attempt(body), network=False) == "Exit code: 0\nok\n"


async def test_a_socket_cannot_listen_without_bind(tmp_path: Path) -> None:
    """listen() on an unbound TCP socket takes a port on every address, which Landlock
    does not see (it controls bind): the socket is refused before."""
    body = "    s = socket.socket(); s.listen(); print(s.getsockname())"
    assert await python(tmp_path, attempt(body), network=False) == f"Exit code: 0\n{DENIED}\n"
    result = await python(tmp_path, attempt(body), network=True)
    assert result.startswith("Exit code: 0\n('0.0.0.0', ")


async def test_a_tcp_connection_is_refused(tmp_path: Path, tcp_listener: socket.socket) -> None:
    port = tcp_listener.getsockname()[1]
    root = tmp_path / "root"
    root.mkdir()
    command = f"echo hello > /dev/tcp/127.0.0.1/{port}"
    off = BashTool(root, sandbox=Sandbox(network=False, protect=()), exclusive=False)
    on = BashTool(root, sandbox=Sandbox(network=True, protect=()), exclusive=False)
    with trio.fail_after(20):
        refused = await off.execute({"command": command}, context())
        assert refused.text_content == (
            "Exit code: 1\nSTDOUT:\n\nSTDERR:\nbash: socket: Permission denied\n"
            f"bash: line 1: /dev/tcp/127.0.0.1/{port}: Permission denied\n"
        )
        assert received(tcp_listener) is None
        assert (await on.execute({"command": command}, context())).text_content == (
            "Exit code: 0\n"
        )
    assert received(tcp_listener) == b"hello\n"


IO_URING = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 4, params)
print(fd >= 0 or os.strerror(ctypes.get_errno()))
"""


async def test_io_uring_is_refused(tmp_path: Path) -> None:
    """io_uring can connect and send without the system calls the filter sees."""
    assert await python(tmp_path, IO_URING, network=False) == "Exit code: 0\nPermission denied\n"
    allowed = await python(tmp_path, IO_URING, network=True)
    if allowed != "Exit code: 0\nTrue\n":
        pytest.skip(f"io_uring is off in this kernel: {allowed!r}")


async def test_names_still_resolve_from_etc_hosts(tmp_path: Path) -> None:
    code = "import socket; print(socket.getaddrinfo('localhost', 80, socket.AF_INET)[0][4])\n"
    assert await python(tmp_path, code, network=False) == "Exit code: 0\n('127.0.0.1', 80)\n"


# --------------------------------------------------------------------------- the architecture

OTHER_ABIS = """
import ctypes, mmap, os, subprocess, sys
if len(sys.argv) == 2:  # the parent: how the child ended
    child = subprocess.run([sys.executable, __file__, sys.argv[1], "child"], capture_output=True)
    print(child.returncode, child.stdout.decode().strip())
    sys.exit()
memory = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
memory.write(bytes.fromhex(sys.argv[1]))
address = ctypes.addressof(ctypes.c_char.from_buffer(memory))
print(ctypes.CFUNCTYPE(ctypes.c_long)(address)() == os.getpid(), flush=True)
"""
# mov eax, 20 (getpid in the i386 table); int 0x80; ret
I386_GETPID = "b814000000cd80c3"
# mov eax, 0x40000027 (getpid, x32); syscall; ret
X32_GETPID = "b8270000400f05c3"


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64's other system call tables")
@pytest.mark.parametrize("code", [I386_GETPID, X32_GETPID], ids=["i386", "x32"])
async def test_system_calls_of_another_architecture_kill_the_process(
    tmp_path: Path, code: str
) -> None:
    """Their numbers mean other calls (socketcall is 102 in i386's table): the filter
    lets none through. Without it (network on) the same call runs, if the kernel
    has that table."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "abi.py").write_text(OTHER_ABIS)
    command = f"python3 abi.py {code}"

    async def run(network: bool) -> str:
        tool = BashTool(root, sandbox=Sandbox(network=network, protect=()), exclusive=False)
        with trio.fail_after(20):
            return (await tool.execute({"command": command}, context())).text_content

    assert await run(False) == "Exit code: 0\n-31 \n"  # killed by SIGSYS
    if await run(True) != "Exit code: 0\n0 True\n":
        pytest.skip("this kernel runs no such calls (no IA-32 emulation or x32)")


def test_the_filter_knows_the_architectures_by_their_audit_numbers() -> None:
    """The program starts with the architecture check, then the x32 bit on x86-64."""
    code = _seccomp.program("x86_64")
    first = [struct.unpack("=HBBI", code[i : i + 8]) for i in range(0, 32, 8)]
    kill = len(code) // 8 - 1
    assert first[0] == (0x20, 0, 0, 4)  # load the architecture
    assert first[1] == (0x15, 0, first[1][2], 0xC000003E)  # if not x86-64...
    assert 2 + first[1][2] == kill  # any other: the last instruction, which kills
    assert struct.unpack("=HBBI", code[-8:]) == (0x06, 0, 0, _seccomp.SECCOMP_RET_KILL_PROCESS)
    assert first[3] == (0x35, kill - 4, 0, 0x40000000)  # nr >= the x32 bit: kill
    assert _seccomp.program("aarch64") != code
    arch = _seccomp.architecture()
    assert arch is None or arch in _seccomp.ARCHITECTURES


def test_status_says_what_is_not_refused_where_there_is_no_filter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_seccomp, "architecture", lambda: None)
    status = Sandbox(network=False, protect=()).status()
    assert status.available
    assert status.gaps == (
        "the network is refused over TCP only (UDP and other sockets are not): no seccomp "
        f"filter for this architecture ({os.uname().machine}, 64-bit Python)",
    )
    assert Sandbox(protect=()).status().gaps == ()
    argv = Sandbox(network=False, protect=()).wrap(["true"], "/")
    assert argv[4:9] == [argv[4], argv[5], argv[6], "0", argv[8]]  # no filter asked for
    assert subprocess.run(argv, capture_output=True, check=False).returncode == 0
    monkeypatch.undo()
    assert Sandbox(network=False, protect=()).wrap(["true"], "/")[7] == "1"
