"""The documentation: every example runs, every link resolves, the API page is complete.

The rules for ``docs/**/*.md`` and ``README.md``:

- Every ```` ```python ```` block runs, each in a fresh module of its own. A block may
  use ``await``, ``async with`` and ``async for`` at top level (as in the ``python -m
  trio`` REPL); such a block runs under ``trio.run`` with
  ``MockClock(autojump_threshold=0)``, so its sleeps take no real time.
- A ```` ```text ```` block that follows a python block, with only blank lines
  between, is that block's exact standard output.
- ``test_*`` functions a block defines are called after the block ran: an async one
  under trio with a ``MockClock(autojump_threshold=0)``, passed as its
  ``autojump_clock`` argument if it takes one (as pytest-trio's fixture would).
- ``<!-- not-run: <reason> -->`` on the line right before a python block skips it
  (it is still compiled). Keep these rare.
- Relative links point to files that exist, and ``#anchors`` to headings that exist.
- ``docs/api.md`` has an entry for every public name of ``agentloop``,
  ``agentloop.providers``, ``agentloop.tools``, ``agentloop.testing``,
  ``agentloop.serialization``, ``agentloop.mcp``, ``agentloop.openapi``,
  ``agentloop.session``, ``agentloop.temporal`` and ``agentloop.otel``, in
  that module's section, and no entry for a name the module does not export.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import io
import itertools
import linecache
import re
import sys
import types
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import agentloop
import agentloop.acp
import agentloop.mcp
import agentloop.openapi
import agentloop.otel
import agentloop.providers
import agentloop.serialization
import agentloop.session
import agentloop.temporal
import agentloop.testing
import agentloop.tools
import agentloop.web

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
API_PAGE = DOCS / "api.md"
API_MODULES = [
    agentloop,
    agentloop.providers,
    agentloop.tools,
    agentloop.testing,
    agentloop.serialization,
    agentloop.mcp,
    agentloop.openapi,
    agentloop.session,
    agentloop.temporal,
    agentloop.otel,
    agentloop.acp,
    agentloop.web,
]

FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`]*)$")
NOT_RUN = re.compile(r"^<!-- not-run: \S.* -->$")


@attrs.frozen
class Block:
    """A fenced code block of a page."""

    path: Path
    line: int  # of the opening fence, 1-based
    info: str  # the fence's info string: "python", "text", ""...
    code: str
    before: str  # the line right before the opening fence
    end: int  # the line of the closing fence, 1-based
    adjacent: bool  # only blank lines separate it from the block before it

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def parse_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of ``path``, in order. An unclosed fence is an error."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    previous_end = -1  # index of the line after the last block
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent = opening["indent"]
        close = index + 1
        while close < len(lines) and lines[close] != f"{indent}```":
            close += 1
        if close == len(lines):
            raise AssertionError(f"{path.relative_to(ROOT)}:{index + 1}: unclosed code block")
        body = [line.removeprefix(indent) for line in lines[index + 1 : close]]
        blocks.append(
            Block(
                path=path,
                line=index + 1,
                info=opening["info"].strip(),
                code="\n".join(body) + "\n",
                before=lines[index - 1] if index else "",
                end=close + 1,
                adjacent=previous_end >= 0
                and all(not line.strip() for line in lines[previous_end:index]),
            )
        )
        index = previous_end = close + 1
    return blocks


def expected_output(block: Block, blocks: list[Block]) -> str | None:
    """The ``text`` block right after ``block``, if there is one."""
    following = blocks[blocks.index(block) + 1 :]
    if following and following[0].info == "text" and following[0].adjacent:
        return following[0].code
    return None


ALL_BLOCKS = {path: parse_blocks(path) for path in PAGES}
PYTHON_BLOCKS = [
    block for blocks in ALL_BLOCKS.values() for block in blocks if block.info == "python"
]


# --------------------------------------------------------------------------- examples


def run_block(block: Block) -> str:
    """Run the block as a module of its own; return what it printed."""
    filename = f"<{block.where}>"
    source = block.code
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    name = "docs_example_" + re.sub(r"\W", "_", block.where)
    module = types.ModuleType(name)
    sys.modules[name] = module
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            if code.co_flags & inspect.CO_COROUTINE:
                # Top-level await: the code object runs as a coroutine.
                body = types.FunctionType(code, module.__dict__)

                async def main() -> None:
                    await body()

                trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
            else:
                exec(code, module.__dict__)
            run_test_functions(module)
    finally:
        del sys.modules[name]
    return out.getvalue()


def run_test_functions(module: types.ModuleType) -> None:
    """Call the ``test_*`` functions defined by the block, the way pytest-trio would."""
    for name, value in list(vars(module).items()):
        if not (name.startswith("test_") and inspect.isfunction(value)):
            continue
        if value.__module__ != module.__name__:
            continue
        parameters = set(inspect.signature(value).parameters)
        unknown = parameters - {"autojump_clock"}
        assert not unknown, f"{name}: the docs runner provides no fixture {sorted(unknown)}"
        if inspect.iscoroutinefunction(value):
            clock = trio.testing.MockClock(autojump_threshold=0)
            kwargs = {"autojump_clock": clock} if parameters else {}
            trio.run(functools.partial(value, **kwargs), clock=clock)
        else:
            assert not parameters, f"{name}: autojump_clock is for async tests"
            value()


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda block: block.where)
def test_example_runs(block: Block) -> None:
    """The example runs without error and prints exactly the output shown after it."""
    if block.before.startswith("<!-- not-run"):
        assert NOT_RUN.match(block.before), (
            f"{block.where}: write the marker as '<!-- not-run: <reason> -->'"
        )
        compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        pytest.skip(block.before)
    printed = run_block(block)
    expected = expected_output(block, ALL_BLOCKS[block.path])
    if expected is not None:
        assert printed == expected


def test_examples_are_found() -> None:
    """The runner sees the examples: every docs page but the API reference has some."""
    with_examples = {block.path for block in PYTHON_BLOCKS}
    pages = {
        path
        for path in DOCS.rglob("*.md")
        if path != API_PAGE and path.parent != DOCS / "reference"
    }
    assert pages, "no docs pages found"
    assert sorted(pages - with_examples) == []


def test_the_site_lists_every_page_and_module() -> None:
    """mkdocs.yml's nav holds every page of docs/, and a reference page per API module."""
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(node: Any) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [page for value in node.values() for page in pages(value)]
        return [page for item in node for page in pages(item)]

    listed = pages(config["nav"])
    present = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))
    assert sorted(listed) == present
    for module in API_MODULES:
        name = module.__name__
        page = DOCS / "reference" / f"{name.rpartition('.')[2] if '.' in name else name}.md"
        assert page.read_text() == f"# `{name}`\n\n::: {name}\n"


@pytest.mark.parametrize("module", API_MODULES, ids=lambda module: module.__name__)
def test_every_public_name_has_a_docstring(module: types.ModuleType) -> None:
    """The reference is built from docstrings: a public class or function without one fails."""
    missing = [
        name
        for name in module.__all__
        if (inspect.isclass(getattr(module, name)) or inspect.isfunction(getattr(module, name)))
        and not inspect.getdoc(getattr(module, name))
    ]
    assert missing == []


def test_examples_run_in_fresh_namespaces() -> None:
    """A name one block defines is not visible to the next."""
    first = Block(DOCS, 1, "python", "shared = 1\n", "", 3, False)
    second = Block(DOCS, 5, "python", "print('shared' in globals())\n", "", 7, False)
    run_block(first)
    assert run_block(second) == "False\n"


def test_output_blocks_are_attached_to_examples() -> None:
    """Every ```text block follows an example directly: none is left unchecked."""
    loose = [
        block.where
        for blocks in ALL_BLOCKS.values()
        for previous, block in itertools.pairwise([None, *blocks])
        if block.info == "text"
        and not (previous is not None and previous.info == "python" and block.adjacent)
    ]
    assert loose == []


def test_not_run_markers_are_rare() -> None:
    """Fragments are the exception: at most one example in ten is not run."""
    skipped = [block for block in PYTHON_BLOCKS if block.before.startswith("<!-- not-run")]
    assert len(skipped) * 10 <= len(PYTHON_BLOCKS)


# --------------------------------------------------------------------------- links


INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"\n]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(?P<text>.+?)\s*#*\s*$")


def prose(path: Path) -> list[str]:
    """The page's lines, with code blocks blanked out."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for block in ALL_BLOCKS.get(path) or parse_blocks(path):
        for index in range(block.line - 1, block.end):
            lines[index] = ""
    return lines


def anchors(path: Path) -> set[str]:
    """The ``#anchors`` GitHub gives the page's headings."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    for line in prose(path):
        heading = HEADING.match(line)
        if heading is None:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading["text"])  # links: their text
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        seen = counts.get(slug, 0)
        counts[slug] = seen + 1
        found.add(slug if seen == 0 else f"{slug}-{seen}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    """Each relative link names a file that exists, and a heading in it for an #anchor."""
    broken: list[str] = []
    for number, line in enumerate(prose(page), 1):
        for link in LINK.finditer(INLINE_CODE.sub("", line)):
            target = link["target"]
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:...
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (page.parent / file_part).resolve() if file_part else page
            if not resolved.exists():
                broken.append(f"line {number}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"line {number}: {target} (no such heading)")
    assert broken == []


# --------------------------------------------------------------------------- the API page


ENTRY = re.compile(
    r"^(?:- |#{3,4} |\| )(?P<spans>`[^`]+`(?:,\s*`[^`]+`)*)",
    re.MULTILINE,
)
SPAN_NAME = re.compile(r"`(?:class |async def |def |async with )?(?P<name>[A-Za-z_]\w*)")


def api_sections() -> dict[str, str]:
    """The API page's ``## `module` `` sections, by module name."""
    text = "\n".join(prose(API_PAGE))
    sections: dict[str, str] = {}
    parts = re.split(r"^## `([\w.]+)`[^\n]*$", text, flags=re.MULTILINE)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sections[name] = body
    return sections


def entry_names(section: str) -> set[str]:
    """The names the section's entries (list items, table rows, headings) start with."""
    names: set[str] = set()
    for entry in ENTRY.finditer(section):
        names.update(span["name"] for span in SPAN_NAME.finditer(entry["spans"]))
    return names


LIST_ENTRY = re.compile(r"^- (?P<spans>`[^`]+`(?:,\s*`[^`]+`)*)(?P<after>.*)$", re.MULTILINE)


def test_api_entries_break_after_their_signature() -> None:
    """A list entry's signature ends its line with a backslash, so the description
    starts on a line of its own (a lost backslash joins them into one paragraph)."""
    text = "\n".join(prose(API_PAGE))
    joined = [
        entry["spans"][:60]
        for entry in LIST_ENTRY.finditer(text)
        if entry["after"] and entry["after"] != "\\" and not entry["after"].startswith(":")
    ]
    assert joined == []


@pytest.mark.parametrize("module", API_MODULES, ids=lambda module: module.__name__)
def test_api_page_lists_every_public_name(module: Any) -> None:
    """Every name in the module's __all__ has an entry in its section of docs/api.md."""
    sections = api_sections()
    assert module.__name__ in sections, f"docs/api.md has no section ## `{module.__name__}`"
    documented = entry_names(sections[module.__name__])
    assert sorted(set(module.__all__) - documented) == []


@pytest.mark.parametrize("module", API_MODULES, ids=lambda module: module.__name__)
def test_api_page_lists_only_public_names(module: Any) -> None:
    """No entry of the module's section names something the module does not export."""
    documented = entry_names(api_sections()[module.__name__])
    assert sorted(documented - set(module.__all__)) == []
