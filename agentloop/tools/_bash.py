"""The ``bash`` tool: run a shell command in the working directory.

Each call runs ``[shell, "-c", command]`` in the workspace root, in a process
group of its own, with stdin closed and stdout and stderr read concurrently
as they arrive. What it guarantees:

- **Nothing outlives the call.** When the command ends, times out or is
  cancelled, the whole process group gets SIGTERM, then, ``grace`` seconds
  later, SIGKILL. So a background job the command started (``server &``)
  is killed when the command returns. The cleanup runs shielded and bounded
  (``grace + 5`` seconds): a cancelled caller can neither skip it nor hang
  on it. A process that leaves the group (``setsid``) escapes this.
- **Output is bounded.** Each stream keeps the first and the last half of
  ``max_output`` bytes and counts the rest; the middle is replaced by
  ``[... N bytes omitted ...]``, cut on character boundaries. The streamed
  updates stop after ``max_output`` bytes per stream too.
- **Secrets stay out.** Inherited environment variables whose name says they
  are a credential (``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``,
  ``PGPASSWORD``, ``SSH_AUTH_SOCK``...), whose value looks like one (a URL
  with a password, a ``ghp_``/``sk-`` token), or that match ``env_deny`` are
  not passed on, unless ``env_allow`` names them (see ``_environ``); nor are
  those :func:`~agentloop.tools.hide_process_credentials` hid.
- **One at a time.** A command can touch anything, so by default a call runs
  alone: no other tool call in the agent tree runs beside it (its claim is
  ``Claim(exclusive=True)``). ``BashTool(exclusive=False)`` lets commands run
  beside other calls.

- **Sandboxed, if asked.** ``BashTool(root, sandbox=Sandbox())`` confines each
  command and everything it starts with Linux Landlock: writes only under the
  root and the temporary directory (but for the protected paths, read-only),
  reads everywhere or only where allowed, optionally no network (see
  ``_sandbox``). Where the kernel cannot, the
  tool logs a warning once and runs commands unsandboxed, with ``sandboxed``
  False so that permissions ask about them; if confining fails as a command
  starts, the command does not run.

The deny list (regular expressions searched in the command text) is a
seatbelt against accidents (``rm -rf /`` typed by a model that meant
``rm -rf ./``), not a sandbox: a command can always be written so that no
pattern matches it. Use the sandbox, or run untrusted models in a container.
"""

from __future__ import annotations

import codecs
import math
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs
import trio

from .._check import number_field
from .._process import end_group, start
from .._tool import (
    NO_CLAIM,
    Claim,
    InvalidArgs,
    ToolContext,
    ToolError,
    ToolResult,
    format_duration,
)
from ._environ import DEFAULT_ENV_DENY, filter_environment
from ._sandbox import Sandbox, SandboxStatus, as_sandbox, failure_message, warn_unavailable
from ._workspace import Workspace, as_workspace

__all__ = ["DEFAULT_DENY", "DEFAULT_ENV_DENY", "BashTool", "CommandRun", "CommandRunner"]


@attrs.frozen(kw_only=True)
class CommandRun:
    """How a command run by a :class:`CommandRunner` ended.

    Attributes:
        output: Its output (stdout and stderr together), possibly cut.
        exit_code: Its exit status; None when a signal ended it.
        signal: The signal's name (``"SIGKILL"``) when one ended it.
        truncated: Output was left out.
        timed_out: It ran past the timeout and was killed.
    """

    output: str
    exit_code: int | None = None
    signal: str | None = None
    truncated: bool = False
    timed_out: bool = False


class CommandRunner(Protocol):
    """Runs ``bash``'s commands somewhere else: in an editor's terminal, say.

    Given to :class:`BashTool` (``runner=``), it runs each command instead of a
    local process; the tool's deny patterns still apply, its sandbox does not.
    """

    async def run(self, command: str, *, cwd: str, timeout: float, max_output: int) -> CommandRun:  # noqa: ASYNC109 - the limit the command is killed at
        """Run ``command`` (a shell command line) in ``cwd``; how it ended.

        On cancellation, the command is killed before this returns.

        Raises:
            ToolError: it could not be run.
        """
        ...


#: Commands refused before they run: what each is, and its regular expression,
#: searched in the command text. A seatbelt against accidents, not a sandbox.
DEFAULT_DENY: Mapping[str, str] = {
    # rm with a recursive flag (-r, -R, -rf, -fr, --recursive, ...) on /, /*, ~ or $HOME
    "a recursive rm of /, ~ or $HOME": (
        r"\brm[ \t]+(?=(?:[^\s;&|]+[ \t]+)*?(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)(?=\s|$))"
        r"(?:[^\s;&|]+[ \t]+)*?[\"']?(?:/\*?|~/?|\$\{?HOME\}?/?)[\"']?(?=$|[\s;&|)])"
    ),
    "making a file system (mkfs)": r"\bmkfs\b",
    # /dev/null and friends are fine
    "dd writing to a device": r"\bdd\b[^;&|\n]*\bof=/dev/(?!(?:null|zero|stdout|stderr|tty)\b|fd/)",
    "output redirected onto a disk device": r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)",
    # under any function name: f(){ f|f& };f
    "a fork bomb": r"(?P<f>[\w:]+)\s*\(\s*\)\s*\{\s*(?P=f)\s*\|\s*(?P=f)\s*&",
}

_CHUNK = 65536
_UPDATE_INTERVAL = 0.1  # seconds between two updates of one stream...
_UPDATE_BYTES = 8192  # ...unless this much is waiting
_PIPE_LINGER = 0.5  # how long the pipes may stay open once the leader has exited
_RUNS_ALONE = Claim(exclusive=True)


_positive = number_field(above=0, owner="BashTool")
_non_negative = number_field(at_least=0, owner="BashTool")
_at_least_two = number_field(at_least=2, integer=True, owner="BashTool")


def _env_dict(value: Mapping[str, str] | None) -> dict[str, str]:
    return {} if value is None else dict(value)


def _patterns(value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError(f"env_allow takes a list of patterns, got the string {value!r}")
    return tuple(value)


def _deny_items(value: Mapping[str, str] | Sequence[str]) -> tuple[tuple[str, str], ...]:
    """(description, regex) pairs; a bare regex describes itself."""
    if isinstance(value, Mapping):
        return tuple(value.items())
    if isinstance(value, str):
        raise TypeError(f"deny takes a list or a mapping of patterns, got the string {value!r}")
    return tuple((pattern, pattern) for pattern in value)


def _compile_all(items: Sequence[tuple[str, str]]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((description, re.compile(pattern)) for description, pattern in items)


@attrs.frozen(eq=False)
class BashTool:
    """The ``bash`` tool: run a shell command in the working directory.

    The result reads ``Exit code: N`` and the output: ``"Exit code: 0\\nhi\\n"``,
    or, when there is stderr, ``"Exit code: 1\\nSTDOUT:\\n<out>\\nSTDERR:\\n<err>"``.
    A non-zero exit is a normal result; a command killed by a signal shows
    ``Exit code: -9 (killed by SIGKILL)``. ``details`` is ``{"exit_code",
    "stdout_bytes", "stderr_bytes", "truncated"}``. A timeout is an error
    result, ``Command timed out after 1.5s`` followed by the output so far, if any.
    Output is streamed as ``ToolExecutionUpdate`` events whose details say
    ``{"stream": "stdout"}`` or ``"stderr"``, at most one per stream every
    100 ms (or per 8 KiB).

    See the module docstring for what happens to the process group.

    Args:
        workspace: The directory commands run in (a :class:`Workspace` or a path).
        timeout: Seconds a command may run; the model may ask for less. The
            tool enforces it itself, so it can kill the group and report the
            output so far: the ``timeout`` *attribute* the loop reads is None
            (the loop's ``tool_timeout`` still applies, if set).
        max_output: Bytes kept from each stream: its first and last half.
        env: Variables added to the commands' environment (always passed, even
            when their names look secret: you gave them).
        inherit_env: Start from this process's environment; if False, from
            ``PATH`` alone.
        env_deny: Glob patterns (case-insensitive) of inherited variables to
            drop, on top of those whose name or value marks them as a
            credential (always dropped).
        env_allow: Glob patterns (case-insensitive) of inherited variables to
            pass even so (``("SSH_AUTH_SOCK",)`` for ``git push`` over SSH).
        deny: Regular expressions; a command containing a match is refused. A
            mapping gives each a description, shown in the refusal (default:
            :data:`DEFAULT_DENY`); a list's patterns describe themselves.
        shell: The shell, run as ``[shell, "-c", command]``.
        grace: Seconds between SIGTERM and SIGKILL.
        exclusive: Each call runs alone: no other tool call anywhere in the
            agent tree runs while a command does, and the next call waits for
            it (a command can touch any file, so nothing else is safe beside
            it). False: commands run beside other calls, and each other,
            claiming nothing.
        sandbox: A :class:`Sandbox` confining every command (True: ``Sandbox()``),
            or None (the default) for none. Checked when the tool is built: if
            this system cannot enforce it, a WARNING is logged once and commands
            run unsandboxed (``sandboxed`` is then False; ``sandbox_status`` says
            why). A sandboxed command gets ``TMPDIR`` set to the sandbox's
            ``temp`` unless ``env`` sets it. If confining fails when a command
            starts, the command does not run and the call is the error
            ``Sandbox error: <why>``.

    Raises:
        TypeError: ``sandbox`` is not a Sandbox, a bool or None.
    """

    workspace: Workspace = attrs.field(factory=Workspace, converter=as_workspace)
    command_timeout: float = attrs.field(
        default=120.0, kw_only=True, alias="timeout", validator=_positive
    )
    max_output: int = attrs.field(default=100_000, kw_only=True, validator=_at_least_two)
    env: dict[str, str] = attrs.field(
        default=None, kw_only=True, converter=_env_dict, repr=False
    )  # values may be secrets: never in repr
    inherit_env: bool = attrs.field(default=True, kw_only=True)
    env_deny: tuple[str, ...] = attrs.field(default=DEFAULT_ENV_DENY, kw_only=True, converter=tuple)
    env_allow: tuple[str, ...] = attrs.field(default=(), kw_only=True, converter=_patterns)
    deny: tuple[tuple[str, str], ...] = attrs.field(
        default=DEFAULT_DENY, kw_only=True, converter=_deny_items
    )
    shell: str = attrs.field(default="bash", kw_only=True)
    grace: float = attrs.field(default=2.0, kw_only=True, validator=_non_negative)
    exclusive: bool = attrs.field(default=True, kw_only=True)
    sandbox: Sandbox | None = attrs.field(default=None, kw_only=True, converter=as_sandbox)
    runner: CommandRunner | None = attrs.field(default=None, kw_only=True)
    _sandbox_status: SandboxStatus | None = attrs.field(init=False, repr=False)
    _launcher: tuple[str, ...] | None = attrs.field(init=False, repr=False)
    _deny_patterns: tuple[tuple[str, re.Pattern[str]], ...] = attrs.field(init=False, repr=False)
    description: str = attrs.field(init=False, repr=False)
    parameters_schema: dict[str, Any] = attrs.field(init=False, repr=False)

    name = "bash"
    label = "Run command"

    @_sandbox_status.default
    def _probe_sandbox(self) -> SandboxStatus | None:
        if self.sandbox is None:
            return None
        status = self.sandbox.status()
        if not status.available or status.gaps:
            warn_unavailable(status)
        return status

    @_launcher.default
    def _launcher_prefix(self) -> tuple[str, ...] | None:
        """The launcher's command line up to and including ``--``; None: unsandboxed."""
        if self.sandbox is None or self._sandbox_status is None:
            return None
        if not self._sandbox_status.available:
            return None
        return tuple(self.sandbox.wrap([], self.workspace.root))

    @_deny_patterns.default
    def _compile_deny(self) -> tuple[tuple[str, re.Pattern[str]], ...]:
        return _compile_all(self.deny)

    @description.default
    def _describe(self) -> str:
        return (
            f"Run a shell command with `{self.shell} -c` in the working directory and "
            "return its exit code, stdout and stderr. Non-interactive: stdin is closed, "
            "so anything that prompts for input gets end-of-file (pass flags such as "
            f"`-y` instead). Each stream shows at most {self.max_output:,} bytes: its "
            "beginning and its end, with the middle omitted, so filter long output "
            "(grep, head, tail). Commands time out after "
            f"{format_duration(self.command_timeout)} (`timeout` sets a shorter limit, "
            "in seconds). When the command ends, everything it started is killed, "
            "background jobs included."
            + (f" {self.sandbox.describe()}" if self.sandbox and self._launcher else "")
        )

    @parameters_schema.default
    def _schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The command line to run.",
                },
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": (
                        "Seconds before the command is killed (at most "
                        f"{format_duration(self.command_timeout)})."
                    ),
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        }

    @property
    def timeout(self) -> None:
        """None: the tool enforces its own timeout (``command_timeout``), not the loop."""
        return None

    async def _run_elsewhere(
        self,
        runner: CommandRunner,
        command: str,
        timeout: float,  # noqa: ASYNC109 - the limit the command is killed at
    ) -> ToolResult:
        """Run ``command`` with ``runner`` (see :class:`CommandRunner`)."""
        run = await runner.run(
            command, cwd=str(self.workspace.root), timeout=timeout, max_output=self.max_output
        )
        if run.timed_out:
            note = f"Command timed out after {format_duration(timeout)}"
            raise ToolError(f"{note}\n{run.output}" if run.output else note)
        if run.exit_code is not None:
            code = run.exit_code
            status = _exit_text(code)
        else:
            number = getattr(signal, run.signal or "", None)
            code = -int(number) if number is not None else -1
            status = f"{code} (killed by {run.signal})"
        return ToolResult.text(
            f"Exit code: {status}\n{run.output}",
            details={"exit_code": code, "truncated": run.truncated},
        )

    @property
    def sandboxed(self) -> bool:
        """True when commands run confined: a sandbox was asked for and this system
        enforces it. :class:`~agentloop.Permissions` reads it (``sandboxed=``)."""
        return self._launcher is not None and self.runner is None

    @property
    def sandbox_status(self) -> SandboxStatus | None:
        """Whether the sandbox is enforced here and, if not, why; None without one."""
        return self._sandbox_status

    def permission_subject(self, params: Mapping[str, Any]) -> tuple[str, str]:
        """``("command", <the command text>)``."""
        return ("command", params["command"])

    def resources(self, params: dict[str, Any]) -> Claim:
        """``Claim(exclusive=True)``, or ``Claim()`` with ``exclusive=False``."""
        return _RUNS_ALONE if self.exclusive else NO_CLAIM

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Run the command; see the class docstring.

        Raises:
            InvalidArgs: the command is missing or empty, or ``timeout`` is not > 0.
            ToolError: the command is denied, cannot be started (or sandboxed), or
                timed out.
        """
        command, timeout = self._arguments(params)
        for description, pattern in self._deny_patterns:
            if pattern.search(command):
                raise ToolError(f"Command blocked by safety policy: {description}.")
        if self.runner is not None:
            return await self._run_elsewhere(self.runner, command, timeout)
        try:
            process = await start(
                [*(self._launcher or ()), self.shell, "-c", command],
                cwd=self.workspace.root,
                env=self._environment(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as error:
            raise ToolError(f"Failed to run command: {error}") from error
        out = _Output("stdout", self.max_output, ctx)
        err = _Output("stderr", self.max_output, ctx)
        try:
            # The senders stream updates apart from the readers, so a slow consumer of
            # events never stops the pipes being read; they finish before the call does.
            async with trio.open_nursery() as senders:
                senders.start_soon(out.updates.run)
                senders.start_soon(err.updates.run)
                timed_out = await self._supervise(process, timeout, out, err)
        finally:
            with trio.CancelScope(shield=True):
                for stream in (process.stdout, process.stderr):
                    if stream is not None:
                        await stream.aclose()
        body, truncated = _format(out, err)
        if timed_out:
            note = f"Command timed out after {format_duration(timeout)}"
            raise ToolError(f"{note}\n{body}" if body else note)
        code = process.returncode
        assert code is not None
        if self._launcher is not None:
            why = failure_message(code, out.capture.head, err.capture.head)
            if why is not None:
                raise ToolError(f"Sandbox error: {why}")
        return ToolResult.text(
            f"Exit code: {_exit_text(code)}\n{body}",
            details={
                "exit_code": code,
                "stdout_bytes": out.capture.total,
                "stderr_bytes": err.capture.total,
                "truncated": truncated,
            },
        )

    # ------------------------------------------------------------------ helpers

    def _arguments(self, params: Mapping[str, Any]) -> tuple[str, float]:
        command = params.get("command")
        if not isinstance(command, str) or not command.strip():
            raise InvalidArgs("command must be a non-empty string")
        timeout = params.get("timeout")
        if timeout is None:
            return command, self.command_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise InvalidArgs(f"timeout must be a number of seconds > 0, got {timeout!r}")
        return command, min(float(timeout), self.command_timeout)

    def _environment(self) -> dict[str, str]:
        if self.inherit_env:
            base = dict(os.environ)
        else:
            base = {"PATH": os.environ.get("PATH", os.defpath)}
        env = filter_environment(base, deny=self.env_deny, allow=self.env_allow)
        env["PWD"] = str(self.workspace.root)  # not the parent's, which bash would distrust
        if self._launcher is not None and self.sandbox is not None and self.sandbox.temp:
            env["TMPDIR"] = self.sandbox.temp  # where the sandbox lets it write
        env.update(self.env)
        return env

    async def _supervise(
        self, process: trio.Process, seconds: float, out: _Output, err: _Output
    ) -> bool:
        """Read both pipes until the command ends; kill the group. True if it timed out."""
        pipes_closed = trio.Event()

        async def read_both() -> None:
            try:
                async with trio.open_nursery() as readers:
                    assert process.stdout is not None
                    assert process.stderr is not None
                    readers.start_soon(out.pump, process.stdout)
                    readers.start_soon(err.pump, process.stderr)
            finally:
                pipes_closed.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_both)
            try:
                with trio.move_on_after(seconds) as timer:
                    await process.wait()
                if not timer.cancelled_caught:
                    # Children still holding the pipes get a moment, then the kill below.
                    with trio.move_on_after(_PIPE_LINGER):
                        await pipes_closed.wait()
            finally:
                await end_group(
                    process, grace=self.grace, done=pipes_closed.wait, what="bash command"
                )
            # After SIGKILL the pipes close at once, unless a process left the group.
            with trio.move_on_after(_PIPE_LINGER):
                await pipes_closed.wait()
            nursery.cancel_scope.cancel()
        return timer.cancelled_caught


def _exit_text(code: int) -> str:
    if code >= 0:
        return str(code)
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"{code} (killed by {name})"


def _format(out: _Output, err: _Output) -> tuple[str, bool]:
    """The output part of the result text, and whether anything was omitted."""
    stdout, stdout_cut = out.capture.text()
    stderr, stderr_cut = err.capture.text()
    if err.capture.total == 0:
        return stdout, stdout_cut
    return f"STDOUT:\n{stdout}\nSTDERR:\n{stderr}", stdout_cut or stderr_cut


# --------------------------------------------------------------------------- output


class _Capture:
    """A stream's first ``limit // 2`` and last ``limit - limit // 2`` bytes, and its size."""

    __slots__ = ("_head_limit", "_tail_limit", "head", "tail", "total")

    def __init__(self, limit: int) -> None:
        self._head_limit = limit // 2
        self._tail_limit = limit - limit // 2
        self.head = bytearray()
        self.tail = bytearray()  # the bytes after the head, the latest _tail_limit of them
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        view = memoryview(data)
        room = self._head_limit - len(self.head)
        if room > 0:
            self.head += view[:room]
            view = view[room:]
        if not view or self._tail_limit == 0:
            return
        if len(view) >= self._tail_limit:
            self.tail[:] = view[len(view) - self._tail_limit :]
        else:
            self.tail += view
            excess = len(self.tail) - self._tail_limit
            if excess > 0:
                del self.tail[:excess]

    def text(self) -> tuple[str, bool]:
        """The decoded text, with a marker where bytes were omitted; and whether they were."""
        if self.total == len(self.head) + len(self.tail):
            return (self.head + self.tail).decode("utf-8", errors="replace"), False
        head = _cut_head(bytes(self.head))
        tail = _cut_tail(bytes(self.tail))
        omitted = self.total - len(head) - len(tail)
        return (
            f"{head.decode('utf-8', errors='replace')}\n\n[... {omitted:,} bytes omitted ...]"
            f"\n\n{tail.decode('utf-8', errors='replace')}",
            True,
        )


def _cut_head(data: bytes) -> bytes:
    """``data`` without a multi-byte UTF-8 character that the cut at its end broke."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return data
        if byte >= 0xC0:  # the lead byte of the last character
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data if back >= need else data[:-back]
    return data  # not UTF-8 there; decoding replaces it


def _cut_tail(data: bytes) -> bytes:
    """``data`` without the continuation bytes of a character that the cut broke."""
    start = 0
    while start < min(3, len(data)) and 0x80 <= data[start] < 0xC0:
        start += 1
    return data[start:]


class _Updates:
    """Sends a pipe's output as ``ctx.update`` calls: coalesced, and at most ``budget`` bytes.

    The reader calls :meth:`add` and :meth:`close`, which never block; :meth:`run`,
    a task of its own, sends what waits: at once if 8 KiB waits, the stream has
    ended or the budget is spent, otherwise no sooner than 100 ms after the
    previous update.
    """

    def __init__(self, stream: str, budget: int, ctx: ToolContext) -> None:
        self.stream = stream
        self.budget = budget
        self.ctx = ctx
        self.pending = bytearray()
        self.streamed = 0
        self.overflow = False  # more output than the budget arrived
        self.stopped = False  # the "not streamed" notice was sent; nothing more goes out
        self.closed = False  # the reader is done
        self.next_flush = -math.inf
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._changed = trio.Event()

    @property
    def waiting(self) -> bool:
        """Output is waiting to be sent."""
        return not self.stopped and (bool(self.pending) or self.overflow)

    def add(self, data: bytes) -> None:
        if not (self.stopped or self.overflow):
            room = self.budget - self.streamed - len(self.pending)
            if len(data) > room:
                self.pending += data[:room]
                self.overflow = True
            else:
                self.pending += data
        self._changed.set()

    def close(self) -> None:
        self.closed = True
        self._changed.set()

    async def run(self) -> None:
        """Send updates until the stream has ended and everything is sent."""
        while True:
            if not self.waiting:
                if self.closed:
                    break
                await self._next_change()
            elif (
                self.closed
                or self.overflow
                or len(self.pending) >= _UPDATE_BYTES
                or trio.current_time() >= self.next_flush
            ):
                await self._flush()
            else:
                with trio.move_on_at(self.next_flush):
                    await self._next_change()
        if not self.stopped:
            rest = self._decoder.decode(b"", final=True)  # an unfinished character: U+FFFD
            if rest:
                await self._send(rest)

    async def _next_change(self) -> None:
        self._changed = trio.Event()
        await self._changed.wait()

    async def _flush(self) -> None:
        # Output may arrive (and overflow) while _send waits: the next flush sends it.
        data, overflow = bytes(self.pending), self.overflow
        self.pending.clear()
        self.streamed += len(data)
        text = self._decoder.decode(data)
        if text:
            await self._send(text)
        if overflow:
            self.stopped = True
            await self._send(
                f"\n\n[... {self.stream} beyond {self.budget:,} bytes is not streamed ...]\n\n"
            )
        if not text:
            await trio.lowlevel.checkpoint()

    async def _send(self, text: str) -> None:
        self.next_flush = trio.current_time() + _UPDATE_INTERVAL
        await self.ctx.update(ToolResult.text(text, details={"stream": self.stream}))


class _Output:
    """One pipe of the command: what is kept for the result, and the updates."""

    def __init__(self, stream: str, max_output: int, ctx: ToolContext) -> None:
        self.capture = _Capture(max_output)
        self.updates = _Updates(stream, max_output, ctx)

    async def pump(self, pipe: trio.abc.ReceiveStream) -> None:
        """Read ``pipe`` to its end (or until cancelled), keeping what arrives."""
        try:
            while chunk := await pipe.receive_some(_CHUNK):
                data = bytes(chunk)
                self.capture.add(data)
                self.updates.add(data)
        finally:
            self.updates.close()
