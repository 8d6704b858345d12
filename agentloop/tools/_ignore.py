"""Which files of a tree the listing and search tools see: .gitignore rules, globs, the walk.

Three pieces, shared by ``list_files`` and ``search``:

- :class:`GitIgnore`: the rules of one ``.gitignore`` file, with git's semantics
  (``gitignore(5)``): blank lines and ``#`` comments; ``\\`` escapes; trailing
  spaces dropped unless escaped; ``!`` re-includes; a trailing ``/`` matches
  directories only; a pattern with a ``/`` at the start or in the middle is
  anchored to the directory of its ``.gitignore``, one without matches at any
  depth below it; ``*`` and ``?`` never match ``/``; ``[...]`` classes (``!`` or
  ``^`` negates, POSIX ``[:alpha:]`` names); a leading ``**/``, a trailing
  ``/**`` and ``/**/`` cross directories, any other ``**`` is a ``*``. Each
  file's rules are compiled into two regular expressions (one for files, one
  for directories) the first time they are needed. The last matching rule wins;
  a deeper ``.gitignore`` overrides a shallower one; a file inside an ignored
  directory stays ignored whatever the rules say about the file itself.
- :class:`Glob`: the ``pattern`` of ``list_files`` and the ``include`` of
  ``search``, matched against root-relative paths with the same rules (plus
  ``{a,b}`` alternatives, as ripgrep's ``--glob`` has them).
- :class:`IgnoreTree` and :func:`walk_files`: the ``.gitignore`` files of a
  workspace, loaded once each, and the sorted walk both tools make. The walk
  never enters :data:`SKIP_DIRS`, virtualenvs (directories holding a
  ``pyvenv.cfg``), ignored directories or symlinks, and lists regular files
  only. The path a tool is asked about is not itself checked against the
  rules (as with ripgrep, naming a path is asking for it); what is below it is,
  by the ``.gitignore`` files of every directory from the workspace root down.

Differences from git that do not matter here: no ``core.excludesFile``,
``.git/info/exclude`` or ``core.ignoreCase``; a ``.gitignore`` that is a symlink
is not read.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import attrs

from ._workspace import SKIP_DIRS

__all__ = [
    "BINARY_PROBE",
    "GitIgnore",
    "Glob",
    "IgnoreTree",
    "IgnoreRule",
    "is_binary",
    "translate_glob",
    "walk_files",
]

#: A file whose first this many bytes hold a NUL is binary; the tools skip it.
BINARY_PROBE = 8192

_POSIX_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "\\x21-\\x7e",
    "lower": "a-z",
    "print": "\\x20-\\x7e",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}


# --------------------------------------------------------------------------- globs


def _class_char(char: str) -> str:
    return "\\" + char if char in "\\]^-[&~|" else char


def _translate_class(pattern: str, start: int) -> tuple[str, int]:
    """The regex for the ``[...]`` class opening at ``start``, and the index after it."""
    i = start + 1
    n = len(pattern)
    negated = i < n and pattern[i] in "!^"
    if negated:
        i += 1
    items: list[str] = []
    has_slash = False
    first = True
    while True:
        if i >= n:
            raise ValueError(f"unclosed character class in {pattern!r}")
        char = pattern[i]
        if char == "]" and not first:
            i += 1
            break
        first = False
        if char == "[" and pattern.startswith("[:", i):
            end = pattern.find(":]", i + 2)
            if end < 0:
                raise ValueError(f"unclosed character class in {pattern!r}")
            name = pattern[i + 2 : end]
            if name not in _POSIX_CLASSES:
                raise ValueError(f"unknown character class [:{name}:] in {pattern!r}")
            items.append(_POSIX_CLASSES[name])
            has_slash = has_slash or name in ("graph", "print", "punct")
            i = end + 2
            continue
        if char == "\\":
            i += 1
            if i >= n:
                raise ValueError(f"unclosed character class in {pattern!r}")
            char = pattern[i]
        i += 1
        if i + 1 < n and pattern[i] == "-" and pattern[i + 1] != "]":
            high = pattern[i + 1]
            i += 2
            if high == "\\":
                if i >= n:
                    raise ValueError(f"unclosed character class in {pattern!r}")
                high = pattern[i]
                i += 1
            if char <= high:  # a reversed range matches nothing, as in git
                items.append(f"{_class_char(char)}-{_class_char(high)}")
                has_slash = has_slash or char <= "/" <= high
            continue
        items.append(_class_char(char))
        has_slash = has_slash or char == "/"
    body = "".join(items)
    if negated:  # never '/': classes match within one path component
        return f"[^/{body}]", i
    if not body:
        return "(?!)", i
    return (f"(?!/)[{body}]" if has_slash else f"[{body}]"), i


def translate_glob(pattern: str, *, braces: bool = False) -> str:
    """The regular expression (unanchored source) for a path glob, gitignore style.

    ``*`` and ``?`` stay within one path component; ``**`` as a whole component
    crosses directories (``**/`` any leading directories, ``/**`` everything
    inside); any other ``**`` is a ``*``. ``braces`` enables ``{a,b}``
    alternatives (not nested).

    Raises:
        ValueError: an unclosed ``[`` or ``{``, a trailing ``\\``, a nested ``{``.

    >>> import re
    >>> bool(re.fullmatch(translate_glob("src/**/*.py"), "src/a/b/c.py"))
    True
    >>> bool(re.fullmatch(translate_glob("*.py"), "src/c.py"))
    False
    """
    out: list[str] = []
    i = 0
    n = len(pattern)
    depth = 0  # inside {...}
    while i < n:
        char = pattern[i]
        if char == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            component = (i == 0 or pattern[i - 1] == "/") and (j == n or pattern[j] == "/")
            if j - i >= 2 and component and depth == 0:
                if j == n:
                    out.append(".*")
                else:
                    out.append("(?:.*/)?")
                    j += 1
            else:
                out.append("[^/]*")
            i = j
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            regex, i = _translate_class(pattern, i)
            out.append(regex)
        elif char == "\\":
            if i + 1 >= n:
                raise ValueError(f"pattern ends with an unescaped backslash: {pattern!r}")
            out.append(re.escape(pattern[i + 1]))
            i += 2
        elif braces and char == "{":
            if depth:
                raise ValueError(f"nested {{...}} alternatives are not supported: {pattern!r}")
            depth = 1
            out.append("(?:")
            i += 1
        elif braces and char == "}" and depth:
            depth = 0
            out.append(")")
            i += 1
        elif braces and char == "," and depth:
            out.append("|")
            i += 1
        else:
            out.append(re.escape(char))
            i += 1
    if depth:
        raise ValueError(f"unclosed {{ in {pattern!r}")
    return "".join(out)


def _anchor(pattern: str, *, braces: bool) -> tuple[str, bool]:
    """(regex for paths relative to the pattern's base, directories only?)."""
    dir_only = pattern.endswith("/")
    if dir_only:
        pattern = pattern[:-1]
    if not pattern:
        raise ValueError("empty pattern")
    anchored = "/" in pattern
    if pattern.startswith("/"):
        pattern = pattern[1:]
    regex = translate_glob(pattern, braces=braces)
    return (regex if anchored else "(?:.*/)?" + regex), dir_only


@attrs.frozen
class Glob:
    """A path glob matched against root-relative paths, like ripgrep's ``--glob``.

    A pattern without a ``/`` matches a file's name in any directory; one with a
    ``/`` is anchored at the root (a leading ``/`` is allowed); ``**`` crosses
    directories; ``{a,b}`` gives alternatives. A leading ``!`` negates: matching
    files and directories are left out instead.

    >>> Glob.parse("*.py").accepts("src/app.py"), Glob.parse("src/*.py").accepts("app.py")
    (True, False)
    >>> Glob.parse("!tests").prunes("pkg/tests"), Glob.parse("!tests").accepts("pkg/a.py")
    (True, True)

    Raises (``parse``):
        ValueError: the pattern is empty or malformed.
    """

    pattern: str
    negated: bool
    dir_only: bool
    regex: re.Pattern[str] = attrs.field(repr=False)

    @classmethod
    def parse(cls, pattern: str) -> Glob:
        """Compile ``pattern``."""
        negated = pattern.startswith("!")
        body = pattern[1:] if negated else pattern
        if not body:
            raise ValueError("empty glob")
        source, dir_only = _anchor(body, braces=True)
        return cls(pattern, negated, dir_only, re.compile(source, re.DOTALL))

    def matches(self, path: str, is_dir: bool = False) -> bool:
        """Whether the pattern (without its ``!``) matches ``path``."""
        if self.dir_only and not is_dir:
            return False
        return self.regex.fullmatch(path) is not None

    def accepts(self, path: str) -> bool:
        """Whether the file ``path`` passes this glob."""
        return self.matches(path) != self.negated

    def prunes(self, path: str) -> bool:
        """Whether the directory ``path`` is left out (only a negated glob leaves any out)."""
        return self.negated and self.matches(path, is_dir=True)


# --------------------------------------------------------------------------- .gitignore


@attrs.frozen
class IgnoreRule:
    """One pattern line of a ``.gitignore``."""

    pattern: str  # as written, after trimming
    negated: bool
    dir_only: bool
    source: str  # the regex source, for paths relative to the .gitignore's directory


def _trim_trailing_spaces(line: str) -> str:
    """Drop trailing spaces unless escaped with a backslash (git's trim_trailing_spaces)."""
    last_space = -1
    i = 0
    while i < len(line):
        char = line[i]
        if char == " ":
            if last_space < 0:
                last_space = i
        elif char == "\\":
            i += 1
            if i >= len(line):
                return line
            last_space = -1
        else:
            last_space = -1
        i += 1
    return line[:last_space] if last_space >= 0 else line


def _parse_rule(line: str) -> IgnoreRule | None:
    if line.endswith("\r"):
        line = line[:-1]
    if not line or line.startswith("#"):
        return None
    line = _trim_trailing_spaces(line)
    negated = line.startswith("!")
    body = line[1:] if negated else line
    try:
        source, dir_only = _anchor(body, braces=False)
    except ValueError:
        return None  # empty or malformed: git never matches it either
    return IgnoreRule(line, negated, dir_only, source)


class GitIgnore:
    """The rules of one ``.gitignore`` file, for paths below its directory ``base``.

    ``base`` is the directory's root-relative path (``""`` for the root).

    >>> rules = GitIgnore.parse("*.log\\n!keep.log\\nbuild/\\n/TODO\\n")
    >>> [rules.match(p, d) for p, d in [("a/x.log", False), ("keep.log", False),
    ...     ("src/build", True), ("src/build", False), ("TODO", False), ("a/TODO", False)]]
    [True, False, True, None, True, None]
    """

    __slots__ = ("_dirs", "_files", "base", "rules")

    def __init__(self, rules: Sequence[IgnoreRule], base: str = "") -> None:
        self.rules = tuple(rules)
        self.base = base
        self._files: re.Pattern[str] | None = None
        self._dirs: re.Pattern[str] | None = None

    def __repr__(self) -> str:
        return f"GitIgnore(<{len(self.rules)} rules>, base={self.base!r})"

    @classmethod
    def parse(cls, text: str, base: str = "") -> GitIgnore:
        """The rules in ``text``, the content of a ``.gitignore`` in directory ``base``."""
        text = text.removeprefix("\ufeff")
        rules = [rule for line in text.split("\n") if (rule := _parse_rule(line)) is not None]
        return cls(rules, base)

    def _compile(self, for_dirs: bool) -> re.Pattern[str]:
        # One alternation, last rule first: fullmatch takes the first alternative that
        # matches, so lastgroup names the last matching rule of the file.
        parts = [
            f"(?P<{'n' if rule.negated else 'i'}{index}>{rule.source})"
            for index, rule in reversed(list(enumerate(self.rules)))
            if for_dirs or not rule.dir_only
        ]
        return re.compile("|".join(parts) if parts else "(?!)", re.DOTALL)

    def match(self, path: str, is_dir: bool) -> bool | None:
        """``path`` (relative to ``base``) by the last rule matching it: ignored (True),
        re-included (False), or None when no rule matches."""
        if is_dir:
            if self._dirs is None:
                self._dirs = self._compile(True)
            found = self._dirs.fullmatch(path)
        else:
            if self._files is None:
                self._files = self._compile(False)
            found = self._files.fullmatch(path)
        if found is None:
            return None
        return found.lastgroup is not None and found.lastgroup[0] == "i"


def _relative_to(path: str, base: str) -> str | None:
    if not base:
        return path
    if path.startswith(base) and path[len(base) : len(base) + 1] == "/":
        return path[len(base) + 1 :]
    return None


def match_entry(ignores: Sequence[GitIgnore], path: str, is_dir: bool) -> bool:
    """Whether the entry ``path`` is ignored by the rules of its directories' ``.gitignore`` files.

    ``ignores`` go from the shallowest directory to the deepest; files whose
    directory is not above ``path`` are passed over. The deepest file with a
    matching rule decides. The entry's parent directories are not checked.
    """
    for ignore in reversed(ignores):
        relative = _relative_to(path, ignore.base)
        if relative is None:
            continue
        verdict = ignore.match(relative, is_dir)
        if verdict is not None:
            return verdict
    return False


def is_ignored(ignores: Iterable[GitIgnore], path: str, is_dir: bool = False) -> bool:
    """Whether git would ignore ``path`` (root-relative), given these ``.gitignore`` files.

    Like ``git check-ignore``: a path inside an ignored directory is ignored,
    whatever a ``!`` rule says about the path itself.

    >>> rules = [GitIgnore.parse("build/\\n!build/keep.txt\\n")]
    >>> is_ignored(rules, "build/keep.txt"), is_ignored(rules, "src/keep.txt")
    (True, False)
    """
    ordered = sorted(ignores, key=lambda ignore: ignore.base.count("/") + bool(ignore.base))
    parts = path.split("/")
    for end in range(1, len(parts) + 1):
        directory = end < len(parts) or is_dir
        if match_entry(ordered, "/".join(parts[:end]), directory):
            return True
    return False


# --------------------------------------------------------------------------- the tree


def is_binary(path: str | os.PathLike[str]) -> bool:
    """Whether the file's first :data:`BINARY_PROBE` bytes hold a NUL (unreadable: True)."""
    try:
        with open(path, "rb") as file:
            return b"\0" in file.read(BINARY_PROBE)
    except OSError:
        return True


class IgnoreTree:
    """What the tools see of a workspace: its ``.gitignore`` files and virtualenvs, each
    looked at once, and an optional :class:`Glob` that files must pass.

    Paths are root-relative with ``/`` (``""`` is the root). Not thread-safe:
    one walk or one search at a time.
    """

    def __init__(
        self, root: Path, glob: Glob | None = None, hides: Callable[[Path], bool] | None = None
    ) -> None:
        self.root = root
        self.glob = glob
        self.hides = hides  # a file this says True for is never shown (strict confinement)
        self._ignores: dict[str, GitIgnore | None] = {}
        self._stacks: dict[str, tuple[GitIgnore, ...]] = {}
        self._visible_dirs: dict[str, bool] = {}

    def gitignore(self, directory: str) -> GitIgnore | None:
        """The rules of ``directory``'s ``.gitignore``, or None if it has none."""
        if directory in self._ignores:
            return self._ignores[directory]
        rules: GitIgnore | None = None
        path = self.root / directory / ".gitignore"
        try:
            if stat.S_ISREG(path.lstat().st_mode):
                rules = GitIgnore.parse(path.read_bytes().decode("utf-8", "replace"), directory)
        except OSError:
            pass
        if rules is not None and not rules.rules:
            rules = None
        self._ignores[directory] = rules
        return rules

    def stack(self, directory: str) -> tuple[GitIgnore, ...]:
        """The ``.gitignore`` files that apply inside ``directory``, shallowest first."""
        cached = self._stacks.get(directory)
        if cached is not None:
            return cached
        above = self.stack(directory.rpartition("/")[0]) if directory else ()
        own = self.gitignore(directory)
        result = (*above, own) if own is not None else above
        self._stacks[directory] = result
        return result

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether the entry ``path`` is ignored by its directories' rules (not its parents')."""
        return match_entry(self.stack(path.rpartition("/")[0]), path, is_dir)

    def is_venv(self, directory: str) -> bool:
        """Whether ``directory`` holds a ``pyvenv.cfg``."""
        try:
            return stat.S_ISREG((self.root / directory / "pyvenv.cfg").stat().st_mode)
        except OSError:
            return False

    def file_passes(self, path: str) -> bool:
        """Whether the file ``path``, in a directory the walk enters, is shown."""
        return (
            not self.ignored(path, False)
            and (self.glob is None or self.glob.accepts(path))
            and (self.hides is None or not self.hides(self.root / path))
        )

    def dir_passes(self, path: str) -> bool:
        """Whether the walk enters the directory ``path`` (virtualenvs aside)."""
        name = path.rpartition("/")[2]
        return not (
            name in SKIP_DIRS
            or self.ignored(path, True)
            or (self.glob is not None and self.glob.prunes(path))
        )

    def visible(self, start: str, path: str) -> bool:
        """Whether the walk from ``start`` reaches the file ``path`` (which exists).

        Checks every directory between them and the file itself, as
        :func:`walk_files` does. A ``path`` that is not below ``start`` is
        ``start`` itself: a file asked for by name, always visible.
        """
        prefix = f"{start}/" if start else ""
        if not path.startswith(prefix) or path == start:
            return True
        directory = start
        for name in path[len(prefix) :].split("/")[:-1]:
            directory = f"{directory}/{name}" if directory else name
            known = self._visible_dirs.get(directory)
            if known is None:
                known = self.dir_passes(directory) and not self.is_venv(directory)
                self._visible_dirs[directory] = known
            if not known:
                return False
        return self.file_passes(path)


_DIR, _FILE = 1, 2


def _scan(path: Path) -> list[tuple[str, int]]:
    """(name, kind) of the entries of ``path``, in byte order of their names (as ripgrep sorts)."""
    entries: list[tuple[bytes, str, int]] = []
    with os.scandir(path) as scanner:
        for entry in scanner:
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    kind = _DIR
                elif entry.is_file(follow_symlinks=False):
                    kind = _FILE
                else:
                    continue
            except OSError:
                continue
            entries.append((os.fsencode(entry.name), entry.name, kind))
    entries.sort()
    return [(name, kind) for _, name, kind in entries]


def walk_files(
    tree: IgnoreTree, start: str, *, max_depth: int | None = None
) -> Iterator[str | None]:
    """The root-relative paths of the files below directory ``start``, depth first, sorted.

    Entries of a directory come in byte order of their names, and a
    directory's files come where its name sorts (ripgrep's ``--sort path``
    order). ``None`` is yielded after each directory read, so that a caller can
    stop between them. Files directly in ``start`` are at depth 1. Symlinks,
    special files and unreadable directories are left out.
    """
    try:
        entries = _scan(tree.root / start)
    except OSError:
        return
    stack: list[tuple[str, Iterator[tuple[str, int]], int]] = [(start, iter(entries), 1)]
    yield None
    while stack:
        directory, entries_left, depth = stack[-1]
        entry = next(entries_left, None)
        if entry is None:
            stack.pop()
            continue
        name, kind = entry
        path = f"{directory}/{name}" if directory else name
        if kind == _FILE:
            if tree.file_passes(path):
                yield path
            continue
        if (max_depth is not None and depth >= max_depth) or not tree.dir_passes(path):
            continue
        try:
            children = _scan(tree.root / path)
        except OSError:
            continue
        if ("pyvenv.cfg", _FILE) in children:
            continue
        stack.append((path, iter(children), depth + 1))
        yield None
