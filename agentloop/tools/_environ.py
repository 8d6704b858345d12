"""Which inherited environment variables a command may see: secrets stay out.

A variable is held back when its *name* says it is a credential, when its
*value* looks like one (see :mod:`agentloop._secrets` for both rules), when it
matches a user's deny pattern, or when :func:`hide_process_credentials` hid it;
an allow pattern lets one through anyway.

:func:`hide_process_credentials` closes the other way a command reaches the
agent's credentials: ``/proc/<agent pid>/environ``, which shows the environment
the agent was started with, whatever :data:`os.environ` holds since.
"""

from __future__ import annotations

import ctypes
import fnmatch
import os
import sys
from collections.abc import Iterable, Mapping

from .._secrets import is_secret_name, is_secret_value

__all__ = ["DEFAULT_ENV_DENY", "filter_environment", "hide_process_credentials", "is_secret"]

#: Environment variables never passed to commands (glob patterns, case-insensitive), on top
#: of those whose name or value marks them as credentials.
DEFAULT_ENV_DENY: tuple[str, ...] = ("*_API_KEY", "*_TOKEN", "*SECRET*", "*PASSWORD*", "AWS_*")

#: The variables hide_process_credentials hid: withheld from commands too.
_hidden: set[str] = set()
#: Copies of the hidden entries that the C environment points to now (kept alive).
_copies: list[ctypes.Array[ctypes.c_char]] = []


def _matches(name: str, patterns: Iterable[str]) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern.upper()) for pattern in patterns)


def is_secret(
    name: str, value: str, *, deny: Iterable[str] = (), allow: Iterable[str] = ()
) -> bool:
    """Whether the variable is held back: a secret by name or value, denied, or hidden by
    :func:`hide_process_credentials`, and not allowed.

    ``deny`` and ``allow`` are glob patterns matched case-insensitively against the name.
    """
    if _matches(name, allow):
        return False
    return name in _hidden or is_secret_name(name) or is_secret_value(value) or _matches(name, deny)


def filter_environment(
    environ: Mapping[str, str], *, deny: Iterable[str] = (), allow: Iterable[str] = ()
) -> dict[str, str]:
    """``environ`` without the variables :func:`is_secret` holds back."""
    deny, allow = tuple(deny), tuple(allow)
    return {
        name: value
        for name, value in environ.items()
        if not is_secret(name, value, deny=deny, allow=allow)
    }


def _blocks() -> tuple[int, int, int, int] | None:
    """This process's argument and environment blocks: (arg_start, arg_end, env_start,
    env_end), from ``/proc/self/stat``; None where there is no such file."""
    try:
        with open("/proc/self/stat", "rb") as file:
            data = file.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()  # fields[0] is the third field
    try:
        arg_start, arg_end, env_start, env_end = (int(field) for field in fields[45:49])
    except ValueError:
        return None
    if not (0 < arg_start <= arg_end and 0 < env_start <= env_end):
        return None
    return arg_start, arg_end, env_start, env_end


def _entries(start: int, end: int) -> list[tuple[int, bytes]]:
    """The NUL-terminated strings between ``start`` and ``end``, with their addresses."""
    data = ctypes.string_at(start, end - start)
    entries = []
    offset = 0
    for entry in data.split(b"\0"):
        if entry:
            entries.append((start + offset, entry))
        offset += len(entry) + 1
    return entries


def _secret_span(argument: bytes) -> tuple[int, int] | None:
    """Where a secret is in a command-line argument: all of it, or what follows ``--x=``."""
    text = os.fsdecode(argument)
    option, equals, value = text.partition("=")
    if equals and option.startswith("-") and is_secret_value(value):
        return len(os.fsencode(option)) + 1, len(argument)
    if is_secret_value(text):
        return 0, len(argument)
    return None


def hide_process_credentials(
    names: Iterable[str] | None = None, *, also: Iterable[str] = ()
) -> tuple[str, ...]:
    """Wipe credentials from what ``/proc/<this pid>/environ`` and ``cmdline`` show.

    ``/proc/<pid>/environ`` shows the memory the kernel copied the environment
    into when the program started (Python's :data:`os.environ` is a copy made
    then), so a process that may read it, such as one of the user's own commands
    (sandboxed or not, if it runs as root), reads the credentials the program was
    started with, even those its environment filter keeps from it. This
    function, in this process:

    - overwrites with NUL bytes, in that memory, each ``NAME=value`` whose name
      is in ``names`` (by default: every variable :func:`filter_environment`
      withholds from ``bash`` with :data:`DEFAULT_ENV_DENY`: credentials by
      name or value) or in ``also``;
    - first points the C library's ``environ`` entries for them to copies of
      the same text, so ``getenv``, and programs started without an explicit
      environment, still see them; :data:`os.environ` is untouched, so
      providers still find their keys;
    - overwrites with ``*`` each command-line argument that looks like a
      credential (a URL with a password, a known token format; after ``=`` for
      ``--option=value``): ``/proc/<pid>/cmdline``; :data:`sys.argv` keeps it;
    - from then on withholds every variable it was asked to hide (found in that
      memory or not) from the commands of every ``BashTool`` of this process
      (:func:`is_secret` says so), whatever its name, unless an ``env_allow``
      pattern lets it through.

    Call it early, once the variables are read, before starting threads that
    read the environment through the C library (``getenv`` racing the change
    could see a half-wiped entry). The terminal agent calls it at start, with
    the model's key variable in ``also``. It does nothing where there is no
    ``/proc`` (other systems than Linux). The credentials are still in this
    process's memory (``/proc/<pid>/mem``, which a sandboxed command cannot read;
    an unsandboxed command of the same user can, where ``ptrace`` is allowed).

    Returns:
        The names of the variables wiped, sorted.
    """
    blocks = _blocks() if sys.platform.startswith("linux") else None
    if blocks is None:
        return ()
    arg_start, arg_end, env_start, env_end = blocks
    wanted = set(also)
    entries = _entries(env_start, env_end)
    for _address, entry in entries:
        name, equals, value = entry.partition(b"=")
        if not equals:
            continue
        text_name = os.fsdecode(name)
        if names is None and is_secret(text_name, os.fsdecode(value), deny=DEFAULT_ENV_DENY):
            wanted.add(text_name)
    if names is not None:
        wanted.update(names)
    doomed = {
        address: entry
        for address, entry in entries
        if os.fsdecode(entry.partition(b"=")[0]) in wanted and b"=" in entry
    }
    array = ctypes.c_void_p.in_dll(ctypes.CDLL(None), "environ").value
    environ = ctypes.cast(array or 0, ctypes.POINTER(ctypes.c_void_p))
    index = 0
    while array and (pointer := environ[index]) is not None:
        if pointer in doomed:
            copy = ctypes.create_string_buffer(doomed[pointer])
            _copies.append(copy)
            environ[index] = ctypes.addressof(copy)
        index += 1
    for address, entry in doomed.items():
        ctypes.memset(address, 0, len(entry))
    for address, argument in _entries(arg_start, arg_end):
        span = _secret_span(argument)
        if span is not None:
            ctypes.memset(address + span[0], ord("*"), span[1] - span[0])
    hidden = sorted({os.fsdecode(entry.partition(b"=")[0]) for entry in doomed.values()})
    _hidden.update(hidden)
    _hidden.update(wanted)
    return tuple(hidden)
