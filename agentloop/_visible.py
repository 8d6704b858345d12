"""Text for a terminal: what a model, a tool or a server sent, shown as it is, never obeyed.

A terminal acts on some characters instead of showing them: ``ESC [2K`` erases
the line, ``\\r`` goes back to its start, ``\\b`` back one column, ``ESC ]``
sets the window's title (or, on some terminals, writes the clipboard), and the
8-bit C1 controls (U+0080 to U+009F: U+009B is a CSI) do the same on terminals
that honour them. The bidirectional controls (U+202A to U+202E, U+2066 to
U+2069, and the marks U+200E, U+200F, U+061C) reorder what is shown, so a
command can look different from the one that runs (the "Trojan Source" trick).

:func:`visible` escapes all of those, Python-style (``\\x1b``, ``\\r``,
``\\u202e``), and keeps newlines and tabs: it is for streamed text and lines
(the model's answer, a command's output, a tool's result, a server's message).
A CR-LF line ending is a newline. :func:`visible_line` is for a question the
user answers (a permission, a server's request): one line, so newlines and tabs
are escaped too, and so is every invisible formatting character (Unicode's
``Cf``: zero-width spaces and joiners, tag characters...), line and paragraph
separators and lone surrogates: what the user approves is exactly what runs.

A backslash is not escaped: ``\\x1b`` written out by a model looks like an
escaped ESC. Either way nothing reaches the terminal that acts on it.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["visible", "visible_line"]

# C0 controls but newline and tab, DEL, C1, and the bidirectional controls and marks.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"\r\n|[{_CONTROLS}]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _replace(match: re.Match[str]) -> str:
    found = match.group()
    return "\n" if found == "\r\n" else _escape(found)


def visible(text: str) -> str:
    """``text`` with every character a terminal would act on shown escaped; see the module.

    Newlines and tabs stay; ``\\r\\n`` becomes ``\\n``. Text with nothing to
    escape comes back as the same object.

    >>> visible("ok\\x1b[2K\\rrm -rf ~\\r\\n\\u202edone")
    'ok\\\\x1b[2K\\\\rrm -rf ~\\n\\\\u202edone'
    """
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_replace, text)


def visible_line(text: str) -> str:
    """``text`` as one line with nothing hidden: see the module.

    Newlines, tabs, every control and invisible formatting character are escaped.

    >>> visible_line("ls\\n\\trm\\u200b -rf")
    'ls\\\\n\\\\trm\\\\u200b -rf'
    """
    if text.isascii() and text.isprintable():
        return text
    return "".join(
        _escape(char) if unicodedata.category(char) in _HIDDEN else char for char in text
    )
