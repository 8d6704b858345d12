"""agentloop.session: record a run, load it, resume it; torn files, prun records, sub-agents."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
from helpers import Echo, Sleeper, texts

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.session import (
    INTERRUPTED,
    SESSION_FORMAT,
    SessionRecorder,
    find_session,
    list_sessions,
    load_session,
    new_session_path,
    session_directory,
)
from agentloop.testing import assert_well_formed
from agentloop.tools import SubAgentTool


async def run_into(
    agent: al.Agent, recorder: SessionRecorder, *prompts: str
) -> list[al.AgentEvent]:
    events: list[al.AgentEvent] = []
    async with agent.prompt(*prompts) as channel:
        async for event in channel:
            recorder.record(event)
            events.append(event)
    return events


@al.tool
async def look(what: str) -> str:
    """Look at something."""
    return f"{what}: " + "x" * 80


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_round_trip_gives_the_same_history(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedProvider(
        [
            reply("Echoing.", call("echo", {"text": "hi"}, id="c1")),
            reply("It said HI."),
            reply("Yes, again."),
        ]
    )
    agent = al.Agent(model, tools=[Echo()])
    with SessionRecorder(path, meta={"model": "scripted"}) as recorder:
        await run_into(agent, recorder, "say hi")
        await run_into(agent, recorder, "again?")
    written = lines(path)
    assert written[0]["type"] == "session"
    assert (written[0]["format"], written[0]["id"], written[0]["meta"]) == (
        SESSION_FORMAT,
        "s",
        {"model": "scripted"},
    )
    assert [line["type"] for line in written[1:8]] == [
        "AgentStart",
        "MessageEnd",
        "MessageEnd",
        "ToolExecutionStart",
        "ToolExecutionEnd",
        "MessageEnd",
        "TurnEnd",
    ]
    session = load_session(path)
    assert session.session_id == "s"
    assert session.meta == {"model": "scripted"}
    assert session.messages == agent.messages
    assert session.warnings == ()
    assert session.records == ()
    assert session.children == {}


async def test_a_torn_last_line_is_skipped_with_a_warning_and_appending_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedProvider([reply("One."), reply("Two.")])
    agent = al.Agent(model)
    with SessionRecorder(path) as recorder:
        await run_into(agent, recorder, "first")
    with path.open("a") as file:
        file.write('{"type":"MessageEnd","loop_id":"x","mess')  # the process died here
    session = load_session(path)
    assert texts(session.messages) == [("user", "first"), ("assistant:stop", "One.")]
    (warning,) = session.warnings
    assert warning.startswith(f"{path}: skipped a torn last line: ")
    assert [r.getMessage() for r in caplog.records if r.name == "agentloop.session"] == [warning]

    # Resuming appends to the same file, on a line of its own.
    resumed = al.Agent(model)
    session.restore(resumed)
    with SessionRecorder(path) as recorder:
        assert recorder.session_id == "s"
        await run_into(resumed, recorder, "second")
    again = load_session(path)
    assert texts(again.messages) == [
        ("user", "first"),
        ("assistant:stop", "One."),
        ("user", "second"),
        ("assistant:stop", "Two."),
    ]
    assert len(again.warnings) == 1
    assert again.warnings[0].startswith(f"{path}: skipped line ")


def test_a_file_that_is_not_a_session(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"type": "AgentStart", "loop_id": "a"}\n')
    with pytest.raises(ValueError, match="is not an agentloop session"):
        load_session(path)


async def test_a_run_cut_off_mid_turn_loads_well_formed_and_resumes(tmp_path: Path) -> None:
    """The recording stops during a tool call, as when the process is killed."""
    path = tmp_path / "s.jsonl"
    model = ScriptedProvider([reply("Sleeping.", call("sleep", {"seconds": 100}, id="c1"))])
    agent = al.Agent(model, tools=[Sleeper()])
    with SessionRecorder(path) as recorder, trio.move_on_after(1):
        # No TurnEnd is ever written: the run is cut short mid-tool.
        async with agent.prompt("nap") as channel:
            async for event in channel:
                recorder.record(event)
                if isinstance(event, al.ToolExecutionStart):
                    recorder.flush()
                    break
    session = load_session(path)
    assert texts(session.messages) == [
        ("user", "nap"),
        ("assistant:tool_use", "Sleeping.[sleep#c1]"),
        ("result:error", f"c1={INTERRUPTED}"),
    ]
    assert_well_formed(session.messages)

    model2 = ScriptedProvider([reply("Awake.")])
    resumed = al.Agent(model2, tools=[Sleeper()])
    session.restore(resumed)
    await resumed.run("wake up")
    assert texts(model2.requests[0].messages) == [
        ("user", "nap"),
        ("assistant:tool_use", "Sleeping.[sleep#c1]"),
        ("result:error", f"c1={INTERRUPTED}"),
        ("user", "wake up"),
    ]


async def test_an_aborted_turn_is_loaded_in_its_final_form(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedProvider([reply(call("sleep", {}, id="c1"))])
    agent = al.Agent(model, tools=[Sleeper()])
    with SessionRecorder(path) as recorder:
        async with agent.prompt("nap") as channel:
            async for event in channel:
                recorder.record(event)
                if isinstance(event, al.ToolExecutionStart):
                    agent.abort()
    session = load_session(path)
    assert session.messages == agent.messages
    assert texts(session.messages)[1:] == [
        ("assistant:aborted", "[sleep#c1]"),
        ("result:error", "c1=Cancelled: the run was aborted."),
    ]


async def test_prun_records_are_replayed_into_the_working_context(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedProvider(
        [
            reply(call("look", {"what": "a"}, id="c1")),
            reply(call("look", {"what": "b"}, id="c2")),
            reply(call("prun_with_memo", {"tokens": 30, "memo": "b is empty"}, id="p1")),
            reply("Final."),
        ]
    )
    agent = al.Agent(model, tools=[look], prun=True)
    with SessionRecorder(path) as recorder:
        await run_into(agent, recorder, "explore")
    session = load_session(path)
    (record,) = session.records
    assert isinstance(record, al.PrunRecord)
    assert record.memo == "b is empty"

    resumed = al.Agent(ScriptedProvider([]), tools=[look], prun=True)
    session.restore(resumed)
    assert resumed.messages == agent.messages
    assert list(resumed.context.working_context()) == list(agent.context.working_context())
    assert ("user", "[Pruned context summary: b is empty]") in texts(
        resumed.context.working_context()
    )


async def test_a_sub_agent_run_is_recorded_and_linked(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with SessionRecorder(path) as recorder:
        helper = SubAgentTool(
            "helper",
            ScriptedProvider([reply(call("echo", {"text": "deep"}, id="k1")), reply("DEEP done.")]),
            tools=[Echo()],
            on_event=recorder.record,
        )
        model = ScriptedProvider(
            [reply(call("helper", {"task": "go deep"}, id="c1")), reply("Ok.")]
        )
        agent = al.Agent(model, tools=[helper])
        events = await run_into(agent, recorder, "delegate")
    (end,) = [e for e in events if isinstance(e, al.ToolExecutionEnd)]
    assert end.child_loop_id is not None
    session = load_session(path)
    assert session.messages == agent.messages
    assert list(session.children) == [end.child_loop_id]
    assert texts(session.children[end.child_loop_id]) == [
        ("user", "go deep"),
        ("assistant:tool_use", "[echo#k1]"),
        ("result:ok", "k1=DEEP"),
        ("assistant:stop", "DEEP done."),
    ]


async def test_listing_and_finding_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTLOOP_HOME", str(tmp_path / "home"))
    assert session_directory() == tmp_path / "home" / "sessions"
    assert list_sessions() == []
    first = new_session_path()
    assert first.parent == tmp_path / "home" / "sessions"
    assert first.name.endswith(".jsonl")
    for path, prompt in ((first, "an old question " * 6), (first.with_name("b.jsonl"), "new")):
        with SessionRecorder(path) as recorder:
            await run_into(al.Agent(ScriptedProvider([reply("Yes.")])), recorder, prompt)
    (first.parent / "notes.jsonl").write_text("not a session\n")
    os.utime(first, (1, 1))  # the older one
    found = list_sessions()
    assert [(info.session_id, info.title, info.messages) for info in found] == [
        ("b", "new", 2),
        (first.stem, ("an old question " * 6)[:59].strip() + "…", 2),
    ]
    assert find_session("b") == first.with_name("b.jsonl")
    assert find_session(first.stem[:10]) == first
    with pytest.raises(LookupError, match="no session 'zzz' in "):
        find_session("zzz")


async def test_a_listed_session_says_which_directory_it_was_started_in(tmp_path: Path) -> None:
    """SessionInfo.cwd: the header's meta ``cwd``; None for a file that does not say."""
    for name, meta in (("here", {"cwd": str(tmp_path / "w")}), ("old", {"model": "m"})):
        with SessionRecorder(tmp_path / f"{name}.jsonl", meta=meta) as recorder:
            await run_into(al.Agent(ScriptedProvider([reply("Yes.")])), recorder, name)
    found = {info.session_id: info.cwd for info in list_sessions(tmp_path)}
    assert found == {"here": tmp_path / "w", "old": None}


def test_the_data_directory_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTLOOP_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert session_directory() == tmp_path / "agentloop" / "sessions"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert session_directory() == Path.home() / ".local" / "share" / "agentloop" / "sessions"


def test_a_closed_recorder_refuses_to_write(tmp_path: Path) -> None:
    recorder = SessionRecorder(tmp_path / "s.jsonl")
    recorder.close()
    with pytest.raises(ValueError, match="is closed"):
        recorder.record(al.AgentStart(loop_id="a"))
    recorder.record(al.TurnStart(loop_id="a", turn_index=0))  # not kept: no write, no error


async def test_a_file_cut_anywhere_loads_well_formed(tmp_path: Path) -> None:
    """Every prefix of a recording (a crash at any byte) loads, with a history a model accepts."""
    path = tmp_path / "s.jsonl"
    model = ScriptedProvider(
        [
            reply(
                "Echoing.",
                call("echo", {"text": "a"}, id="c1"),
                call("echo", {"text": "b"}, id="c2"),
            ),
            reply("Done."),
        ]
    )
    agent = al.Agent(model, tools=[Echo()])
    with SessionRecorder(path) as recorder:
        await run_into(agent, recorder, "go")
    data = path.read_bytes()
    header_end = data.index(b"\n") + 1
    seen_lengths = set()
    for cut in range(header_end, len(data) + 1):
        part = tmp_path / "cut.jsonl"
        part.write_bytes(data[:cut])
        session = load_session(part)
        assert_well_formed(session.messages)
        for got, recorded in zip(session.messages, agent.messages, strict=False):
            interrupted = isinstance(got, al.ToolResultMessage) and got.text == INTERRUPTED
            assert got == recorded or interrupted
        seen_lengths.add(len(session.messages))
    # Nothing; the prompt; the calls (closed as interrupted until their results); all.
    assert seen_lengths == {0, 1, 4, 5}


async def test_compaction_records_are_replayed_into_the_working_context(tmp_path: Path) -> None:
    @al.tool
    async def read(n: int) -> str:
        """Read part n."""
        return "\n".join(f"line {i} " + "y" * 10 for i in range(200))

    config = al.CompactionConfig(
        context_window=2000, keep_first=1, keep_recent=2, tool_output_max_lines=5
    )
    model = ScriptedProvider(
        [*(reply(call("read", {"n": n}, id=f"c{n}")) for n in range(1, 5)), reply("done")]
    )
    agent = al.Agent(model, tools=[read], compaction=config)
    path = tmp_path / "s.jsonl"
    with SessionRecorder(path) as recorder:
        events = await run_into(agent, recorder, "go")
    compactions = [e.record for e in events if isinstance(e, al.CompactionEnded)]
    assert compactions
    session = load_session(path)
    assert session.records == tuple(compactions)
    resumed = al.Agent(ScriptedProvider([]), tools=[read], compaction=config)
    session.restore(resumed)
    assert resumed.messages == agent.messages
    assert list(resumed.context.working_context()) == list(agent.context.working_context())
    assert len(resumed.context.working_context()) < len(resumed.messages)
