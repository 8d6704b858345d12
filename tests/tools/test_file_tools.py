"""read_file, write_file, edit_file and atomic_write, on real files in a temporary root."""

from __future__ import annotations

import base64
import errno
import os
import pickle
import shutil
import struct
import tempfile
import threading
import warnings
import zlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import agentloop as al
from agentloop._loop import ToolRegistry
from agentloop.testing import ScriptedProvider, call, reply
from agentloop.tools import Workspace
from agentloop.tools._edit import EditFileTool
from agentloop.tools._files import ReadFileTool, WriteFileTool, atomic_write

# --------------------------------------------------------------------------- helpers


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The tools' root: a directory inside tmp_path, so tmp_path itself is outside."""
    path = (tmp_path / "root").resolve()
    path.mkdir()
    return path


def ctx(name: str = "tool") -> al.ToolContext:
    return al.ToolContext(tool_call_id="t1", tool_name=name, cancel_scope=trio.CancelScope())


async def run(tool: Any, **params: Any) -> al.ToolResult:
    result: al.ToolResult = await tool.execute(params, ctx(tool.name))
    return result


async def fails(tool: Any, **params: Any) -> str:
    """Run the tool, expecting a ToolError; its message as the model sees it."""
    with pytest.raises(al.ToolError) as info:
        await tool.execute(params, ctx(tool.name))
    return str(info.value)


def png_1x1() -> bytes:
    """A real 1x1 red PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + chunk(b"IEND", b"")
    )


def jpeg_1x1() -> bytes:
    """A real 1x1 grey baseline JPEG: one block whose coefficients are all zero."""

    def segment(marker: int, data: bytes) -> bytes:
        return struct.pack(">HH", marker, len(data) + 2) + data

    one_code = bytes([1] + [0] * 15) + b"\x00"  # one Huffman code, length 1, for symbol 0
    return (
        b"\xff\xd8"
        + segment(0xFFDB, b"\x00" + bytes([1] * 64))
        + segment(0xFFC0, b"\x08\x00\x01\x00\x01\x01\x01\x11\x00")
        + segment(0xFFC4, b"\x00" + one_code)
        + segment(0xFFC4, b"\x10" + one_code)
        + segment(0xFFDA, b"\x01\x01\x00\x00\x3f\x00")
        + b"\x3f"  # DC: category 0, AC: end of block, padded with 1 bits
        + b"\xff\xd9"
    )


NOBODY = 65534


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A root another user can enter (tmp_path's parents are private to us)."""
    path = Path(tempfile.mkdtemp(prefix="agentloop-perm-")).resolve()
    path.chmod(0o755)
    try:
        yield path
    finally:
        for entry in path.rglob("*"):
            entry.chmod(0o755 if entry.is_dir() else 0o644)
        shutil.rmtree(path)


def unprivileged(scenario: Callable[[], Awaitable[str]]) -> str:
    """``trio.run(scenario)`` where file permissions apply.

    As root (containers, CI), permissions are not checked for us, so the scenario
    runs in a forked child that has dropped to uid/gid ``nobody``; its result or
    its exception comes back through a pipe. Otherwise it runs here.
    """
    if os.geteuid() != 0:
        return trio.run(scenario)
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads alive
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; its outcome is asserted by the parent
        outcome: tuple[str, str]
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            outcome = ("ok", trio.run(scenario))
        except BaseException as error:
            outcome = ("error", f"{type(error).__name__}: {error}")
        with os.fdopen(write_end, "wb") as pipe:
            pickle.dump(outcome, pipe)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    kind, value = pickle.loads(data)
    assert kind == "ok", value
    return str(value)


TOOLS = {
    "read": (ReadFileTool, {}),
    "write": (WriteFileTool, {"content": "pwned"}),
    "edit": (EditFileTool, {"old_text": "secret", "new_text": "pwned"}),
}


# --------------------------------------------------------------------------- confinement


@pytest.mark.parametrize("kind", sorted(TOOLS))
async def test_dotdot_escape_refused(root: Path, kind: str) -> None:
    """A ../ path that leaves the root is refused with Workspace's message."""
    cls, extra = TOOLS[kind]
    outside = root.parent / "secret.txt"
    outside.write_text("secret")
    message = await fails(cls(root), path="../secret.txt", **extra)
    assert message == (
        f"Access denied: '../secret.txt' resolves to '{outside}', which is outside "
        f"the working directory '{root}'"
    )
    assert outside.read_text() == "secret"


@pytest.mark.parametrize("kind", sorted(TOOLS))
async def test_absolute_escape_refused(root: Path, kind: str) -> None:
    """An absolute path outside the root is refused with Workspace's message."""
    cls, extra = TOOLS[kind]
    outside = root.parent / "secret.txt"
    outside.write_text("secret")
    message = await fails(cls(root), path=str(outside), **extra)
    assert message == f"Access denied: '{outside}' is outside the working directory '{root}'"
    assert outside.read_text() == "secret"


@pytest.mark.parametrize("kind", sorted(TOOLS))
async def test_symlink_escape_refused(root: Path, kind: str) -> None:
    """A symlink inside the root that points out of it is refused."""
    cls, extra = TOOLS[kind]
    outside = root.parent / "secret.txt"
    outside.write_text("secret")
    (root / "link.txt").symlink_to(outside)
    message = await fails(cls(root), path="link.txt", **extra)
    assert message == (
        f"Access denied: 'link.txt' resolves to '{outside}', which is outside "
        f"the working directory '{root}'"
    )
    assert outside.read_text() == "secret"


@pytest.mark.parametrize("kind", sorted(TOOLS))
@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("~no-such-user-4242/a.txt", "Could not determine home directory."),
        ("\ud800.txt", "'utf-8' codec can't encode character '\\ud800' in position "),
    ],
)
async def test_a_path_that_cannot_be_resolved_is_a_tool_error(
    root: Path, kind: str, path: str, error: str
) -> None:
    """An unknown ~user or a lone surrogate: the model is told, no raw exception."""
    cls, extra = TOOLS[kind]
    message = await fails(cls(root), path=path, **extra)
    assert message.startswith(f"Cannot resolve path {path!r}: {error}")


async def test_absolute_path_inside_root_is_accepted(root: Path) -> None:
    """An absolute path inside the root works, and the result shows it root-relative."""
    (root / "a.txt").write_text("hi\n")
    result = await run(ReadFileTool(root), path=str(root / "a.txt"))
    assert result.text_content == "[a.txt: 1 line]\n     1\thi"


@pytest.mark.parametrize("cls", [ReadFileTool, WriteFileTool, EditFileTool])
def test_permission_subject(root: Path, cls: Any) -> None:
    """permission_subject gives the root-relative resolved path, or the raw string outside."""
    (root / "sub").mkdir()
    (root / "sub" / "real.txt").write_text("x")
    (root / "alias.txt").symlink_to(root / "sub" / "real.txt")
    tool = cls(Workspace(root))
    assert tool.permission_subject({"path": "sub/./real.txt"}) == ("path", "sub/real.txt")
    assert tool.permission_subject({"path": "alias.txt"}) == ("path", "sub/real.txt")
    assert tool.permission_subject({"path": str(root / "new.txt")}) == ("path", "new.txt")
    assert tool.permission_subject({"path": "../x"}) == ("path", "../x")


def test_tools_default_to_the_working_directory(root: Path, monkeypatch: Any) -> None:
    """Without a workspace, the tools are rooted at the current directory."""
    monkeypatch.chdir(root)
    assert [t().workspace.root for t in (ReadFileTool, WriteFileTool, EditFileTool)] == [root] * 3


def test_schemas_compile_and_forbid_extra_properties() -> None:
    """The three schemas are valid JSON Schema, closed, and free of top-level oneOf/anyOf."""
    tools = [ReadFileTool(), WriteFileTool(), EditFileTool()]
    registry = ToolRegistry(tools)
    assert [d.name for d in registry.definitions] == ["read_file", "write_file", "edit_file"]
    for tool in tools:
        schema = tool.parameters_schema
        assert schema["additionalProperties"] is False
        assert not {"oneOf", "anyOf", "allOf"} & set(schema)
        assert tool.timeout is None


@pytest.mark.parametrize(
    ("args", "valid"),
    [
        ({"path": "a", "old_text": "x", "new_text": "y"}, True),
        ({"path": "a", "old_text": "x", "new_text": "y", "replace_all": True}, True),
        ({"path": "a", "edits": [{"old_text": "x", "new_text": "y"}]}, True),
        ({"path": "a"}, False),
        ({"path": "a", "old_text": "x"}, False),
        ({"path": "a", "edits": []}, False),
        ({"path": "a", "edits": [{"old_text": "x"}]}, False),
        (
            {
                "path": "a",
                "old_text": "x",
                "new_text": "y",
                "edits": [{"old_text": "x", "new_text": "y"}],
            },
            False,
        ),
        ({"path": "a", "replace_all": True, "edits": [{"old_text": "x", "new_text": "y"}]}, False),
    ],
)
def test_edit_schema_requires_exactly_one_form(args: dict[str, Any], valid: bool) -> None:
    """edit_file's schema accepts old_text+new_text or edits, and not both or neither."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(EditFileTool().parameters_schema)
    assert validator.is_valid(args) is valid


# --------------------------------------------------------------------------- read_file


async def test_read_numbers_lines(root: Path) -> None:
    """A whole file comes back numbered like cat -n under a line-count header."""
    (root / "notes.txt").write_text("alpha\nbeta\n\ngamma")
    result = await run(ReadFileTool(root), path="notes.txt")
    assert result.text_content == (
        "[notes.txt: 4 lines]\n     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma"
    )
    assert result.details == {"path": "notes.txt", "start_line": 1, "end_line": 4, "total_lines": 4}


async def test_read_page_says_how_to_read_on(root: Path) -> None:
    """offset/limit show a page, and the header names the offset that reads on."""
    (root / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    result = await run(ReadFileTool(root), path="f.txt", offset=3, limit=4)
    assert result.text_content == (
        "[f.txt: lines 3-6 of 10. Use offset=7 to read more.]\n"
        "     3\tline 3\n     4\tline 4\n     5\tline 5\n     6\tline 6"
    )


async def test_read_last_page_has_no_read_on_note(root: Path) -> None:
    """A page that reaches the end says so without a read-on note."""
    (root / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    result = await run(ReadFileTool(root), path="f.txt", offset=9, limit=5)
    assert result.text_content == "[f.txt: lines 9-10 of 10]\n     9\tline 9\n    10\tline 10"


async def test_read_default_limit_is_2000_lines(root: Path) -> None:
    """Without a limit, 2000 lines are shown."""
    (root / "long.txt").write_text("x\n" * 2500)
    text = (await run(ReadFileTool(root), path="long.txt")).text_content
    lines = text.split("\n")
    assert lines[0] == "[long.txt: lines 1-2000 of 2500. Use offset=2001 to read more.]"
    assert (len(lines), lines[-1]) == (2001, "  2000\tx")


async def test_read_offset_past_the_end(root: Path) -> None:
    """An offset past the last line is an error naming the line count."""
    (root / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    message = await fails(ReadFileTool(root), path="f.txt", offset=11)
    assert (
        message
        == "offset 11 is past the end of f.txt, which has 10 lines. Use an offset from 1 to 10."
    )


async def test_read_cuts_long_lines(root: Path) -> None:
    """Lines over 2000 characters are cut with a marker saying how much is missing."""
    (root / "wide.txt").write_text("x" * 2500 + "\nshort\n")
    result = await run(ReadFileTool(root), path="wide.txt")
    assert result.text_content == (
        "[wide.txt: 2 lines]\n"
        f"     1\t{'x' * 2000}… [line truncated: 500 more characters]\n"
        "     2\tshort"
    )


async def test_read_stops_at_256_kib(root: Path) -> None:
    """One call shows at most 256 KiB of text and says where to read on."""
    (root / "big.txt").write_text(("y" * 1000 + "\n") * 300)
    text = (await run(ReadFileTool(root), path="big.txt")).text_content
    lines = text.split("\n")
    assert lines[0] == (
        "[big.txt: lines 1-260 of 300. Output stopped at 256 KiB; use offset=261 to read more.]"
    )
    assert len(lines) == 261
    assert len("\n".join(lines[1:]).encode()) <= 256 * 1024


async def test_read_notes_crlf_and_strips_cr(root: Path) -> None:
    """CRLF files are shown without the \\r, and the header says CRLF."""
    (root / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    result = await run(ReadFileTool(root), path="dos.txt")
    assert result.text_content == "[dos.txt: 2 lines (CRLF line endings)]\n     1\tone\n     2\ttwo"


async def test_read_empty_file(root: Path) -> None:
    """An empty file says so."""
    (root / "empty.txt").write_bytes(b"")
    assert (
        await run(ReadFileTool(root), path="empty.txt")
    ).text_content == "[empty.txt: empty file]"


async def test_read_undecodable_bytes_become_replacement_chars(root: Path) -> None:
    """Bytes that are not UTF-8 show as U+FFFD instead of failing."""
    (root / "latin1.txt").write_bytes(b"caf\xe9 ok\n")
    result = await run(ReadFileTool(root), path="latin1.txt")
    assert result.text_content == "[latin1.txt: 1 line]\n     1\tcaf\ufffd ok"


async def test_read_hides_the_bom(root: Path) -> None:
    """A UTF-8 BOM is not shown as part of the first line."""
    (root / "bom.txt").write_bytes(b"\xef\xbb\xbfhello\n")
    assert (await run(ReadFileTool(root), path="bom.txt")).text_content == (
        "[bom.txt: 1 line]\n     1\thello"
    )


async def test_read_refuses_binary_files(root: Path) -> None:
    """A file with a NUL byte near the start that is not an image is refused."""
    (root / "data.bin").write_bytes(b"\x00\x01\x02abc")
    message = await fails(ReadFileTool(root), path="data.bin")
    assert message == "data.bin is a binary file (6 bytes); read_file shows text and images only"


async def test_read_png_image(root: Path) -> None:
    """A PNG comes back as an image block plus a short description."""
    data = png_1x1()
    (root / "pixel").write_bytes(data)  # recognised by content, not by name
    result = await run(ReadFileTool(root), path="pixel")
    assert result.content == (
        al.ImageContent(base64.b64encode(data).decode(), "image/png"),
        al.TextContent(f"[pixel: image/png, {len(data)} bytes]"),
    )
    assert result.details == {"path": "pixel", "mime_type": "image/png", "bytes": len(data)}


async def test_read_jpeg_image(root: Path) -> None:
    """A JPEG comes back as an image block plus a short description."""
    data = jpeg_1x1()
    (root / "photo.jpg").write_bytes(data)
    result = await run(ReadFileTool(root), path="photo.jpg")
    assert result.content == (
        al.ImageContent(base64.b64encode(data).decode(), "image/jpeg"),
        al.TextContent(f"[photo.jpg: image/jpeg, {len(data)} bytes]"),
    )


async def test_read_refuses_an_image_over_the_image_cap(root: Path) -> None:
    """An image larger than max_image_bytes is refused."""
    data = png_1x1()
    (root / "pixel.png").write_bytes(data)
    message = await fails(ReadFileTool(root, max_image_bytes=10), path="pixel.png")
    assert message == (
        f"pixel.png is an image of {len(data)} bytes, over the 10 bytes that read_file "
        "sends to the model"
    )


def test_read_without_permission(shared_root: Path) -> None:
    """An unreadable file is a permission error naming it."""
    secret = shared_root / "secret.txt"
    secret.write_text("x")
    secret.chmod(0)
    message = unprivileged(lambda: fails(ReadFileTool(shared_root), path="secret.txt"))
    assert message == "Cannot read secret.txt: permission denied"


async def test_read_directory(root: Path) -> None:
    """A directory is refused with a pointer to list_files."""
    (root / "sub").mkdir()
    message = await fails(ReadFileTool(root), path="sub")
    assert message == "sub is a directory, not a file. Use list_files to see what it contains."


async def test_read_missing_file(root: Path) -> None:
    """A missing file is reported by its root-relative path."""
    assert await fails(ReadFileTool(root), path="nope/x.txt") == "File not found: nope/x.txt"


async def test_read_refuses_files_over_max_bytes(root: Path) -> None:
    """A text file over max_bytes is refused with a suggestion of search or bash."""
    (root / "big.txt").write_text("z" * 101)
    message = await fails(ReadFileTool(root, max_bytes=100), path="big.txt")
    assert message == (
        "big.txt is too large to read (101 bytes; the limit is 100 bytes). Use search to find "
        "the lines you need, or bash (head, tail, sed -n 'START,ENDp') to read part of it."
    )


# --------------------------------------------------------------------------- write_file


async def test_write_creates_a_file(root: Path) -> None:
    """A new file is written and reported as new."""
    result = await run(WriteFileTool(root), path="new.txt", content="héllo")
    assert result.text_content == "Wrote 6 bytes to new.txt (new file)"
    assert result.details == {"bytes": 6, "created": True}
    assert (root / "new.txt").read_text() == "héllo"


async def test_write_replaces_a_file(root: Path) -> None:
    """An existing file is replaced and reported as replaced."""
    (root / "a.txt").write_text("old content")
    result = await run(WriteFileTool(root), path="a.txt", content="new")
    assert result.text_content == "Wrote 3 bytes to a.txt (replaced)"
    assert result.details == {"bytes": 3, "created": False}
    assert (root / "a.txt").read_text() == "new"


async def test_write_makes_parent_directories(root: Path) -> None:
    """Missing parent directories are created."""
    result = await run(WriteFileTool(root), path="a/b/c.txt", content="x")
    assert result.text_content == "Wrote 1 byte to a/b/c.txt (new file)"
    assert (root / "a" / "b" / "c.txt").read_text() == "x"


async def test_write_keeps_the_mode(root: Path) -> None:
    """Replacing a file keeps its permission bits."""
    script = root / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    await run(WriteFileTool(root), path="run.sh", content="#!/bin/sh\necho hi\n")
    assert (script.stat().st_mode & 0o7777, script.read_text()) == (0o755, "#!/bin/sh\necho hi\n")


async def test_write_new_file_mode_follows_umask(root: Path) -> None:
    """A new file gets 0o666 minus the umask, like open() would give it."""
    old = os.umask(0o027)
    try:
        await run(WriteFileTool(root), path="fresh.txt", content="x")
    finally:
        os.umask(old)
    assert (root / "fresh.txt").stat().st_mode & 0o7777 == 0o640


async def test_write_through_symlink_writes_its_target(root: Path) -> None:
    """A symlink that stays inside the root is followed: the target changes, the link stays."""
    (root / "real.txt").write_text("old")
    (root / "link.txt").symlink_to("real.txt")
    result = await run(WriteFileTool(root), path="link.txt", content="new")
    assert result.text_content == "Wrote 3 bytes to real.txt (replaced)"
    assert (root / "link.txt").is_symlink()
    assert (root / "real.txt").read_text() == "new"


async def test_write_refuses_a_directory(root: Path) -> None:
    """A directory target is refused and left alone."""
    (root / "sub").mkdir()
    message = await fails(WriteFileTool(root), path="sub", content="x")
    assert (
        message
        == "sub is a directory; write_file writes files. Give a file path, such as sub/<name>."
    )
    assert (root / "sub").is_dir()


def test_write_refuses_a_read_only_file(shared_root: Path) -> None:
    """A file without write permission is not replaced behind its owner's back."""
    locked = shared_root / "locked.txt"
    locked.write_text("keep")
    locked.chmod(0o444)
    shared_root.chmod(0o777)  # the directory is writable: only the file's mode refuses
    message = unprivileged(
        lambda: fails(WriteFileTool(shared_root), path="locked.txt", content="x")
    )
    assert (message, locked.read_text()) == ("Cannot write locked.txt: permission denied", "keep")


async def test_write_failure_at_rename_leaves_the_original(root: Path, monkeypatch: Any) -> None:
    """If the final rename fails, the original is intact and no temp file is left."""
    (root / "a.txt").write_text("original")

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    message = await fails(WriteFileTool(root), path="a.txt", content="new content")
    assert message == "Cannot write a.txt: No space left on device"
    assert (root / "a.txt").read_text() == "original"
    assert sorted(os.listdir(root)) == ["a.txt"]


async def test_write_failure_mid_write_leaves_the_original(root: Path, monkeypatch: Any) -> None:
    """If fsync fails after the data is written, the original is intact and no temp file is left."""
    (root / "a.txt").write_text("original")

    def broken_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    message = await fails(WriteFileTool(root), path="a.txt", content="new content")
    assert message == "Cannot write a.txt: Input/output error"
    assert (root / "a.txt").read_text() == "original"
    assert sorted(os.listdir(root)) == ["a.txt"]


async def test_atomic_write_temp_file_name(root: Path, monkeypatch: Any) -> None:
    """The temporary file is .<name>.<random>.tmp in the target's own directory."""
    seen: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: Any, dst: Any) -> None:
        seen.append((str(src), str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    await atomic_write(root / "t.txt", b"data")
    [(src, dst)] = seen
    assert dst == str(root / "t.txt")
    assert Path(src).parent == root
    assert Path(src).name.startswith(".t.txt.")
    assert Path(src).name.endswith(".tmp")
    assert (root / "t.txt").read_bytes() == b"data"


async def test_write_is_atomic_for_concurrent_readers(root: Path) -> None:
    """Readers in other threads always see one whole version, never a torn mix."""
    first, second = "a" * 5_000_000, ("b" * 999 + "\n") * 5_000
    versions = {first.encode(), second.encode()}
    target = root / "big.txt"
    target.write_text(first)
    tool = WriteFileTool(root)
    done = threading.Event()
    torn: list[int] = []
    reads: list[int] = []

    def reader() -> None:
        while True:
            data = target.read_bytes()
            if data not in versions:
                torn.append(len(data))
            reads.append(1)
            if done.is_set():
                return

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(trio.to_thread.run_sync, reader)
        try:
            for i in range(16):
                await run(tool, path="big.txt", content=second if i % 2 == 0 else first)
        finally:
            done.set()
    assert torn == []
    assert len(reads) >= 3
    assert target.read_text() == first


# --------------------------------------------------------------------------- edit_file

MODULE = "def f():\n    return 1\n\nprint(f())\n"


async def test_edit_replaces_once_and_shows_the_change(root: Path) -> None:
    """A unique old_text is replaced; the result shows the lines around the change."""
    (root / "m.py").write_text(MODULE)
    result = await run(EditFileTool(root), path="m.py", old_text="return 1", new_text="return 2")
    assert result.text_content == (
        "Edited m.py: replaced 1 occurrence\n"
        "[lines 1-4 after the edit]\n"
        "     1\tdef f():\n     2\t    return 2\n     3\t\n     4\tprint(f())"
    )
    assert result.details == {"replacements": 1}
    assert (root / "m.py").read_text() == MODULE.replace("return 1", "return 2")


async def test_edit_snippet_is_a_few_lines_around_the_change(root: Path) -> None:
    """In a long file the snippet is the changed line with two lines either side."""
    (root / "n.txt").write_text("".join(f"line {n}\n" for n in range(1, 101)))
    result = await run(EditFileTool(root), path="n.txt", old_text="line 50\n", new_text="L50\n")
    assert result.text_content == (
        "Edited n.txt: replaced 1 occurrence\n"
        "[lines 48-52 after the edit]\n"
        "    48\tline 48\n    49\tline 49\n    50\tL50\n    51\tline 51\n    52\tline 52"
    )


async def test_edit_not_found_shows_the_closest_regions(root: Path) -> None:
    """Zero matches: the error shows the most similar lines and the whitespace reminder."""
    (root / "calc.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
    )
    message = await fails(
        EditFileTool(root),
        path="calc.py",
        old_text="def add(a, b):\n  return a + b\n",
        new_text="x",
    )
    assert message == (
        "old_text not found in calc.py. Did you mean:\n\n"
        "lines 1-2:\n     1\tdef add(a, b):\n     2\t    return a + b\n\n"
        "lines 5-6:\n     5\tdef mul(a, b):\n     6\t    return a * b\n\n"
        "Whitespace and indentation must match exactly: copy old_text from the file's own "
        "lines, without the line numbers and the tab after them."
    )
    assert (root / "calc.py").read_text().startswith("def add(a, b):\n    return")


async def test_edit_not_found_without_anything_similar(root: Path) -> None:
    """Zero matches and nothing close: the error says so and suggests reading again."""
    (root / "a.txt").write_text("alpha\nbeta\n")
    message = await fails(EditFileTool(root), path="a.txt", old_text="zzz 123 qqq", new_text="x")
    assert message == (
        "old_text not found in a.txt. No similar text either; read the file again with "
        "read_file to see its current content. Whitespace and indentation must match exactly."
    )


async def test_edit_refuses_several_matches(root: Path) -> None:
    """Two matches without replace_all is an error asking for more context."""
    (root / "a.txt").write_text("x = 1\ny = 1\n")
    message = await fails(EditFileTool(root), path="a.txt", old_text="= 1", new_text="= 2")
    assert message == (
        "old_text matches 2 places in a.txt; add surrounding lines to make it unique, "
        "or set replace_all"
    )
    assert (root / "a.txt").read_text() == "x = 1\ny = 1\n"


async def test_edit_replace_all(root: Path) -> None:
    """replace_all replaces every occurrence and counts them."""
    (root / "a.txt").write_text("x = 1\ny = 1\nz = 1\n")
    result = await run(
        EditFileTool(root), path="a.txt", old_text="= 1", new_text="= 2", replace_all=True
    )
    assert result.text_content.split("\n")[0] == "Edited a.txt: replaced 3 occurrences"
    assert result.details == {"replacements": 3}
    assert (root / "a.txt").read_text() == "x = 2\ny = 2\nz = 2\n"


async def test_edit_list_applies_in_order(root: Path) -> None:
    """An edits list is applied in order and reports each edit's count."""
    (root / "a.txt").write_text("one\ntwo\nthree\ntwo\n")
    result = await run(
        EditFileTool(root),
        path="a.txt",
        edits=[
            {"old_text": "one", "new_text": "ONE"},
            {"old_text": "two", "new_text": "2", "replace_all": True},
            {"old_text": "ONE\n2", "new_text": "first"},
        ],
    )
    assert result.text_content == (
        "Edited a.txt: 3 edits, replaced 4 occurrences (edit 1: 1, edit 2: 2, edit 3: 1)\n"
        "[lines 1-3 after the edit]\n     1\tfirst\n     2\tthree\n     3\t2"
    )
    assert result.details == {"replacements": 4, "per_edit": [1, 2, 1]}
    assert (root / "a.txt").read_text() == "first\nthree\n2\n"


async def test_edit_list_is_all_or_nothing(root: Path) -> None:
    """If the last edit fails, nothing is written and the error names it: edit 3 of 3."""
    (root / "a.txt").write_text("one\ntwo\ntoo\n")
    message = await fails(
        EditFileTool(root),
        path="a.txt",
        edits=[
            {"old_text": "one", "new_text": "1"},
            {"old_text": "tw", "new_text": "2"},
            {"old_text": "o\n", "new_text": "0\n"},
        ],
    )
    assert message == (
        "Edit 3 of 3 failed, so the file was not changed: old_text matches 2 places in a.txt; "
        "add surrounding lines to make it unique, or set replace_all"
    )
    assert (root / "a.txt").read_text() == "one\ntwo\ntoo\n"


async def test_edit_list_second_edit_not_found_changes_nothing(root: Path) -> None:
    """A failing second edit leaves the file exactly as it was."""
    (root / "a.txt").write_text("one\ntwo\n")
    message = await fails(
        EditFileTool(root),
        path="a.txt",
        edits=[{"old_text": "one", "new_text": "1"}, {"old_text": "zzz 999", "new_text": "2"}],
    )
    assert message.startswith("Edit 2 of 2 failed, so the file was not changed: old_text not found")
    assert (root / "a.txt").read_text() == "one\ntwo\n"


async def test_edit_keeps_crlf(root: Path) -> None:
    """In a CRLF file, \\n in old_text and new_text stands for \\r\\n."""
    (root / "dos.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = await run(
        EditFileTool(root), path="dos.txt", old_text="one\ntwo\n", new_text="1\n2\n2b\n"
    )
    assert result.details == {"replacements": 1}
    assert (root / "dos.txt").read_bytes() == b"1\r\n2\r\n2b\r\nthree\r\n"


async def test_edit_keeps_the_bom(root: Path) -> None:
    """A UTF-8 BOM survives an edit of the first line."""
    (root / "bom.txt").write_bytes(b"\xef\xbb\xbfhello\nworld\n")
    await run(EditFileTool(root), path="bom.txt", old_text="hello", new_text="hi")
    assert (root / "bom.txt").read_bytes() == b"\xef\xbb\xbfhi\nworld\n"


async def test_edit_keeps_undecodable_bytes(root: Path) -> None:
    """Bytes that are not UTF-8 elsewhere in the file are written back unchanged."""
    (root / "mixed.txt").write_bytes(b"caf\xe9\nplain\n")
    await run(EditFileTool(root), path="mixed.txt", old_text="plain", new_text="simple")
    assert (root / "mixed.txt").read_bytes() == b"caf\xe9\nsimple\n"


async def test_edit_keeps_the_mode(root: Path) -> None:
    """An edited file keeps its permission bits."""
    script = root / "run.sh"
    script.write_text("#!/bin/sh\necho a\n")
    script.chmod(0o755)
    await run(EditFileTool(root), path="run.sh", old_text="echo a", new_text="echo b")
    assert (script.stat().st_mode & 0o7777, script.read_text()) == (0o755, "#!/bin/sh\necho b\n")


async def test_edit_refuses_empty_old_text(root: Path) -> None:
    """An empty old_text is invalid and points to write_file."""
    (root / "a.txt").write_text("")
    message = await fails(EditFileTool(root), path="a.txt", old_text="", new_text="x")
    assert message == (
        "Invalid arguments: old_text is empty. edit_file replaces text that is already in the "
        "file; to create a file or rewrite all of it, use write_file."
    )
    assert (root / "a.txt").read_text() == ""


async def test_edit_refuses_identical_texts(root: Path) -> None:
    """old_text equal to new_text is invalid."""
    (root / "a.txt").write_text("same")
    message = await fails(EditFileTool(root), path="a.txt", old_text="same", new_text="same")
    assert message == (
        "Invalid arguments: old_text and new_text are identical, so the edit would change nothing"
    )


async def test_edit_list_names_the_invalid_edit(root: Path) -> None:
    """An invalid edit in a list is named by its 1-based number."""
    (root / "a.txt").write_text("x")
    message = await fails(
        EditFileTool(root),
        path="a.txt",
        edits=[{"old_text": "x", "new_text": "y"}, {"old_text": "", "new_text": "z"}],
    )
    assert message.startswith("Invalid arguments: edit 2: old_text is empty.")


async def test_edit_refuses_both_forms(root: Path) -> None:
    """old_text with edits is refused before the file is touched."""
    (root / "a.txt").write_text("x")
    message = await fails(
        EditFileTool(root),
        path="a.txt",
        old_text="x",
        new_text="y",
        edits=[{"old_text": "x", "new_text": "y"}],
    )
    assert message == (
        "Invalid arguments: give old_text and new_text (one edit, with optional replace_all), "
        "or edits (a list of {old_text, new_text, replace_all}), not both (got edits and "
        "old_text, new_text)"
    )


async def test_edit_refuses_neither_form(root: Path) -> None:
    """Neither old_text/new_text nor edits is refused."""
    (root / "a.txt").write_text("x")
    message = await fails(EditFileTool(root), path="a.txt", old_text="x")
    assert message == (
        "Invalid arguments: give old_text and new_text (one edit, with optional replace_all), "
        "or edits (a list of {old_text, new_text, replace_all})"
    )


async def test_edit_missing_file(root: Path) -> None:
    """edit never creates: a missing file points to write_file."""
    message = await fails(EditFileTool(root), path="new.py", old_text="a", new_text="b")
    assert message == (
        "File not found: new.py. edit_file only changes existing files; use write_file to "
        "create one."
    )
    assert not (root / "new.py").exists()


async def test_edit_refuses_binary_files(root: Path) -> None:
    """A file with NUL bytes is not edited."""
    (root / "data.bin").write_bytes(b"ab\x00cd")
    message = await fails(EditFileTool(root), path="data.bin", old_text="ab", new_text="x")
    assert message == "data.bin is a binary file (5 bytes); edit_file changes text files only"


# --------------------------------------------------------------------------- end to end


async def test_read_edit_read_through_an_agent(root: Path) -> None:
    """A scripted model reads a file, edits it using what it read, and reads it again."""
    (root / "app.py").write_text("DEBUG = True\nPORT = 80\n")
    provider = ScriptedProvider(
        [
            reply(call("read_file", {"path": "app.py"})),
            reply(
                call(
                    "edit_file",
                    {"path": "app.py", "old_text": "PORT = 80", "new_text": "PORT = 8080"},
                )
            ),
            reply(call("read_file", {"path": "app.py", "offset": 2})),
            reply("Done."),
        ]
    )
    agent = al.Agent(provider, tools=[ReadFileTool(root), WriteFileTool(root), EditFileTool(root)])
    await agent.run("Change the port to 8080")
    results = [m for m in agent.messages if isinstance(m, al.ToolResultMessage)]
    assert [(m.tool_name, m.is_error, m.text) for m in results] == [
        ("read_file", False, "[app.py: 2 lines]\n     1\tDEBUG = True\n     2\tPORT = 80"),
        (
            "edit_file",
            False,
            "Edited app.py: replaced 1 occurrence\n[lines 1-2 after the edit]\n"
            "     1\tDEBUG = True\n     2\tPORT = 8080",
        ),
        ("read_file", False, "[app.py: line 2 of 2]\n     2\tPORT = 8080"),
    ]
    assert (root / "app.py").read_text() == "DEBUG = True\nPORT = 8080\n"


# --------------------------------------------------------------------------- races


async def test_twenty_parallel_edits_of_one_file_all_apply(root: Path) -> None:
    """One turn with 20 edit_file calls on one file: every replacement lands."""
    target = root / "lines.txt"
    target.write_text("".join(f"a{n}\n" for n in range(20)))
    edits = [
        call("edit_file", {"path": "lines.txt", "old_text": f"a{n}\n", "new_text": f"b{n}\n"})
        for n in range(20)
    ]
    agent = al.Agent(ScriptedProvider([reply(*edits), reply("done")]), tools=[EditFileTool(root)])
    messages = await agent.run("edit")
    results = [m for m in messages if isinstance(m, al.ToolResultMessage)]
    assert [r.is_error for r in results] == [False] * 20
    assert target.read_text() == "".join(f"b{n}\n" for n in range(20))


async def test_edits_by_tools_built_apart_share_the_files_lock(root: Path) -> None:
    """Two tool sets on the same root (separate Workspace objects) never race either."""
    target = root / "f.txt"
    target.write_text("".join(f"x{n}\n" for n in range(10)))
    calls = [
        call(f"edit_{n % 2}", {"path": "f.txt", "old_text": f"x{n}\n", "new_text": f"y{n}\n"})
        for n in range(10)
    ]
    tools = [
        Renamed(EditFileTool(root), "edit_0"),
        Renamed(EditFileTool(Workspace(root)), "edit_1"),
    ]
    agent = al.Agent(ScriptedProvider([reply(*calls), reply("done")]), tools=tools)
    messages = await agent.run("go")
    results = [m for m in messages if isinstance(m, al.ToolResultMessage)]
    assert [r.is_error for r in results] == [False] * 10
    assert target.read_text() == "".join(f"y{n}\n" for n in range(10))


class Renamed:
    """A tool under another name."""

    def __init__(self, tool: Any, name: str) -> None:
        self.tool, self.name = tool, name
        self.label, self.description = tool.label, tool.description
        self.parameters_schema = tool.parameters_schema

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        result: al.ToolResult = await self.tool.execute(params, ctx)
        return result


async def test_path_locks_do_not_accumulate(root: Path) -> None:
    from agentloop.tools._workspace import _path_locks

    tool = EditFileTool(root)
    for n in range(5):
        (root / f"{n}.txt").write_text("a")
        await run(tool, path=f"{n}.txt", old_text="a", new_text="b")
    assert _path_locks.get() == {}


# --------------------------------------------------------------------------- hard links


def text_of(path: Path) -> str:
    return path.read_text()


@pytest.fixture
def linked(root: Path, tmp_path: Path) -> Path:
    """A file outside the root with a hard link to it inside: root/inside.txt."""
    outside = tmp_path / "outside" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text("outside secret\n")
    os.link(outside, root / "inside.txt")
    return outside


async def test_hard_links_are_followed_without_strict_mode(root: Path, linked: Path) -> None:
    """The documented limit: a hard link is a file of the root as far as paths go."""
    result = await run(ReadFileTool(root), path="inside.txt")
    assert result.text_content == "[inside.txt: 1 line]\n     1\toutside secret"
    # A write replaces the link with a new file: the file outside keeps its content.
    await run(WriteFileTool(root), path="inside.txt", content="new\n")
    assert text_of(linked) == "outside secret\n"
    assert text_of(root / "inside.txt") == "new\n"


async def test_strict_mode_refuses_hard_linked_files(root: Path, linked: Path) -> None:
    strict = Workspace(root, strict=True)
    refusal = (
        "Access denied: inside.txt has 2 hard links, so it may be a file outside the working "
        "directory; strict confinement refuses such files"
    )
    assert await fails(ReadFileTool(strict), path="inside.txt") == refusal
    assert await fails(EditFileTool(strict), path="inside.txt", old_text="o", new_text="x") == (
        refusal
    )
    assert await fails(WriteFileTool(strict), path="inside.txt", content="x") == refusal
    assert text_of(linked) == "outside secret\n"
    (root / "plain.txt").write_text("plain\n")
    assert (await run(ReadFileTool(strict), path="plain.txt")).text_content.endswith("plain")
    assert repr(strict) == f"Workspace({str(root)!r}, strict=True)"
