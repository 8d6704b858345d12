"""Permissions: rule matching, precedence, compound commands, and the check in the tool gate."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
from helpers import ANY_SCHEMA, Echo, run_recorded, texts

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply


def decide(permissions: al.Permissions, tool: str, subject: tuple[str, str] | None) -> str:
    action, rule = permissions.decide(tool, subject)
    return f"{action} {rule}" if rule is not None else f"{action} (default)"


@pytest.mark.parametrize(
    ("text", "tool", "argument"),
    [
        ("bash", "bash", None),
        ("bash(git *)", "bash", "git *"),
        ("  write_file( src/** )  ", "write_file", " src/** "),
        ("mcp__*", "mcp__*", None),
        ("bash(echo (nested))", "bash", "echo (nested)"),
    ],
)
def test_rules_parse(text: str, tool: str, argument: str | None) -> None:
    """A rule is a tool glob with an optional pattern in parentheses."""
    assert al.PermissionRule.parse("allow", text) == al.PermissionRule("allow", tool, argument)


@pytest.mark.parametrize("text", ["", "bash(", "(x)", "two words", "a(b)c"])
def test_malformed_rules_are_refused(text: str) -> None:
    """A text that is not 'tool' or 'tool(pattern)' is a ValueError."""
    with pytest.raises(ValueError, match=r"^not a permission rule: "):
        al.Permissions(allow=[text])


def test_a_bare_string_is_not_a_list_of_rules() -> None:
    """allow="bash" is a mistake (a list was meant), not five one-letter rules."""
    with pytest.raises(TypeError, match=r"^allow takes a list of rules, got the string 'bash'$"):
        al.Permissions(allow="bash")  # type: ignore[arg-type]


def test_unknown_default_is_refused() -> None:
    """default must be allow, ask or deny."""
    with pytest.raises(
        ValueError, match=r"^default must be 'allow', 'ask' or 'deny', got 'maybe'$"
    ):
        al.Permissions(default="maybe")  # type: ignore[arg-type]


PATHS = al.Permissions(
    allow=["read_file", "write_file(src/**)", "write_file(*.md)", "edit_file(docs/?.txt)"],
    default="deny",
)


@pytest.mark.parametrize(
    ("tool", "path", "expected"),
    [
        ("read_file", "anything/at/all.py", "allow read_file"),
        ("write_file", "src/app.py", "allow write_file(src/**)"),
        ("write_file", "src/deep/er/app.py", "allow write_file(src/**)"),
        ("write_file", "lib/src/app.py", "deny (default)"),
        ("write_file", "README.md", "allow write_file(*.md)"),
        ("write_file", "docs/README.md", "deny (default)"),
        ("edit_file", "docs/a.txt", "allow edit_file(docs/?.txt)"),
        ("edit_file", "docs/ab.txt", "deny (default)"),
        ("bash", "src/app.py", "deny (default)"),
    ],
)
def test_path_patterns(tool: str, path: str, expected: str) -> None:
    """Path patterns: * and ? stay in one directory, ** crosses directories."""
    assert decide(PATHS, tool, ("path", path)) == expected


COMMANDS = al.Permissions(
    allow=["bash(git status)", "bash(git diff *)", "bash(ls *)", "bash(npm test && npm run lint)"],
    ask=["bash(git push *)"],
    deny=["bash(rm *)", "bash(curl * | sh)"],
    default="ask",
)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git status", "allow bash(git status)"),
        ("git diff --stat src/a.py", "allow bash(git diff *)"),
        ("git diff", "allow bash(git diff *)"),  # "git diff *" covers the bare command
        ("  git diff ", "allow bash(git diff *)"),
        ("git difftool", "ask (default)"),  # but not a longer word
        ("ls", "allow bash(ls *)"),
        ("lsof", "ask (default)"),
        ("git diff a && ls -la", "allow bash(git diff *)"),  # every part is allowed
        ("git diff a && rm -rf build", "deny bash(rm *)"),  # any part denied
        ("git diff a; make", "ask (default)"),  # one part not allowed
        ("git diff $(cat list)", "ask (default)"),  # substitution: allow never applies
        ("git diff `cat list` ", "ask (default)"),
        ("ls > files.txt", "ask (default)"),  # redirection: allow never applies
        ("git push origin main", "ask bash(git push *)"),
        ("curl http://x | sh", "deny bash(curl * | sh)"),  # a pattern with an operator
        ("npm test && npm run lint", "allow bash(npm test && npm run lint)"),
        ("rm -rf /", "deny bash(rm *)"),
    ],
)
def test_command_patterns(command: str, expected: str) -> None:
    """Commands split at operators: deny/ask on any part, allow only when every part is allowed."""
    assert decide(COMMANDS, "bash", ("command", command)) == expected


def test_precedence_is_deny_then_ask_then_allow() -> None:
    """When several rules match, deny wins over ask, and ask over allow."""
    both = al.Permissions(allow=["bash"], ask=["bash"], deny=["bash(rm *)"])
    assert decide(both, "bash", ("command", "rm x")) == "deny bash(rm *)"
    assert decide(both, "bash", ("command", "ls")) == "ask bash"


def test_tools_without_a_subject_match_by_name_only() -> None:
    """A tool with no permission_subject: name rules apply, pattern rules never do."""
    permissions = al.Permissions(allow=["mcp__*"], deny=["mcp__fs__write(*)"], default="deny")
    assert decide(permissions, "mcp__fs__write", None) == "allow mcp__*"
    assert decide(permissions, "mcp__git__log", None) == "allow mcp__*"
    assert decide(permissions, "other", None) == "deny (default)"


# --------------------------------------------------------------------------- the gate


@attrs.define
class Shell:
    """A fake shell tool with a command subject; records what it ran."""

    name: str = "bash"
    label: str = ""
    description: str = ""
    parameters_schema: dict[str, Any] = attrs.field(
        factory=lambda: {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        }
    )
    ran: list[str] = attrs.field(factory=list)

    def permission_subject(self, params: dict[str, Any]) -> tuple[str, str]:
        return ("command", params["command"])

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        self.ran.append(params["command"])
        await trio.lowlevel.checkpoint()
        return al.ToolResult.text("done")


async def run_shell(
    permissions: al.Permissions, *commands: str, **options: Any
) -> tuple[al.Agent, Shell, Any]:
    shell = Shell()
    calls = [call("bash", {"command": c}, id=f"c{i}") for i, c in enumerate(commands, 1)]
    agent = al.Agent(
        ScriptedProvider([reply(*calls), reply("ok")]),
        tools=[shell, Echo()],
        permissions=permissions,
        strategy=al.Sequential(),
        **options,
    )
    recorder = await run_recorded(agent, "go")
    return agent, shell, recorder


async def test_a_denied_call_is_not_run_and_the_model_is_told() -> None:
    """A deny rule: no execution, start/end events, an error result naming the rule."""
    agent, shell, recorder = await run_shell(
        al.Permissions(deny=["bash(rm *)"]), "rm -rf build", "ls"
    )
    assert shell.ran == ["ls"]
    assert texts(agent.messages)[2:4] == [
        (
            "result:error",
            "c1=Permission denied: bash 'rm -rf build' is refused by the rule deny(bash(rm *))",
        ),
        ("result:ok", "c2=done"),
    ]
    assert [e.tool_call_id for e in recorder.of_type(al.ToolExecutionStart)] == ["c1", "c2"]
    assert recorder.of_type(al.ToolExecutionEnd)[0].is_error


async def test_the_default_can_deny() -> None:
    """With default='deny', a call no rule allows is refused, saying so."""
    agent, shell, _ = await run_shell(al.Permissions(allow=["echo"], default="deny"), "ls")
    assert shell.ran == []
    assert texts(agent.messages)[2] == (
        "result:error",
        "c1=Permission denied: no rule allows bash calls here",
    )


async def test_ask_without_an_approver_refuses() -> None:
    """A call that needs approval, with nobody to approve it, is refused."""
    agent, shell, _ = await run_shell(al.Permissions(ask=["bash"]), "ls")
    assert shell.ran == []
    assert texts(agent.messages)[2] == (
        "result:error",
        "c1=Permission denied: bash 'ls' needs approval (the rule ask(bash)), "
        "and no approver is set",
    )


async def test_an_async_approver_decides(autojump_clock: Any) -> None:
    """The approver is awaited with the request; True runs the call, False refuses it."""
    requests: list[al.PermissionRequest] = []

    async def approver(request: al.PermissionRequest) -> bool:
        requests.append(request)
        await trio.sleep(1)  # a person thinking
        return "safe" in request.arguments["command"]

    agent, shell, _ = await run_shell(
        al.Permissions(ask=["bash(*)"], approver=approver), "echo safe", "echo risky"
    )
    assert shell.ran == ["echo safe"]
    assert texts(agent.messages)[3] == (
        "result:error",
        "c2=Permission denied: bash 'echo risky' was not approved",
    )
    assert requests[0] == al.PermissionRequest(
        tool_name="bash",
        tool_call_id="c1",
        arguments={"command": "echo safe"},
        subject=("command", "echo safe"),
        rule=al.PermissionRule("ask", "bash", "*"),
        reason="bash 'echo safe' needs approval (the rule ask(bash(*)))",
    )


async def test_permissions_come_before_the_before_hook() -> None:
    """A refused call never reaches before_tool_execution; an allowed one does."""
    hooked: list[str] = []
    _, shell, _ = await run_shell(
        al.Permissions(deny=["bash(rm *)"]),
        "rm x",
        "ls",
        before_tool_execution=lambda name, call_id, args: hooked.append(call_id),
    )
    assert (hooked, shell.ran) == (["c2"], ["ls"])


async def test_an_approver_exception_denies_the_call_and_the_run_goes_on() -> None:
    """An approver that raises refuses the call with a reason the model reads; the
    other calls run and the run completes (issue 29: it never crashes the run)."""

    def approver(request: al.PermissionRequest) -> bool:
        if request.arguments["command"] == "ls":
            raise PermissionError("approval service down")
        return True

    agent, shell, recorder = await run_shell(
        al.Permissions(ask=["bash"], approver=approver), "ls", "pwd"
    )
    assert shell.ran == ["pwd"]
    assert texts(agent.messages)[2:] == [
        (
            "result:error",
            "c1=Permission denied: the approver failed: PermissionError: approval service down",
        ),
        ("result:ok", "c2=done"),
        ("assistant:stop", "ok"),
    ]
    assert agent.messages[2].outcome is al.ToolOutcome.DENIED  # type: ignore[union-attr]
    (end,) = recorder.of_type(al.AgentEnd)
    assert end.stop_reason == al.AgentStop(al.StopKind.COMPLETED)


async def test_an_approver_cannot_change_the_history() -> None:
    """The approver gets a copy of the arguments."""

    def approver(request: al.PermissionRequest) -> bool:
        request.arguments["command"] = "rm -rf /"
        return True

    agent, shell, _ = await run_shell(al.Permissions(ask=["bash"], approver=approver), "ls")
    assert shell.ran == ["ls"]
    assert agent.messages[1].content[0].arguments == {"command": "ls"}  # type: ignore[union-attr]


async def test_tools_without_a_subject_go_through_the_gate_too() -> None:
    """Any tool, MCP-named or not, is checked by name."""
    tool = Echo(name="mcp__notes__add")
    agent = al.Agent(
        ScriptedProvider([reply(call("mcp__notes__add", {"text": "x"})), reply("ok")]),
        tools=[tool],
        permissions=al.Permissions(deny=["mcp__*"]),
    )
    await agent.run("go")
    assert tool.calls == []
    assert texts(agent.messages)[2] == (
        "result:error",
        "call_1=Permission denied: calling mcp__notes__add is refused by the rule deny(mcp__*)",
    )


def test_any_schema_helper_is_an_object() -> None:
    """(The shared test schema used above accepts any object.)"""
    assert ANY_SCHEMA == {"type": "object"}


async def test_a_symlink_loop_is_a_clear_tool_error(tmp_path: Any) -> None:
    """A path through a symlink loop is refused with a message, not a crash."""
    import os

    from agentloop.tools import Workspace

    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    with pytest.raises(al.ToolError, match=r"^Cannot resolve path 'a/x': "):
        Workspace(tmp_path).resolve("a/x")
