"""default_tools(): the six tools together, in a real directory, behind a permission policy."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import run_recorded, texts

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.tools import (
    BashTool,
    EditFileTool,
    ListFilesTool,
    ReadFileTool,
    SearchTool,
    Workspace,
    WriteFileTool,
    default_tools,
)


def test_six_tools_in_order_sharing_one_workspace(tmp_path: Path) -> None:
    """bash, read_file, write_file, edit_file, list_files, search: one Workspace for all."""
    tools = default_tools(tmp_path)
    assert [type(tool) for tool in tools] == [
        BashTool,
        ReadFileTool,
        WriteFileTool,
        EditFileTool,
        ListFilesTool,
        SearchTool,
    ]
    assert [tool.name for tool in tools] == [
        "bash",
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "search",
    ]
    workspaces = {id(tool.workspace) for tool in tools}  # type: ignore[attr-defined]
    assert len(workspaces) == 1
    assert tools[0].workspace.root == tmp_path.resolve()  # type: ignore[attr-defined]


def test_a_workspace_is_used_as_given(tmp_path: Path) -> None:
    """Passing a Workspace shares that very object."""
    workspace = Workspace(tmp_path)
    assert all(tool.workspace is workspace for tool in default_tools(workspace))  # type: ignore[attr-defined]


def test_the_root_defaults_to_the_current_directory_and_stays_put(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """root="." is resolved once: a later chdir does not move the tools."""
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    tools = default_tools()
    monkeypatch.chdir(tmp_path)
    assert tools[1].workspace.root == (tmp_path / "a").resolve()  # type: ignore[attr-defined]


def test_a_root_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    """A file or a missing path is a ValueError naming it."""
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match=r"^the tools' root must be a directory: "):
        default_tools(tmp_path / "f")
    with pytest.raises(ValueError, match=r"^the tools' root must be a directory: "):
        default_tools(tmp_path / "missing")


def test_every_schema_is_valid_and_provider_friendly(tmp_path: Path) -> None:
    """Each schema is valid JSON Schema, an object, with no top-level oneOf/anyOf/allOf
    (Anthropic refuses those), and every required property is declared."""
    for tool in default_tools(tmp_path):
        schema = tool.parameters_schema
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object", tool.name
        assert not {"oneOf", "anyOf", "allOf"} & schema.keys(), tool.name
        assert set(schema.get("required", [])) <= schema["properties"].keys(), tool.name
        assert tool.description, tool.name
        assert tool.label, tool.name


def _results(recorder: Any) -> list[tuple[str, bool, str]]:
    return [
        (event.tool_name, event.is_error, event.result.text_content)
        for event in recorder.events
        if isinstance(event, al.ToolExecutionEnd)
    ]


async def test_a_session_with_all_six_tools(tmp_path: Path) -> None:
    """A scripted model writes, edits, reads, runs, lists and searches real files."""
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "junk.py").write_text("greeting = 'ignored'\n")
    provider = ScriptedProvider(
        [
            reply(call("write_file", {"path": "src/hello.py", "content": "print('hi')\n"})),
            reply(
                call(
                    "edit_file",
                    {"path": "src/hello.py", "old_text": "'hi'", "new_text": "'hello'"},
                )
            ),
            reply(call("read_file", {"path": "src/hello.py"})),
            reply(call("bash", {"command": "python3 src/hello.py"})),
            reply(call("list_files", {})),
            reply(call("search", {"pattern": "hello"})),
            reply("done"),
        ]
    )
    agent = al.Agent(provider, tools=default_tools(tmp_path))
    recorder = await run_recorded(agent, "go")

    assert (tmp_path / "src" / "hello.py").read_text() == "print('hello')\n"
    assert _results(recorder) == [
        ("write_file", False, "Wrote 12 bytes to src/hello.py (new file)"),
        (
            "edit_file",
            False,
            "Edited src/hello.py: replaced 1 occurrence\n[line 1 after the edit]\n"
            "     1\tprint('hello')",
        ),
        ("read_file", False, "[src/hello.py: 1 line]\n     1\tprint('hello')"),
        ("bash", False, "Exit code: 0\nhello\n"),
        ("list_files", False, "src/hello.py\n\n(1 file)"),
        ("search", False, "src/hello.py:1:print('hello')\n\n(1 match in 1 file)"),
    ]


async def test_permissions_see_what_each_tool_touches(tmp_path: Path) -> None:
    """Rules match the bash command and the root-relative resolved path of each file tool;
    an escape is refused by the tool even when the policy would let it through."""
    (tmp_path / "src").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("old\n")
    os.symlink(tmp_path / "src", tmp_path / "alias")
    asked: list[tuple[str, tuple[str, str] | None, str | None]] = []

    def approver(request: al.PermissionRequest) -> bool:
        asked.append(
            (
                request.tool_name,
                request.subject,
                None if request.rule is None else str(request.rule),
            )
        )
        return request.subject == ("command", "ls src")

    permissions = al.Permissions(
        allow=["read_file", "list_files", "search", "write_file(src/**)", "bash(echo *)"],
        ask=["bash(ls *)"],
        deny=["bash(rm *)", "edit_file(docs/**)"],
        default="ask",
        approver=approver,
    )
    provider = ScriptedProvider(
        [
            reply(
                call("write_file", {"path": "alias/a.py", "content": "x = 1\n"}, id="w1"),
                call("write_file", {"path": "top.py", "content": "x = 2\n"}, id="w2"),
                call(
                    "edit_file",
                    {"path": "docs/guide.md", "old_text": "old", "new_text": "new"},
                    id="e1",
                ),
                call("bash", {"command": "echo ok && rm -rf src"}, id="b1"),
                call("bash", {"command": "echo ok"}, id="b2"),
                call("bash", {"command": "ls src"}, id="b3"),
                call("bash", {"command": "ls docs"}, id="b4"),
                call("read_file", {"path": "../outside.txt"}, id="r1"),
            ),
            reply("done"),
        ]
    )
    tools = default_tools(tmp_path)
    root = tools[0].workspace.root  # type: ignore[attr-defined]
    agent = al.Agent(
        provider,
        tools=tools,
        permissions=permissions,
        strategy=al.Sequential(),
    )
    await run_recorded(agent, "go")

    assert (tmp_path / "src" / "a.py").read_text() == "x = 1\n"
    assert not (tmp_path / "top.py").exists()
    assert (tmp_path / "docs" / "guide.md").read_text() == "old\n"
    assert asked == [
        ("write_file", ("path", "top.py"), None),
        ("bash", ("command", "ls src"), "bash(ls *)"),
        ("bash", ("command", "ls docs"), "bash(ls *)"),
    ]
    assert texts(agent.messages)[2:] == [
        ("result:ok", "w1=Wrote 6 bytes to src/a.py (new file)"),
        ("result:error", "w2=Permission denied: write_file on 'top.py' was not approved"),
        (
            "result:error",
            "e1=Permission denied: edit_file on 'docs/guide.md' is refused by the rule "
            "deny(edit_file(docs/**))",
        ),
        (
            "result:error",
            "b1=Permission denied: bash 'echo ok && rm -rf src' is refused by the rule "
            "deny(bash(rm *))",
        ),
        ("result:ok", "b2=Exit code: 0\nok\n"),
        ("result:ok", "b3=Exit code: 0\na.py\n"),
        ("result:error", "b4=Permission denied: bash 'ls docs' was not approved"),
        (
            "result:error",
            f"r1=Access denied: '../outside.txt' resolves to '{root.parent / 'outside.txt'}', "
            f"which is outside the working directory '{root}'",
        ),
        ("assistant:stop", "done"),
    ]
