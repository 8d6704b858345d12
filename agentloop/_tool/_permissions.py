"""Permissions: which tool calls may run, may not, or need someone's approval.

A rule names a tool, and optionally what the call touches::

    Permissions(
        allow=["read_file", "list_files", "search", "bash(git status)", "bash(git diff *)"],
        ask=["write_file(src/**)", "edit_file(src/**)", "bash(*)"],
        deny=["bash(rm *)", "mcp__*"],
        approver=ask_the_user,
    )

The tool part is a glob on the tool's name (``mcp__*`` covers every tool of
MCP servers). The part in parentheses is matched against the call's
*subject*, which a tool declares with a ``permission_subject(params)`` method
returning ``(kind, value)``:

- ``("command", "git log -3")`` (bash): ``*`` matches any characters, and a
  pattern ending in `` *`` also matches the command without arguments
  (``git diff *`` covers ``git diff``, not ``git difftool``).
- ``("path", "src/app.py")`` (file tools: the path relative to the root):
  ``*`` and ``?`` stay within one directory, ``**`` crosses directories.

A tool without a subject is matched by its name only; a rule with a part in
parentheses never matches it.

For each call, in this order: a matching ``deny`` rule refuses it; else a
matching ``ask`` rule asks the ``approver``; else a matching ``allow`` rule
lets it run; else, for a sandboxed call, ``sandboxed`` decides, if set; else
``default`` decides (``"allow"``, ``"ask"`` or ``"deny"``).

Sandboxed calls: a tool whose ``sandboxed`` attribute is True (a ``BashTool``
with a ``Sandbox`` that this system can enforce) runs its calls confined, so a
policy may trust them more: ``Permissions(default="ask", sandboxed="allow")``
runs sandboxed commands without asking, the way Codex's auto mode does, while
the same commands ask when the sandbox is unavailable (the tool then reports
``sandboxed = False``). ``deny`` and ``ask`` rules still apply to sandboxed
calls (``ask=["bash(git push *)"]`` still asks), as do ``allow`` rules. The
attribute is read for each call; anything but ``True`` counts as unsandboxed.

Shell commands are split at ``;``, ``&&``, ``||``, ``|``, ``&`` and newlines:
``deny`` and ``ask`` apply when the whole command or any part matches;
``allow`` applies only when every part is allowed by some rule (or a rule's
own pattern spans the operators), and never to a command with ``$(``,
backquotes or ``<`` / ``>`` redirections (those need an ``ask`` or ``default``
decision). So ``bash(git *)`` does not allow ``git log && rm -rf build``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

from .._approval import Approve, Decision, Deferred, Deny, answer_of
from .._approval import describe_call as _describe
from .._check import number_field
from .._util import call_hook
from ._protocol import tool_traits

__all__ = [
    "Answer",
    "Approver",
    "PermissionRequest",
    "PermissionRule",
    "Permissions",
]

Action: TypeAlias = Literal["allow", "ask", "deny"]
_RULE = re.compile(r"^\s*(?P<tool>[^()\s]+)\s*(?:\((?P<argument>.*)\))?\s*$", re.DOTALL)
_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\||&|\n)\s*")
_COMPLEX = re.compile(r"\$\(|`|[<>]")


def _path_regex(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(\*\*/?|\*|\?)", pattern)
    regex = []
    for part in parts:
        if part in ("**", "**/"):
            regex.append(".*")
        elif part == "*":
            regex.append("[^/]*")
        elif part == "?":
            regex.append("[^/]")
        else:
            regex.append(re.escape(part))
    return re.compile("".join(regex), re.DOTALL)


@attrs.frozen
class PermissionRule:
    """One rule: ``action`` for calls of tools named like ``tool`` whose subject matches.

    >>> PermissionRule.parse("allow", "bash(git *)")
    PermissionRule(action='allow', tool='bash', argument='git *')
    """

    action: Action
    tool: str
    argument: str | None = None

    @classmethod
    def parse(cls, action: Action, text: str) -> PermissionRule:
        """A rule from ``"tool"`` or ``"tool(argument)"``.

        Raises:
            ValueError: the text is not of that form.
        """
        match = _RULE.match(text)
        if match is None:
            raise ValueError(
                f"not a permission rule: {text!r} (expected 'tool' or 'tool(pattern)')"
            )
        return cls(action, match["tool"], match["argument"])

    def __str__(self) -> str:
        return self.tool if self.argument is None else f"{self.tool}({self.argument})"

    def matches_tool(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.tool)

    def matches_subject(self, kind: str, value: str) -> bool:
        """Whether the rule's argument pattern matches a subject (no pattern: always)."""
        if self.argument is None:
            return True
        if kind == "path":
            return _path_regex(self.argument).fullmatch(value) is not None
        value = value.strip()
        if self.argument.endswith(" *") and value == self.argument[:-2].rstrip():
            return True  # "git diff *" also covers a bare "git diff"
        return fnmatch.fnmatchcase(value, self.argument)


@attrs.frozen(kw_only=True)
class PermissionRequest:
    """What an approver is asked about: one tool call, and the rule that asks."""

    tool_name: str
    tool_call_id: str
    arguments: dict[str, Any]
    subject: tuple[str, str] | None
    rule: PermissionRule | None  # None: no rule matched; ``default="ask"`` asks
    sandboxed: bool = False  # the call would run in a sandbox (see Permissions.sandboxed)
    reason: str = ""  # the sentence that asks: "bash 'make' needs approval (the rule ask(bash(*)))"

    def approve(self, arguments: dict[str, Any] | None = None) -> Approve:
        """The decision to let this call run (with edited ``arguments``, if given)."""
        return Approve(self.tool_call_id, arguments)

    def deny(self, reason: str | None = None) -> Deny:
        """The decision to refuse this call, telling the model ``reason``."""
        return Deny(self.tool_call_id, reason)


#: What an approver answers: True or an Approve runs the call, False or a Deny refuses
#: it, DEFER leaves it pending (the run ends awaiting approval).
Answer: TypeAlias = bool | Decision | Deferred

#: Called for calls that need approval; see :class:`Permissions`.
Approver: TypeAlias = Callable[[PermissionRequest], Answer | Awaitable[Answer]]


def _rules(action: Action, texts: Iterable[str | PermissionRule]) -> tuple[PermissionRule, ...]:
    if isinstance(texts, str):
        raise TypeError(f"{action} takes a list of rules, got the string {texts!r}")
    return tuple(
        text if isinstance(text, PermissionRule) else PermissionRule.parse(action, text)
        for text in texts
    )


def _allow_rules(texts: Iterable[str | PermissionRule]) -> tuple[PermissionRule, ...]:
    return _rules("allow", texts)


def _ask_rules(texts: Iterable[str | PermissionRule]) -> tuple[PermissionRule, ...]:
    return _rules("ask", texts)


def _deny_rules(texts: Iterable[str | PermissionRule]) -> tuple[PermissionRule, ...]:
    return _rules("deny", texts)


@attrs.frozen(kw_only=True)
class Permissions:
    """Rules deciding which tool calls run; see the module documentation.

    Give it to ``Agent(..., permissions=...)`` (or ``AgentLoopConfig``). It is
    checked in the loop's tool gate for every tool, after the arguments are
    validated and before ``before_tool_execution``. A refused call is not run:
    it gets a ``ToolExecutionStart``, a ``ToolExecutionEnd`` and the error
    result ``"Permission denied: <why>"``, which the model sees.

    Args:
        allow, ask, deny: Rule texts, ``"tool"`` or ``"tool(pattern)"``.
        default: What happens to a call no rule matches.
        sandboxed: What happens to a call no rule matches when its tool runs it
            in a sandbox (the tool's ``sandboxed`` attribute is True); None
            (the default): ``default`` decides for those too.
        approver: A plain or async function of a :class:`PermissionRequest`
            returning True (or ``request.approve(arguments)``, to run it with
            edited arguments) to allow, False (or ``request.deny(reason)``) to
            refuse, or :data:`~agentloop.DEFER` to decide later: the run then
            ends awaiting approval (``StopKind.AWAITING_APPROVAL``) and
            ``Agent.resume(decisions)`` goes on. ``approver=DEFER`` defers every
            call that needs approval. An approver that raises, or answers after
            ``approval_timeout`` seconds, refuses the call with a reason the
            model reads; the run goes on. Without an approver, calls that need
            approval are refused.
        approval_timeout: Seconds an approver may take (None: no limit).

    Raises:
        ValueError: a rule text is malformed, or ``default`` is unknown.
    """

    allow: tuple[PermissionRule, ...] = attrs.field(default=(), converter=_allow_rules)
    ask: tuple[PermissionRule, ...] = attrs.field(default=(), converter=_ask_rules)
    deny: tuple[PermissionRule, ...] = attrs.field(default=(), converter=_deny_rules)
    default: Action = attrs.field(default="allow")
    approver: Approver | Deferred | None = None
    sandboxed: Action | None = attrs.field(default=None)
    approval_timeout: float | None = attrs.field(
        default=None, validator=number_field(above=0, optional=True)
    )

    @default.validator
    def _check_default(self, attribute: attrs.Attribute[Any], value: str) -> None:
        if value not in ("allow", "ask", "deny"):
            raise ValueError(f"default must be 'allow', 'ask' or 'deny', got {value!r}")

    @sandboxed.validator
    def _check_sandboxed(self, attribute: attrs.Attribute[Any], value: str | None) -> None:
        if value not in (None, "allow", "ask", "deny"):
            raise ValueError(f"sandboxed must be None, 'allow', 'ask' or 'deny', got {value!r}")

    def decide(
        self, tool_name: str, subject: tuple[str, str] | None, *, sandboxed: bool = False
    ) -> tuple[Action, PermissionRule | None]:
        """The action for a call of ``tool_name`` on ``subject``, and the rule that chose it.

        ``sandboxed``: the call runs in a sandbox; when no rule matches, the
        ``sandboxed`` setting decides instead of ``default`` (if it is set).
        """
        parts = self._parts(subject)

        def first(rules: Iterable[PermissionRule]) -> PermissionRule | None:
            """deny and ask: the first rule matching the whole subject or any part."""
            for rule in rules:
                if not rule.matches_tool(tool_name):
                    continue
                if rule.argument is None:
                    return rule
                if subject is not None and (
                    rule.matches_subject(*subject)
                    or any(rule.matches_subject(*part) for part in parts)
                ):
                    return rule
            return None

        rule = first(self.deny)
        if rule is not None:
            return "deny", rule
        rule = first(self.ask)
        if rule is not None:
            return "ask", rule
        rule = self._allowed_by(tool_name, subject, parts)
        if rule is not None:
            return "allow", rule
        if sandboxed and self.sandboxed is not None:
            return self.sandboxed, None
        return self.default, None

    def _allowed_by(
        self, tool_name: str, subject: tuple[str, str] | None, parts: list[tuple[str, str]]
    ) -> PermissionRule | None:
        """The allow rule that covers the call, if every part of it is allowed."""
        rules = [rule for rule in self.allow if rule.matches_tool(tool_name)]
        for rule in rules:
            if rule.argument is None:
                return rule
        if subject is None:
            return None
        kind, value = subject
        if kind != "command":
            return next((rule for rule in rules if rule.matches_subject(kind, value)), None)
        if _COMPLEX.search(value):
            return None  # substitutions and redirections: never allowed by a rule
        for rule in rules:
            if _SPLIT.search(rule.argument or "") and rule.matches_subject(kind, value):
                return rule  # a pattern spanning operators compares the whole command
        # Otherwise every part must be allowed by some rule (so "git *" cannot cover
        # "git log && rm -rf x"); the first part's rule is reported.
        covering: list[PermissionRule] = []
        for part in parts:
            found = next((r for r in rules if r.matches_subject(*part)), None)
            if found is None:
                return None
            covering.append(found)
        return covering[0] if covering else None

    @staticmethod
    def _parts(subject: tuple[str, str] | None) -> list[tuple[str, str]]:
        if subject is None:
            return []
        kind, value = subject
        if kind != "command":
            return [subject]
        pieces = [piece for piece in _SPLIT.split(value.strip()) if piece]
        return [(kind, piece) for piece in pieces] or [subject]

    def assess(
        self, tool: Any, tool_name: str, tool_call_id: str, arguments: Mapping[str, Any]
    ) -> str | PermissionRequest | None:
        """What the rules say of a call, without asking anyone: None if it may run, the
        reason it may not (the text after "Permission denied: "), or the request to put
        to the approver (its ``reason`` says what asks)."""
        subject_of = tool_traits(tool).permission_subject
        subject: tuple[str, str] | None = None
        if subject_of is not None:
            subject = subject_of(dict(arguments))
        sandboxed = getattr(tool, "sandboxed", False) is True
        action, rule = self.decide(tool_name, subject, sandboxed=sandboxed)
        if action == "allow":
            return None
        if action == "deny":
            if rule is None:
                if sandboxed and self.sandboxed is not None:
                    return f"no rule allows {tool_name} calls here, sandboxed or not"
                return f"no rule allows {tool_name} calls here"
            return f"{_describe(tool_name, subject)} is refused by the rule deny({rule})"
        if rule is not None:
            why = f"the rule ask({rule})"
        elif sandboxed and self.sandboxed is not None:
            why = "the sandboxed setting"
        else:
            why = "the default"
        reason = f"{_describe(tool_name, subject)} needs approval ({why})"
        if self.approver is None:
            return f"{reason}, and no approver is set"
        return PermissionRequest(
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            arguments=dict(arguments),
            subject=subject,
            rule=rule,
            sandboxed=sandboxed,
            reason=reason,
        )

    async def check(
        self, tool: Any, tool_name: str, tool_call_id: str, arguments: Mapping[str, Any]
    ) -> str | None:
        """None if the call may run now, else why not (the text after "Permission denied: ").

        For a caller that cannot wait for a decision (MCP sampling): a call the
        approver defers, or edits, is refused. An approver's exception
        propagates.
        """
        found = self.assess(tool, tool_name, tool_call_id, arguments)
        if not isinstance(found, PermissionRequest):
            return found
        approver = self.approver
        if approver is None or isinstance(approver, Deferred):
            return f"{found.reason}, which cannot wait for a later decision here"
        answer = answer_of(found, await call_hook(approver, found))
        if isinstance(answer, Deny):
            return answer.reason
        if isinstance(answer, Approve) and answer.arguments is None:
            return None
        return f"{found.reason}, which cannot wait for a later decision here"
