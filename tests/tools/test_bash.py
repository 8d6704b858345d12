"""The bash tool: real processes, output limits, streaming, and killing the whole group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from helpers import run_recorded, texts
from server_common import process_alive

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.tools._bash import DEFAULT_DENY, BashTool, _Output

# Prints the shell's pid and a background child's pid, then waits for ever (or 300 s).
FAMILY = "echo $$; sleep 300 & echo $!; sleep 300"


class Updates:
    """An on_update callback that records each update's text and details."""

    def __init__(self) -> None:
        self.items: list[tuple[str, Any]] = []

    async def __call__(self, partial: al.ToolResult) -> None:
        self.items.append((partial.text_content, partial.details))
        await trio.lowlevel.checkpoint()

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.items)


def context(on_update: Any = None) -> al.ToolContext:
    return al.ToolContext("id", "bash", trio.CancelScope(), on_update, None)


async def run(tool: BashTool, command: str, **params: Any) -> al.ToolResult:
    with trio.fail_after(10):
        return await tool.execute({"command": command, **params}, context())


async def run_error(tool: BashTool, command: str, **params: Any) -> str:
    with trio.fail_after(10), pytest.raises(al.ToolError) as caught:
        await tool.execute({"command": command, **params}, context())
    return str(caught.value)


# --------------------------------------------------------------------------- /proc


def group_members(pgid: int) -> list[int]:
    """The live (non-zombie) processes in process group ``pgid``."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


async def assert_all_dead(leader: int, *pids: int) -> None:
    """Within 2 s, ``pids`` and every member of ``leader``'s group are dead or zombies."""

    def dead() -> bool:
        return not any(process_alive(pid) for pid in (leader, *pids)) and not group_members(leader)

    with trio.fail_after(2):
        while not dead():  # noqa: ASYNC110 (polling /proc: the OS sends no event)
            await trio.sleep(0.01)


def pids_in(text: str) -> list[int]:
    return [int(word) for word in text.split() if word.isdigit()]


@pytest.fixture
def tool(tmp_path: Path) -> BashTool:
    return BashTool(tmp_path)


# --------------------------------------------------------------------------- the tool


def test_attributes() -> None:
    """Name, label, schema, no loop timeout, and the permission subject."""
    tool = BashTool(timeout=30)
    assert (tool.name, tool.label, tool.timeout, tool.command_timeout) == (
        "bash",
        "Run command",
        None,
        30,
    )
    assert tool.parameters_schema["required"] == ["command"]
    assert tool.parameters_schema["additionalProperties"] is False
    assert set(tool.parameters_schema["properties"]) == {"command", "timeout"}
    assert "30s" in tool.description
    assert tool.permission_subject({"command": "ls -l"}) == ("command", "ls -l")
    assert isinstance(tool, al.AgentTool)


def test_repr_hides_env_values() -> None:
    """The env mapping may hold secrets, so the repr leaves it out."""
    assert "hunter2" not in repr(BashTool(env={"DB_PASS": "hunter2"}))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": 0}, "BashTool timeout must be > 0, got 0"),
        ({"max_output": 1}, "BashTool max_output must be an integer >= 2, got 1"),
        ({"grace": -1}, "BashTool grace must be >= 0, got -1"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    """Constructor options are checked."""
    with pytest.raises(ValueError, match=message):
        BashTool(**options)


async def test_echo(tool: BashTool) -> None:
    """Stdout after the exit code, and the details."""
    result = await run(tool, "echo hello")
    assert result == al.ToolResult.text(
        "Exit code: 0\nhello\n",
        details={"exit_code": 0, "stdout_bytes": 6, "stderr_bytes": 0, "truncated": False},
    )


async def test_nonzero_exit_is_a_normal_result(tool: BashTool) -> None:
    """A failing command returns normally; the model reads its exit code."""
    result = await run(tool, "echo no; exit 3")
    assert (result.text_content, result.details["exit_code"]) == ("Exit code: 3\nno\n", 3)


async def test_stderr_shows_both_streams(tool: BashTool) -> None:
    """With stderr, both streams are labelled."""
    result = await run(tool, "echo out; echo err >&2; exit 1")
    assert result.text_content == "Exit code: 1\nSTDOUT:\nout\n\nSTDERR:\nerr\n"
    assert (result.details["stdout_bytes"], result.details["stderr_bytes"]) == (4, 4)


async def test_empty_stdout_with_stderr(tool: BashTool) -> None:
    """An empty stdout shows as nothing under its label."""
    result = await run(tool, "echo oops >&2")
    assert result.text_content == "Exit code: 0\nSTDOUT:\n\nSTDERR:\noops\n"


async def test_stdin_is_closed(tool: BashTool) -> None:
    """A command reading stdin gets end-of-file at once."""
    assert (await run(tool, "cat")).text_content == "Exit code: 0\n"


async def test_runs_in_the_workspace_root(tmp_path: Path) -> None:
    """The command's working directory is the root."""
    tool = BashTool(tmp_path)
    result = await run(tool, "pwd; echo $PWD")
    root = tool.workspace.root
    assert result.text_content == f"Exit code: 0\n{root}\n{root}\n"


async def test_signal_exit(tool: BashTool) -> None:
    """A command killed by a signal says which."""
    result = await run(tool, "kill -9 $$")
    assert result.text_content == "Exit code: -9 (killed by SIGKILL)\n"
    assert result.details["exit_code"] == -9


async def test_spawn_failure(tmp_path: Path) -> None:
    """A missing shell is an error result."""
    error = await run_error(BashTool(tmp_path, shell="/nonexistent/shell"), "true")
    assert error == (
        "Failed to run command: [Errno 2] No such file or directory: '/nonexistent/shell'"
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "Invalid arguments: command must be a non-empty string"),
        ({"command": "  "}, "Invalid arguments: command must be a non-empty string"),
        ({"command": "true", "timeout": 0}, "Invalid arguments: timeout must be a number of "
         "seconds > 0, got 0"),
    ],
)  # fmt: skip
async def test_invalid_arguments(tool: BashTool, params: dict[str, Any], message: str) -> None:
    """Missing or empty commands and bad timeouts are InvalidArgs."""
    with pytest.raises(al.InvalidArgs) as caught:
        await tool.execute(params, context())
    assert str(caught.value) == message


# --------------------------------------------------------------------------- environment


async def test_env_deny_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets in the parent's environment are dropped; ``env`` adds variables."""
    monkeypatch.setenv("FOO_API_KEY", "sk-secret")
    monkeypatch.setenv("my_password", "hunter2")
    monkeypatch.setenv("PLAIN", "kept")
    tool = BashTool(tmp_path, env={"EXTRA": "added"})
    command = 'echo "${FOO_API_KEY-unset} ${my_password-unset} $PLAIN $EXTRA"'
    assert (await run(tool, command)).text_content == "Exit code: 0\nunset unset kept added\n"


#: Common secret variables (name, value): none may reach a command.
SECRETS = [
    ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE"),
    ("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLE"),
    ("GITHUB_TOKEN", "ghp_0123456789abcdefghijABCDEFGHIJ012345"),
    ("GH_TOKEN", "gho_0123456789abcdefghij"),
    ("GITHUB_PAT", "github_pat_11ABCDEFG0123456789_abcdefghij"),
    ("OPENAI_API_KEY", "sk-proj-0123456789abcdef"),
    ("ANTHROPIC_API_KEY", "sk-ant-api03-0123456789"),
    ("API_KEY", "0123456789abcdef"),
    ("APIKEY", "0123456789abcdef"),
    ("SLACK_BOT_TOKEN", "xoxb-0123456789-abcdef"),
    ("NPM_TOKEN", "npm_0123456789abcdefghijABCDEFGHIJ01"),
    ("DB_PASSWORD", "hunter2"),
    ("PGPASSWORD", "hunter2"),
    ("MYSQL_PWD", "hunter2"),
    ("DATABASE_URL", "postgres://app:hunter2@db.example:5432/app"),
    ("REDIS_URL", "redis://:hunter2@cache.example:6379/0"),
    ("SECRET_KEY", "django-insecure-0123456789"),
    ("DJANGO_SECRET_KEY", "django-insecure-0123456789"),
    ("STRIPE_SECRET_KEY", "sk_live_0123456789"),
    ("TWILIO_AUTH_TOKEN", "0123456789abcdef"),
    ("HF_TOKEN", "hf_0123456789abcdefghijABCDEFGHIJ01"),
    ("HUGGING_FACE_HUB_TOKEN", "hf_0123456789abcdefghij"),
    ("CREDENTIALS", "user:pass"),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/home/u/.config/gcloud/key.json"),
    ("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock"),
    ("GPG_PASSPHRASE", "correct horse"),
    ("SENTRY_DSN", "https://0123456789abcdef@o1.ingest.sentry.io/1"),
    ("VAULT_TOKEN", "hvs.0123456789abcdef"),
    ("GITLAB_PAT", "glpat-0123456789abcdefghij"),
    ("DOCKER_AUTH_CONFIG", '{"auths": {}}'),
    ("CI_JOB_JWT", "eyJhbGciOi"),
    ("my_password", "hunter2"),
    ("UPSTREAM", "https://user:pw@proxy.example:8080"),  # the value gives it away
]
#: Ordinary variables that look a little like secrets: all must still reach a command.
ORDINARY = [
    ("PATH", None),
    ("HOME", None),
    ("LANG", "C.UTF-8"),
    ("TERM", "xterm"),
    ("EDITOR", "vi"),
    ("PWD", None),
    ("KEYBOARD_LAYOUT", "us"),
    ("TOKENIZERS_PARALLELISM", "false"),
    ("PASSENGER_ENV", "production"),
    ("GIT_AUTHOR_NAME", "Ada"),
    ("PYTHONPATH", "/src"),
    ("DATABASE_HOST", "db.example"),
    ("PROXY_URL", "https://proxy.example:8080"),
]


async def test_no_common_secret_reaches_a_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Secrets by name or by value are held back; ordinary variables pass."""
    for name, value in SECRETS + ORDINARY:
        if value is not None:
            monkeypatch.setenv(name, value)
    tool = BashTool(tmp_path)
    result = await run(tool, "env -0")
    seen = dict(
        item.split("=", 1)
        for item in result.text_content.split("\n", 1)[1].split("\0")
        if "=" in item
    )
    assert sorted(name for name, _ in SECRETS if name in seen) == []
    assert [name for name, _ in ORDINARY if name not in seen] == []


async def test_env_allow_lets_one_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent.sock")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_0123456789abcdefghijABCDEFGHIJ012345")
    monkeypatch.setenv("PLAIN_NAME", "kept")
    tool = BashTool(tmp_path, env_allow=["ssh_auth_*"], env_deny=["PLAIN_*"])
    command = 'echo "${SSH_AUTH_SOCK-unset} ${GITHUB_TOKEN-unset} ${PLAIN_NAME-unset}"'
    assert (await run(tool, command)).text_content == "Exit code: 0\n/tmp/agent.sock unset unset\n"


def test_env_allow_must_be_a_list(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="env_allow takes a list of patterns"):
        BashTool(tmp_path, env_allow="SSH_AUTH_SOCK")  # type: ignore[arg-type]


async def test_inherit_env_false(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without inheritance only PATH (plus ``env``) is passed on."""
    monkeypatch.setenv("PLAIN", "kept")
    tool = BashTool(tmp_path, inherit_env=False, env={"EXTRA": "added"})
    result = await run(tool, 'echo "${PLAIN-unset} $EXTRA"; ls / > /dev/null && echo path-ok')
    assert result.text_content == "Exit code: 0\nunset added\npath-ok\n"


# --------------------------------------------------------------------------- deny


@pytest.mark.parametrize(
    ("command", "index"),
    [
        ("rm -rf /", 0),
        ("rm -rf /*", 0),
        ("rm -fr /", 0),
        ("rm   -rf    /  ", 0),
        ("sudo rm -r -f --no-preserve-root /", 0),
        ("cd x && rm -rf ~", 0),
        ("mkfs.ext4 /dev/sda1", 1),
        ("dd if=/dev/zero of=/dev/sda bs=1M", 2),
        ("cat disk.img > /dev/sdb", 3),
        (":(){ :|:& };:", 4),
        (":() { : | : & }; :", 4),
    ],
)
async def test_default_deny(tmp_path: Path, command: str, index: int) -> None:
    """Each default pattern refuses its command with the exact message."""
    tool = BashTool(tmp_path, shell="true")  # were a pattern to miss, nothing would run
    assert await run_error(tool, command) == (
        f"Command blocked by safety policy: {list(DEFAULT_DENY)[index]}."
    )


@pytest.mark.parametrize(
    "command",
    ["rm -rf ./build", "rm -rf /tmp/x", "rm -f /", "dd if=/dev/zero of=/dev/null count=1"],
)
async def test_deny_lets_near_misses_through(tmp_path: Path, command: str) -> None:
    """Commands that only look like a denied one run."""
    tool = BashTool(tmp_path, shell="true")
    assert (await run(tool, command)).text_content == "Exit code: 0\n"


async def test_custom_deny(tmp_path: Path) -> None:
    """The deny list can be replaced."""
    tool = BashTool(tmp_path, deny=[r"\bgit\s+push\b"])
    assert await run_error(tool, "git  push origin") == (
        r"Command blocked by safety policy: \bgit\s+push\b."
    )


# --------------------------------------------------------------------------- output limits


async def test_huge_output_is_bounded(tool: BashTool) -> None:
    """50 MB of output: head and tail with the exact marker; updates stop after max_output."""
    updates = Updates()
    start = trio.current_time()
    with trio.fail_after(10):
        result = await tool.execute(
            {"command": "head -c 50000000 /dev/zero | tr '\\0' a"}, context(updates)
        )
    elapsed = trio.current_time() - start
    assert result.text_content == (
        "Exit code: 0\n"
        + "a" * 50_000
        + "\n\n[... 49,900,000 bytes omitted ...]\n\n"
        + "a" * 50_000
    )
    assert result.details == {
        "exit_code": 0,
        "stdout_bytes": 50_000_000,
        "stderr_bytes": 0,
        "truncated": True,
    }
    notice = "\n\n[... stdout beyond 100,000 bytes is not streamed ...]\n\n"
    assert updates.text == "a" * 100_000 + notice
    assert len(updates.items) <= 2 + 100_000 / 8192 + elapsed / 0.1


async def test_output_at_the_limit_is_whole(tmp_path: Path) -> None:
    """Exactly max_output bytes (odd, too): nothing omitted, no marker."""
    result = await run(BashTool(tmp_path, max_output=11), "printf 0123456789X")
    assert (result.text_content, result.details["truncated"]) == (
        "Exit code: 0\n0123456789X",
        False,
    )


@pytest.mark.parametrize(
    ("printf", "expected"),
    [
        # "€" is 3 bytes: the head cut (5 bytes) and the tail cut (5) fall inside one
        ("abcd\\xe2\\x82\\xac0123456789\\xe2\\x82\\xacxyz", "abcd|16|xyz"),
        # "😀" is 4 bytes, cut after 2 of them
        ("abc\\xf0\\x9f\\x98\\x800123456789\\xf0\\x9f\\x98\\x80xyz", "abc|18|xyz"),
        # the cuts fall between characters: nothing is dropped
        ("a\\xe2\\x82\\xacb0123456789c\\xe2\\x82\\xacd", "a€b|10|c€d"),
    ],
)
async def test_cuts_fall_on_character_boundaries(
    tmp_path: Path, printf: str, expected: str
) -> None:
    """A character split by the head or tail cut is left out whole: no U+FFFD."""
    result = await run(BashTool(tmp_path, max_output=10), f"printf '{printf}'")
    head, omitted, tail = expected.split("|")
    assert result.text_content == (
        f"Exit code: 0\n{head}\n\n[... {omitted} bytes omitted ...]\n\n{tail}"
    )


# --------------------------------------------------------------------------- streaming


async def test_updates_stream_a_slow_producer_in_order(tool: BashTool) -> None:
    """Each line of a slow producer is streamed as it comes; together they are the output."""
    updates = Updates()
    with trio.fail_after(10):
        result = await tool.execute(
            {"command": "for i in 1 2 3; do echo $i; sleep 0.2; done; echo e >&2"},
            context(updates),
        )
    assert result.text_content == "Exit code: 0\nSTDOUT:\n1\n2\n3\n\nSTDERR:\ne\n"
    stdout = [text for text, details in updates.items if details == {"stream": "stdout"}]
    stderr = [text for text, details in updates.items if details == {"stream": "stderr"}]
    assert ("".join(stdout), stderr) == ("1\n2\n3\n", ["e\n"])
    assert 1 <= len(stdout) <= 3


async def test_updates_of_a_fast_producer_are_coalesced(tool: BashTool) -> None:
    """Thousands of small writes make a handful of updates, not one per read."""
    updates = Updates()
    start = trio.current_time()
    with trio.fail_after(10):
        result = await tool.execute(
            {"command": "for i in $(seq 3000); do echo $i; done"}, context(updates)
        )
    elapsed = trio.current_time() - start
    output = "".join(f"{i}\n" for i in range(1, 3001))
    assert result.text_content == f"Exit code: 0\n{output}"
    assert updates.text == output
    assert len(updates.items) <= 2 + elapsed / 0.1 + len(output) / 8192


async def test_update_timing(autojump_clock: Any) -> None:
    """At most one update per 100 ms per stream, sooner once 8 KiB waits; the rest at EOF."""
    send, receive = trio.testing.memory_stream_one_way_pair()
    seen: list[tuple[float, str]] = []

    async def on_update(partial: al.ToolResult) -> None:
        seen.append((round(trio.current_time() - start, 3), partial.text_content))

    output = _Output("stdout", 100_000, context(on_update))
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(output.updates.run)
        nursery.start_soon(output.pump, receive)
        for at, data in [(0.0, b"a"), (0.03, b"b"), (0.06, b"c"), (0.25, b"d"), (0.27, b"e")]:
            await trio.sleep_until(start + at)
            await send.send_all(data)
        await trio.sleep_until(start + 0.28)
        await send.send_all(b"x" * 9000)
        await trio.sleep_until(start + 0.29)
        await send.send_all(b"f")
        await send.aclose()
    assert seen == [(0.0, "a"), (0.1, "bc"), (0.25, "d"), (0.28, "e" + "x" * 9000), (0.29, "f")]


async def test_a_stalled_consumer_does_not_stop_reading() -> None:
    """While an update waits for a slow consumer the pipe is still read; nothing is lost."""
    send, receive = trio.testing.memory_stream_one_way_pair()
    release = trio.Event()
    seen: list[str] = []

    async def on_update(partial: al.ToolResult) -> None:
        seen.append(partial.text_content)
        await release.wait()

    output = _Output("stdout", 100_000, context(on_update))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(output.updates.run)
        nursery.start_soon(output.pump, receive)
        await send.send_all(b"one\n")
        await trio.testing.wait_all_tasks_blocked()
        await send.send_all(b"two\n")
        await send.aclose()
        await trio.testing.wait_all_tasks_blocked()
        assert (seen, output.capture.head, output.updates.closed) == (
            ["one\n"],
            b"one\ntwo\n",
            True,
        )
        release.set()
    assert seen == ["one\n", "two\n"]


async def test_output_overflowing_during_an_update_is_streamed_up_to_the_budget() -> None:
    """Bytes that arrive while an update is sent are streamed before the notice."""
    send, receive = trio.testing.memory_stream_one_way_pair()
    release = trio.Event()
    seen: list[str] = []

    async def on_update(partial: al.ToolResult) -> None:
        seen.append(partial.text_content)
        await release.wait()

    output = _Output("stdout", 10, context(on_update))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(output.updates.run)
        nursery.start_soon(output.pump, receive)
        await send.send_all(b"abc")
        await trio.testing.wait_all_tasks_blocked()
        await send.send_all(b"defghijklmn")
        await send.aclose()
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    notice = "\n\n[... stdout beyond 10 bytes is not streamed ...]\n\n"
    assert seen == ["abc", "defghij", notice]


# --------------------------------------------------------------------------- the process group


async def test_timeout_kills_the_group_and_shows_partial_output(tool: BashTool) -> None:
    """The timeout param: an error with the output so far; leader and children are dead."""
    error = await run_error(tool, FAMILY, timeout=0.5)
    leader, child = pids_in(error.split("\n", 1)[1])
    assert error == f"Command timed out after 500ms\n{leader}\n{child}\n"
    await assert_all_dead(leader, child)


async def test_timeout_is_capped_by_the_tool(tmp_path: Path) -> None:
    """The model may ask for more time than the tool allows; it gets the tool's."""
    tool = BashTool(tmp_path, timeout=0.3)
    error = await run_error(tool, "echo out; echo err >&2; exec sleep 300", timeout=100)
    assert error == "Command timed out after 300ms\nSTDOUT:\nout\n\nSTDERR:\nerr\n"


async def test_a_silent_timeout_is_just_the_note(tmp_path: Path) -> None:
    """With no output so far, the error is the timeout note alone, no trailing newline."""
    error = await run_error(BashTool(tmp_path), "exec sleep 300", timeout=0.2)
    assert error == "Command timed out after 200ms"


async def test_sigkill_after_grace(tmp_path: Path) -> None:
    """A group that ignores SIGTERM gets SIGKILL ``grace`` seconds later."""
    tool = BashTool(tmp_path, grace=0.2)
    start = trio.current_time()
    error = await run_error(tool, "trap '' TERM; " + FAMILY, timeout=0.3)
    assert trio.current_time() - start >= 0.5
    leader, child = pids_in(error.split("\n", 1)[1])
    assert error == f"Command timed out after 300ms\n{leader}\n{child}\n"
    await assert_all_dead(leader, child)


async def test_cancel_kills_the_group(tool: BashTool) -> None:
    """Cancelling execute kills leader and children, and Cancelled propagates."""
    seen: list[str] = []

    async def on_update(partial: al.ToolResult) -> None:
        seen.append(partial.text_content)
        if len(pids_in("".join(seen))) == 2:
            scope.cancel()
        await trio.lowlevel.checkpoint()

    with trio.fail_after(10), trio.CancelScope() as scope:
        await tool.execute({"command": FAMILY}, context(on_update))
    assert scope.cancelled_caught
    await assert_all_dead(*pids_in("".join(seen)))


async def test_agent_abort_kills_the_group(tool: BashTool) -> None:
    """agent.abort() during a command: the call is cancelled and its processes are dead."""
    agent = al.Agent(
        ScriptedProvider([reply(call("bash", {"command": FAMILY})), reply("after")]),
        tools=[tool],
    )
    seen: list[str] = []
    with trio.fail_after(10):
        async with agent.prompt("go") as events:
            async for event in events:
                if isinstance(event, al.ToolExecutionUpdate):
                    seen.append(event.partial_result.text_content)
                    if len(pids_in("".join(seen))) == 2:
                        agent.abort()
    assert texts(agent.messages)[-1] == ("result:error", "call_1=Cancelled: the run was aborted.")
    await assert_all_dead(*pids_in("".join(seen)))


async def test_background_child_holding_the_pipes_is_killed(tool: BashTool) -> None:
    """The leader exits but a child keeps stdout open: the call still returns, child dead."""
    result = await run(tool, "sleep 300 & echo $!")
    (child,) = pids_in(result.text_content.split("\n", 1)[1])
    assert result.text_content == f"Exit code: 0\n{child}\n"
    await assert_all_dead(child)


async def test_detached_background_job_does_not_outlive_the_command(tool: BashTool) -> None:
    """A background job with its output redirected is killed when the command ends."""
    result = await run(tool, "echo $$; sleep 300 > /dev/null 2>&1 & echo $!")
    leader, child = pids_in(result.text_content.split("\n", 1)[1])
    assert result.text_content == f"Exit code: 0\n{leader}\n{child}\n"
    await assert_all_dead(leader, child)


# --------------------------------------------------------------------------- end to end


async def test_agent_runs_bash(tool: BashTool) -> None:
    """Through an Agent: updates stream, and the model gets the result."""
    agent = al.Agent(
        ScriptedProvider([reply(call("bash", {"command": "echo hi"})), reply("done")]),
        tools=[tool],
    )
    with trio.fail_after(10):
        recorder = await run_recorded(agent, "go")
    assert [e.partial_result for e in recorder.of_type(al.ToolExecutionUpdate)] == [
        al.ToolResult.text("hi\n", details={"stream": "stdout"})
    ]
    (end,) = recorder.of_type(al.ToolExecutionEnd)
    assert (end.is_error, end.result.details["exit_code"]) == (False, 0)
    assert texts(agent.messages)[2:] == [
        ("result:ok", "call_1=Exit code: 0\nhi\n"),
        ("assistant:stop", "done"),
    ]


async def test_agent_sees_a_timeout_as_an_error(tool: BashTool) -> None:
    """Through an Agent: a timed-out command is an error result with the output so far."""
    command = {"command": "echo started; exec sleep 300", "timeout": 0.3}
    agent = al.Agent(ScriptedProvider([reply(call("bash", command)), reply("done")]), tools=[tool])
    with trio.fail_after(10):
        await agent.run("go")
    assert texts(agent.messages)[2] == (
        "result:error",
        "call_1=Command timed out after 300ms\nstarted\n",
    )


async def test_deny_descriptions_name_the_danger(tmp_path: Path) -> None:
    """A described pattern shows its description to the model."""
    tool = BashTool(tmp_path, deny={"pushing to a remote": r"\bgit\s+push\b"})
    assert await run_error(tool, "git push") == (
        "Command blocked by safety policy: pushing to a remote."
    )
    assert await run_error(BashTool(tmp_path), "rm -rf /") == (
        "Command blocked by safety policy: a recursive rm of /, ~ or $HOME."
    )
