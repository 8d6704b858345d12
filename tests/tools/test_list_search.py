"""list_files, search and the .gitignore matcher they share, on real trees in tmp_path.

Search tests run once per engine: ``python`` (``rg`` hidden by patching
``shutil.which`` in the search module) and ``rg`` (skipped when ripgrep is not
installed). Both must give exactly the same output.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

import agentloop as al
from agentloop.tools._ignore import GitIgnore, Glob, is_ignored
from agentloop.tools._listing import ListFilesTool
from agentloop.tools._search import SearchTool
from agentloop.tools._search import _tool as _search
from agentloop.tools._workspace import Workspace

HAVE_RG = shutil.which("rg") is not None
ENGINES = [
    "python",
    pytest.param("rg", marks=pytest.mark.skipif(not HAVE_RG, reason="ripgrep is not installed")),
]


def make_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` (path -> content) under ``root``; return ``root``."""
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")
    return root


def context() -> al.ToolContext:
    return al.ToolContext(tool_call_id="call_1", tool_name="tool", cancel_scope=trio.CancelScope())


async def run(tool: Any, **params: Any) -> al.ToolResult:
    return await tool.execute(params, context())


async def listing(root: Path, **params: Any) -> str:
    return (await run(ListFilesTool(root), **params)).text_content


async def search(root: Path, **params: Any) -> str:
    return (await run(SearchTool(root), **params)).text_content


def hide_rg(monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which

    def which(name: str, *args: Any, **kwargs: Any) -> str | None:
        return None if name == "rg" else real(name, *args, **kwargs)

    monkeypatch.setattr(_search.shutil, "which", which)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The search engine under test; "python" hides rg from the search module."""
    if request.param == "python":
        hide_rg(monkeypatch)
    return str(request.param)


# --------------------------------------------------------------------------- list_files


async def test_list_sorted_depth_first_by_name(tmp_path: Path) -> None:
    """Files come depth first, each directory's entries in byte order of their names."""
    make_tree(tmp_path, {"b.txt": "", "a/x.txt": "", "a-b/y.txt": "", "a.py": "", "A.md": ""})
    assert await listing(tmp_path) == "A.md\na/x.txt\na-b/y.txt\na.py\nb.txt\n\n(5 files)"


async def test_list_skips_skip_dirs(tmp_path: Path) -> None:
    """.git, node_modules, __pycache__ (at any depth) are never entered; dotfiles are listed."""
    make_tree(
        tmp_path,
        {
            ".git/config": "",
            "node_modules/x.js": "",
            "src/node_modules/y.js": "",
            "src/__pycache__/m.pyc": "",
            "src/m.py": "",
            ".env": "",
        },
    )
    assert await listing(tmp_path) == ".env\nsrc/m.py\n\n(2 files)"


async def test_list_skips_virtualenvs(tmp_path: Path) -> None:
    """A directory holding a pyvenv.cfg is a virtualenv, whatever its name: left out."""
    make_tree(
        tmp_path,
        {"tools/myenv/pyvenv.cfg": "", "tools/myenv/lib/site.py": "", "tools/run.py": ""},
    )
    assert await listing(tmp_path) == "tools/run.py\n\n(1 file)"


async def test_list_root_gitignore(tmp_path: Path) -> None:
    """The root .gitignore: negation, anchoring, directory-only and ** rules; it is listed."""
    make_tree(
        tmp_path,
        {
            ".gitignore": "*.log\n!keep.log\n/build\ncache/\ndocs/**/*.tmp\n",
            "a.log": "",
            "keep.log": "",
            "sub/b.log": "",
            "sub/keep.log": "",
            "build/out.txt": "",
            "sub/build/out.txt": "",
            "cache/x": "",
            "sub/cache/y": "",
            "other/cache": "",
            "docs/c.tmp": "",
            "docs/a/b/c.tmp": "",
            "other/c.tmp": "",
        },
    )
    assert await listing(tmp_path) == (
        ".gitignore\nkeep.log\nother/c.tmp\nother/cache\nsub/build/out.txt\nsub/keep.log"
        "\n\n(6 files)"
    )


async def test_list_nested_gitignore(tmp_path: Path) -> None:
    """A nested .gitignore adds rules anchored to its directory and overrides the root's."""
    make_tree(
        tmp_path,
        {
            ".gitignore": "*.log\n",
            "sub/.gitignore": "!b.log\n/local.txt\n",
            "sub/a.log": "",
            "sub/b.log": "",
            "sub/local.txt": "",
            "sub/deeper/local.txt": "",
            "local.txt": "",
            "c.log": "",
        },
    )
    assert await listing(tmp_path) == (
        ".gitignore\nlocal.txt\nsub/.gitignore\nsub/b.log\nsub/deeper/local.txt\n\n(5 files)"
    )


async def test_list_no_reinclude_under_ignored_dir(tmp_path: Path) -> None:
    """A file is not re-included when its parent directory is excluded."""
    make_tree(tmp_path, {".gitignore": "out/\n!out/keep.txt\n", "out/keep.txt": "", "a": ""})
    assert await listing(tmp_path) == ".gitignore\na\n\n(2 files)"


async def test_list_subdirectory_uses_parent_gitignore(tmp_path: Path) -> None:
    """Listing a subdirectory applies the .gitignore files of its parents up to the root."""
    make_tree(tmp_path, {".gitignore": "*.log\n/src/gen/\n", "src/a.log": "", "src/a.py": ""})
    make_tree(tmp_path, {"src/gen/g.py": "", "src/pkg/gen/h.py": ""})
    assert await listing(tmp_path, path="src") == "src/a.py\nsrc/pkg/gen/h.py\n\n(2 files)"


async def test_list_pattern_without_slash_matches_in_any_directory(tmp_path: Path) -> None:
    """A pattern without / matches file names at any depth."""
    make_tree(tmp_path, {"a.py": "", "src/b.py": "", "src/c.txt": "", "src/d/e.py": ""})
    assert await listing(tmp_path, pattern="*.py") == "a.py\nsrc/b.py\nsrc/d/e.py\n\n(3 files)"


async def test_list_pattern_with_slash_is_anchored(tmp_path: Path) -> None:
    """A pattern with / is matched against the whole root-relative path."""
    make_tree(tmp_path, {"src/a.py": "", "src/pkg/b.py": "", "other/src/c.py": ""})
    assert await listing(tmp_path, pattern="src/*.py") == "src/a.py\n\n(1 file)"


async def test_list_pattern_double_star_crosses_directories(tmp_path: Path) -> None:
    """** in a pattern crosses directories, including none."""
    make_tree(tmp_path, {"src/test_a.py": "", "src/x/y/test_b.py": "", "src/x/c.py": ""})
    assert await listing(tmp_path, pattern="src/**/test_*.py") == (
        "src/test_a.py\nsrc/x/y/test_b.py\n\n(2 files)"
    )


async def test_list_pattern_no_match(tmp_path: Path) -> None:
    """Nothing matching the pattern says so, naming the path and the pattern."""
    make_tree(tmp_path, {"src/a.py": ""})
    assert (
        await listing(tmp_path, path="src", pattern="*.rs") == "No files found in src matching *.rs"
    )


async def test_list_empty_directory(tmp_path: Path) -> None:
    """An empty directory says no files were found in it."""
    (tmp_path / "empty").mkdir()
    assert await listing(tmp_path, path="empty") == "No files found in empty"


async def test_list_max_depth(tmp_path: Path) -> None:
    """max_depth=1 lists the directory's own files; 2 goes one level down."""
    make_tree(tmp_path, {"a": "", "d/b": "", "d/e/c": ""})
    assert await listing(tmp_path, max_depth=1) == "a\n\n(1 file)"
    assert await listing(tmp_path, max_depth=2) == "a\nd/b\n\n(2 files)"


async def test_list_cap_message(tmp_path: Path) -> None:
    """Past max_results, the rest is counted, and the summary gives the total."""
    make_tree(tmp_path, {f"f{i}.txt": "" for i in range(5)})
    result = await run(ListFilesTool(tmp_path, max_results=3))
    assert result.text_content == (
        "f0.txt\nf1.txt\nf2.txt\n"
        "… and 2 more files not shown (narrow the path or pattern)\n\n(5 files)"
    )
    assert result.details == {"files": 5, "shown": 3, "truncated": True, "timed_out": False}


async def test_list_missing_directory(tmp_path: Path) -> None:
    """A path that does not exist is an error naming it."""
    with pytest.raises(al.ToolError, match=r"^Directory not found: nope/sub$"):
        await run(ListFilesTool(tmp_path), path="nope/sub")


async def test_list_file_path_lists_that_file(tmp_path: Path) -> None:
    """A file path lists that one file, even a .gitignore'd one."""
    make_tree(tmp_path, {".gitignore": "*.log\n", "src/a.log": ""})
    assert await listing(tmp_path, path="./src/a.log") == "src/a.log\n\n(1 file)"


@pytest.mark.parametrize("path", ["..", "../x", "/etc", "link"])
async def test_list_escapes_refused(tmp_path: Path, path: str) -> None:
    """Paths leaving the root (../, absolute, a symlink pointing out) are refused."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(al.ToolError, match="Access denied"):
        await run(ListFilesTool(root), path=path)


async def test_list_walk_does_not_follow_symlinks(tmp_path: Path) -> None:
    """Symlinks inside the tree are not listed nor followed."""
    make_tree(tmp_path, {"real/a.txt": ""})
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    (tmp_path / "b.txt").symlink_to(tmp_path / "real" / "a.txt")
    assert await listing(tmp_path) == "real/a.txt\n\n(1 file)"


async def test_list_time_limit(large_tree: Path) -> None:
    """A walk past time_limit stops and says its list is incomplete."""
    result = await run(ListFilesTool(large_tree, time_limit=0.001))
    assert result.text_content.endswith("\n(listing stopped after 1ms; results are incomplete)")
    assert result.details["timed_out"] is True


async def test_list_permission_subject(tmp_path: Path) -> None:
    """The permission subject is the resolved root-relative path; "." by default."""
    tool = ListFilesTool(tmp_path)
    (tmp_path / "src").mkdir()
    assert tool.permission_subject({"path": "./src/../src"}) == ("path", "src")
    assert tool.permission_subject({}) == ("path", ".")


async def test_list_invalid_pattern(tmp_path: Path) -> None:
    """A malformed glob is an InvalidArgs naming it."""
    with pytest.raises(al.InvalidArgs, match=r"invalid glob in 'pattern' \('\[a'\)"):
        await run(ListFilesTool(tmp_path), pattern="[a")


# --------------------------------------------------------------------------- .gitignore matcher

# (.gitignore content at the root, path, is a directory, ignored), as git documents
# (gitignore(5)) and `git check-ignore --no-index` answers.
GITIGNORE_CASES = [
    ("", "a", False, False),
    ("# comment\n\n", "# comment", False, False),
    ("\\#x", "#x", False, True),
    ("\\!x", "!x", False, True),
    ("x  ", "x", False, True),
    ("x\\ ", "x ", False, True),
    ("x\\ ", "x", False, False),
    ("*.log", "a.log", False, True),
    ("*.log", "d/e/a.log", False, True),
    ("*.log", "a.logx", False, False),
    ("*.log\n!keep.log", "keep.log", False, False),
    ("*.log\n!keep.log", "d/keep.log", False, False),
    ("!keep.log\n*.log", "keep.log", False, True),
    ("/a.log", "a.log", False, True),
    ("/a.log", "d/a.log", False, False),
    ("d/a.log", "d/a.log", False, True),
    ("d/a.log", "x/d/a.log", False, False),
    ("build/", "build", True, True),
    ("build/", "build", False, False),
    ("build/", "src/build", True, True),
    ("build/", "build/x", False, True),
    ("build", "build", False, True),
    ("**/foo", "foo", False, True),
    ("**/foo", "a/b/foo", False, True),
    ("**/foo/bar", "a/foo/bar", False, True),
    ("**/foo/bar", "bar", False, False),
    ("abc/**", "abc", True, False),
    ("abc/**", "abc/x/y", False, True),
    ("abc/**", "x/abc/y", False, False),
    ("a/**/b", "a/b", False, True),
    ("a/**/b", "a/x/y/b", False, True),
    ("a/**/b", "x/a/b", False, False),
    ("a**b", "axxb", False, True),
    ("a**b", "ax/yb", False, False),
    ("a?c", "abc", False, True),
    ("a?c", "a/c", False, False),
    ("*", "a/b", False, True),
    ("foo/*", "foo/a", False, True),
    ("foo/*", "foo/a/b", False, True),
    ("foo/*", "x/foo/a", False, False),
    ("doc/*.txt", "doc/x/a.txt", False, False),
    ("doc/**/*.txt", "doc/x/a.txt", False, True),
    ("[a-c]x", "bx", False, True),
    ("[a-c]x", "dx", False, False),
    ("[!a-c]x", "dx", False, True),
    ("[^a]x", "ax", False, False),
    ("[]]x", "]x", False, True),
    ("[a-]x", "-x", False, True),
    ("[[:digit:]]*", "1a", False, True),
    ("*.py[co]", "a.pyo", False, True),
    ("*.py[co]", "a.py", False, False),
    ("a\\*b", "a*b", False, True),
    ("a\\*b", "axb", False, False),
    ("x[", "x[", False, False),
    ("out/\n!out/keep.txt", "out/keep.txt", False, True),
    ("out/*\n!out/keep.txt", "out/keep.txt", False, False),
]


@pytest.mark.parametrize(("rules", "path", "is_dir", "ignored"), GITIGNORE_CASES)
def test_gitignore_matcher(rules: str, path: str, is_dir: bool, ignored: bool) -> None:
    """Each rule ignores (or not) each path as git does."""
    assert is_ignored([GitIgnore.parse(rules)], path, is_dir) is ignored


@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        ("sub/a.log", True),
        ("sub/b.log", False),
        ("sub/x/b.log", False),
        ("b.log", True),
        ("sub/tmp", True),
        ("sub/x/tmp", False),
        ("tmp", False),
    ],
)
def test_gitignore_nested_files(path: str, ignored: bool) -> None:
    """A nested .gitignore anchors to its directory and overrides the root's rules."""
    ignores = [GitIgnore.parse("*.log\n"), GitIgnore.parse("!b.log\n/tmp\n", base="sub")]
    assert is_ignored(ignores, path) is ignored


def test_gitignore_crlf_and_bom() -> None:
    """A byte order mark and CRLF line ends are not part of the patterns."""
    rules = GitIgnore.parse("\ufeff*.log\r\n/build\r\n")
    assert is_ignored([rules], "a.log")
    assert is_ignored([rules], "build", True)


@pytest.mark.parametrize(
    ("pattern", "path", "accepted"),
    [
        ("*.py", "a/b.py", True),
        ("*.{py,pyi}", "a/b.pyi", True),
        ("*.{py,pyi}", "a/b.txt", False),
        ("/a.py", "a.py", True),
        ("!*.md", "a/b.md", False),
        ("!*.md", "a/b.py", True),
    ],
)
def test_glob(pattern: str, path: str, accepted: bool) -> None:
    """Globs: names in any directory, {a,b} alternatives, a leading ! excludes."""
    assert Glob.parse(pattern).accepts(path) is accepted


# --------------------------------------------------------------------------- search

SEARCH_TREE: dict[str, str | bytes] = {
    ".gitignore": "ignored.txt\n*.log\n",
    "a.py": "import os\n\ndef foo():\n    return 'Foo'\n",
    "notes.md": "# Notes\nfoo bar\nnothing\nnothing\nnothing\nnothing\nFOO again\nlast line\n",
    "src/app.py": "from a import foo\n\nprint(foo())\n",
    "src/lib/util.py": "def helper():\n    pass  # -v means verbose\n",
    "ignored.txt": "foo in an ignored file\n",
    "debug.log": "foo in a log\n",
    "data.bin": b"foo\x00\x01\x02foo\n",
    "node_modules/pkg/index.js": "foo\n",
    "tools/env/pyvenv.cfg": "home = /usr\n",
    "tools/env/lib/site.py": "foo\n",
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path, SEARCH_TREE)


async def test_search_plain(tree: Path, engine: str) -> None:
    """Matches are path:line:text, in path order, case-insensitive by default."""
    result = await run(SearchTool(tree), pattern="foo")
    assert result.text_content == (
        "a.py:3:def foo():\n"
        "a.py:4:    return 'Foo'\n"
        "notes.md:2:foo bar\n"
        "notes.md:7:FOO again\n"
        "src/app.py:1:from a import foo\n"
        "src/app.py:3:print(foo())\n"
        "\n(6 matches in 3 files)"
    )
    assert result.details == {
        "matches": 6,
        "files": 3,
        "truncated": False,
        "engine": engine,
        "timed_out": False,
    }


async def test_search_case_sensitive(tree: Path, engine: str) -> None:
    """case_sensitive=True matches case exactly."""
    assert await search(tree, pattern="foo", case_sensitive=True) == (
        "a.py:3:def foo():\n"
        "notes.md:2:foo bar\n"
        "src/app.py:1:from a import foo\n"
        "src/app.py:3:print(foo())\n"
        "\n(4 matches in 3 files)"
    )


async def test_search_regex(tree: Path, engine: str) -> None:
    """The pattern is a regular expression."""
    assert await search(tree, pattern=r"def \w+\(\)") == (
        "a.py:3:def foo():\nsrc/lib/util.py:1:def helper():\n\n(2 matches in 2 files)"
    )


async def test_search_include_glob(tree: Path, engine: str) -> None:
    """include keeps the files whose names (or root-relative paths) match the glob."""
    assert await search(tree, pattern="foo", include="*.md") == (
        "notes.md:2:foo bar\nnotes.md:7:FOO again\n\n(2 matches in 1 file)"
    )
    assert await search(tree, pattern="foo", include="src/*.py") == (
        "src/app.py:1:from a import foo\nsrc/app.py:3:print(foo())\n\n(2 matches in 1 file)"
    )


async def test_search_include_does_not_override_gitignore(tree: Path, engine: str) -> None:
    """An include glob matching a .gitignore'd file does not bring it back."""
    assert await search(tree, pattern="foo", include="*.{log,txt}") == (
        "No matches for 'foo' in . (files matching *.{log,txt})"
    )


async def test_search_context_separators(tree: Path, engine: str) -> None:
    """Context lines are path-line-text, with -- between groups that are not adjacent."""
    assert await search(tree, pattern="foo", path="notes.md", context=1) == (
        "notes.md-1-# Notes\n"
        "notes.md:2:foo bar\n"
        "notes.md-3-nothing\n"
        "--\n"
        "notes.md-6-nothing\n"
        "notes.md:7:FOO again\n"
        "notes.md-8-last line\n"
        "\n(2 matches in 1 file)"
    )


async def test_search_overlapping_context_merges(tree: Path, engine: str) -> None:
    """Context windows that touch are one group; a context line that matches is a match."""
    assert await search(tree, pattern="foo", path="a.py", context=2) == (
        "a.py-1-import os\na.py-2-\na.py:3:def foo():\na.py:4:    return 'Foo'\n"
        "\n(2 matches in 1 file)"
    )


async def test_search_pattern_starting_with_dash(tree: Path, engine: str) -> None:
    """A pattern starting with '-' is a pattern, not a flag."""
    assert await search(tree, pattern="-v means") == (
        "src/lib/util.py:2:    pass  # -v means verbose\n\n(1 match in 1 file)"
    )


async def test_search_skips_binary_files(tree: Path, engine: str) -> None:
    """A file with a NUL in its first 8 KiB is skipped."""
    assert await search(tree, pattern="foo", include="*.bin") == (
        "No matches for 'foo' in . (files matching *.bin)"
    )


async def test_search_skips_ignored_skip_dirs_and_venvs(tree: Path, engine: str) -> None:
    """.gitignore'd files, node_modules and virtualenvs are not searched."""
    assert await search(tree, pattern="^foo$|in an ignored|in a log") == (
        "No matches for '^foo$|in an ignored|in a log' in ."
    )


async def test_search_explicit_ignored_file(tree: Path, engine: str) -> None:
    """A .gitignore'd file named as the path is searched."""
    assert await search(tree, pattern="foo", path="ignored.txt") == (
        "ignored.txt:1:foo in an ignored file\n\n(1 match in 1 file)"
    )


async def test_search_subdirectory(tree: Path, engine: str) -> None:
    """A subdirectory path searches below it; paths stay root-relative."""
    assert await search(tree, pattern="def", path="src") == (
        "src/lib/util.py:1:def helper():\n\n(1 match in 1 file)"
    )


async def test_search_cap_is_on_total_matches(tree: Path, engine: str) -> None:
    """max_results caps matches over all files, and says there are more."""
    result = await run(SearchTool(tree), pattern="foo", max_results=3)
    assert result.text_content == (
        "a.py:3:def foo():\n"
        "a.py:4:    return 'Foo'\n"
        "notes.md:2:foo bar\n"
        "\n(showing the first 3 matches; there are more — narrow the pattern or path)"
    )
    assert result.details["truncated"] is True
    assert (result.details["matches"], result.details["files"]) == (3, 2)


async def test_search_cap_keeps_last_match_context(tree: Path, engine: str) -> None:
    """At the cap, the last match keeps its after-context; the next match's lines are dropped."""
    assert await search(tree, pattern="foo", path="notes.md", context=1, max_results=1) == (
        "notes.md-1-# Notes\n"
        "notes.md:2:foo bar\n"
        "notes.md-3-nothing\n"
        "\n(showing the first 1 match; there are more — narrow the pattern or path)"
    )


async def test_search_exact_cap_is_not_truncated(tree: Path, engine: str) -> None:
    """Exactly max_results matches is not reported as truncated."""
    result = await run(SearchTool(tree), pattern="foo", case_sensitive=True, max_results=4)
    assert result.text_content.endswith("\n\n(4 matches in 3 files)")
    assert result.details["truncated"] is False


async def test_search_no_matches(tree: Path, engine: str) -> None:
    """No match says so, naming the pattern and the path."""
    assert await search(tree, pattern="zzz", path="src") == "No matches for 'zzz' in src"


async def test_search_invalid_regex(tree: Path, engine: str) -> None:
    """An invalid regex is an InvalidArgs naming the pattern and the engine's complaint."""
    with pytest.raises(al.InvalidArgs) as caught:
        await run(SearchTool(tree), pattern="(")
    if engine == "python":
        assert str(caught.value) == (
            "Invalid arguments: invalid regex '(': missing ), unterminated subpattern at position 0"
        )
    else:
        # ripgrep 14 shows the pattern as it wrapped it: (?:( ... )
        assert str(caught.value) == (
            "Invalid arguments: invalid regex '(' (ripgrep): regex parse error:\n"
            "    (?:()\n    ^\nerror: unclosed group"
        )


async def test_search_long_lines_cut(tmp_path: Path, engine: str) -> None:
    """Lines longer than 500 characters are cut with an ellipsis."""
    make_tree(tmp_path, {"long.txt": "needle " + "x" * 600 + "\n"})
    assert await search(tmp_path, pattern="needle") == (
        "long.txt:1:needle " + "x" * 493 + "…\n\n(1 match in 1 file)"
    )


async def test_search_crlf_bom_and_invalid_utf8(tmp_path: Path, engine: str) -> None:
    """A BOM and a line's \\r are not shown; bytes that are not UTF-8 become U+FFFD."""
    make_tree(tmp_path, {"w.txt": b"\xef\xbb\xbffoo one\r\nbar\r\nfoo \xff two\n"})
    assert await search(tmp_path, pattern="^foo") == (
        "w.txt:1:foo one\nw.txt:3:foo \ufffd two\n\n(2 matches in 1 file)"
    )


async def test_search_missing_path(tree: Path, engine: str) -> None:
    """A path that does not exist is an error naming it."""
    with pytest.raises(al.ToolError, match=r"^Path not found: nope$"):
        await run(SearchTool(tree), pattern="x", path="nope")


async def test_search_escape_refused(tree: Path, engine: str) -> None:
    """A path leaving the root is refused before anything runs."""
    with pytest.raises(al.ToolError, match="Access denied"):
        await run(SearchTool(tree), pattern="x", path="../")


@pytest.fixture(scope="module")
def large_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2000 small files in 100 directories, made once for the module."""
    root = tmp_path_factory.mktemp("large")
    files = {f"d{i:03}/f{j:02}.txt": "match me\n" * 20 for i in range(100) for j in range(20)}
    return make_tree(root, files)


async def test_search_time_limit(large_tree: Path, engine: str) -> None:
    """A search past time_limit stops and says its results are incomplete."""
    result = await run(SearchTool(large_tree, time_limit=0.001), pattern="zzz")
    assert result.text_content.endswith("\n(search stopped after 1ms; results are incomplete)")
    assert result.details["timed_out"] is True


async def test_search_cancellation_is_prompt(large_tree: Path, engine: str) -> None:
    """Cancelling a search in progress ends it (rg killed, the Python walk stopped)."""
    with trio.move_on_after(0.005) as scope:
        await run(SearchTool(large_tree), pattern="zzz")
    assert scope.cancelled_caught


async def test_search_falls_back_when_rg_cannot_run(
    tree: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An rg that fails for another reason than the regex (an old version...) gives way."""
    fake = tmp_path_factory.mktemp("bin") / "rg"
    fake.write_text(
        "#!/bin/sh\necho \"error: unexpected argument '--no-ignore-dot'\" >&2\nexit 2\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(_search.shutil, "which", lambda name, *args, **kwargs: str(fake))
    result = await run(SearchTool(tree), pattern="-v means")
    assert result.text_content == (
        "src/lib/util.py:2:    pass  # -v means verbose\n\n(1 match in 1 file)"
    )
    assert result.details["engine"] == "python"


async def test_search_permission_subject(tmp_path: Path) -> None:
    """The permission subject is the resolved root-relative path; "." by default."""
    tool = SearchTool(tmp_path)
    assert tool.permission_subject({"pattern": "x"}) == ("path", ".")
    assert tool.permission_subject({"pattern": "x", "path": "a/../b"}) == ("path", "b")


# --------------------------------------------------------------------------- both engines agree

AGREE_TREE: dict[str, str | bytes] = {
    ".gitignore": "*.tmp\n/build/\ndocs/**/draft*\n!keep.tmp\n",
    "keep.tmp": "alpha one\n",
    "x.tmp": "alpha two\n",
    "build/out.txt": "alpha built\n",
    "lib/build/ok.txt": "alpha nested build\n",
    "docs/a/draft1.md": "alpha draft\n",
    "docs/a/final.md": "Alpha final\nbeta\n" * 3,
    "pkg/.gitignore": "!x.tmp\nsecret*\n",
    "pkg/x.tmp": "alpha re-included\n",
    "pkg/secret.txt": "alpha secret\n",
    "pkg/mod.py": "".join(f"line {n} {'ALPHA' if n % 7 == 0 else 'gamma'}\n" for n in range(60)),
    "pkg/sub/deep.py": "ÄLPHA unicode\nalphabet\n-alpha\n",
    "big.txt": "x\n" * 9000 + "alpha after nul-free 8k\n",
    "late_nul.bin": b"alpha\n" + b"y\n" * 5000 + b"\x00alpha\n",
    "crlf.txt": b"alpha\r\n\r\nalpha\r\n",
    "no_newline.txt": "zeta alpha",
}

AGREE_QUERIES: list[dict[str, Any]] = [
    {"pattern": "alpha"},
    {"pattern": "alpha", "case_sensitive": True},
    {"pattern": "^alpha$"},
    {"pattern": r"\balpha\b", "context": 3},
    {"pattern": "alpha|beta", "context": 1, "max_results": 7},
    {"pattern": "alpha", "include": "*.py", "context": 2},
    {"pattern": "alpha", "include": "!*.md"},
    {"pattern": "alpha", "include": "docs/**"},
    {"pattern": "alpha", "path": "pkg"},
    {"pattern": "alpha", "path": "docs/a", "context": 10},
    {"pattern": "-alpha"},
    {"pattern": "ALPHA", "path": "pkg/mod.py", "context": 4, "max_results": 5},
    {"pattern": "a", "max_results": 1000},
    {"pattern": "nothing here"},
]


@pytest.mark.skipif(not HAVE_RG, reason="ripgrep is not installed")
@pytest.mark.parametrize("query", AGREE_QUERIES, ids=lambda q: repr(q))
async def test_engines_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, query: dict[str, Any]
) -> None:
    """rg and the Python engine give the same output for the same tree and query."""
    make_tree(tmp_path, AGREE_TREE)
    with_rg = await run(SearchTool(tmp_path), **query)
    hide_rg(monkeypatch)
    without = await run(SearchTool(tmp_path), **query)
    assert (with_rg.details["engine"], without.details["engine"]) == ("rg", "python")
    assert with_rg.text_content == without.text_content
    assert {**with_rg.details, "engine": "-"} == {**without.details, "engine": "-"}


async def test_agree_tree_python_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python engine on the agreement tree: nested .gitignore, late NUL, no final newline."""
    make_tree(tmp_path, AGREE_TREE)
    hide_rg(monkeypatch)
    text = await search(tmp_path, pattern="alpha", case_sensitive=True)
    assert text == (
        "big.txt:9001:alpha after nul-free 8k\n"
        "crlf.txt:1:alpha\n"
        "crlf.txt:3:alpha\n"
        "keep.tmp:1:alpha one\n"
        "late_nul.bin:1:alpha\n"
        "late_nul.bin:5002:\x00alpha\n"
        "lib/build/ok.txt:1:alpha nested build\n"
        "no_newline.txt:1:zeta alpha\n"
        "pkg/sub/deep.py:2:alphabet\n"
        "pkg/sub/deep.py:3:-alpha\n"
        "pkg/x.tmp:1:alpha re-included\n"
        "\n(11 matches in 8 files)"
    )


# --------------------------------------------------------------------------- strict confinement


async def test_strict_search_leaves_out_hard_linked_files(tmp_path: Path, engine: str) -> None:
    """A hard link to a file outside the root: found without strict, not with it."""
    root = tmp_path / "root"
    make_tree(root, {"a.txt": "needle here\n"})
    outside = tmp_path / "outside.txt"
    outside.write_text("needle outside\n")
    os.link(outside, root / "linked.txt")
    found = await search(root, pattern="needle")
    assert found == "a.txt:1:needle here\nlinked.txt:1:needle outside\n\n(2 matches in 2 files)"
    strict = SearchTool(Workspace(root, strict=True))
    assert (await run(strict, pattern="needle")).text_content == (
        "a.txt:1:needle here\n\n(1 match in 1 file)"
    )
    with pytest.raises(al.ToolError) as caught:
        await run(strict, pattern="needle", path="linked.txt")
    assert str(caught.value) == (
        "Access denied: linked.txt has 2 hard links, so it may be a file outside the working "
        "directory; strict confinement refuses such files"
    )
