"""An MCP server's question to the user (elicitation), asked on the terminal line by line.

A form is asked one field at a time: its title, what it is, its choices and its
default; an empty line keeps the default (or leaves an optional field out). The
answers are turned into the field's JSON type here; the connection then fills
the defaults and checks the whole answer against the server's schema, and asks
again with the problems if it does not fit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

__all__ = ["ask_form", "form_fields"]

#: Asks one line; None when there is no more input.
Ask = Callable[[str], Awaitable[str | None]]

_TRUE = frozenset({"y", "yes", "true", "1"})
_FALSE = frozenset({"n", "no", "false", "0"})


@attrs.frozen
class FormField:
    """One property of a form: what to show and how to read the answer."""

    name: str
    kind: str  # "string", "integer", "number", "boolean", "array"
    title: str
    description: str = ""
    required: bool = False
    default: Any = None
    has_default: bool = False
    choices: tuple[str, ...] = ()  # the values an answer may take (enums)
    labels: tuple[str, ...] = ()  # what each choice is called, if titled

    def prompt(self) -> str:
        """The question line: ``  Name (required) [Ada]: ``."""
        parts = [f"  {self.title}"]
        if self.kind == "boolean":
            parts.append("(y/n)")
        elif self.kind == "array":
            parts.append("(several, separated by commas)")
        if self.required:
            parts.append("(required)")
        if self.has_default:
            parts.append(f"[{_show(self.default)}]")
        return " ".join(parts) + ": "

    def choice_lines(self) -> list[str]:
        """The choices, numbered, for the user to pick by number or by value."""
        return [
            f"    {i}. {label}" + (f" ({value})" if label != value else "")
            for i, (value, label) in enumerate(zip(self.choices, self.labels, strict=True), 1)
        ]


def _show(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    if isinstance(value, bool):
        return "y" if value else "n"
    return str(value)


def _choices(spec: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """An enum's values and labels: ``enum`` (+ ``enumNames``), or ``oneOf``/``anyOf`` consts."""
    if isinstance(spec.get("enum"), list):
        values = tuple(str(v) for v in spec["enum"])
        names = spec.get("enumNames")
        labels = tuple(str(n) for n in names) if isinstance(names, list) else values
        return values, labels if len(labels) == len(values) else values
    for key in ("oneOf", "anyOf"):
        options = spec.get(key)
        if isinstance(options, list) and all(
            isinstance(o, Mapping) and "const" in o for o in options
        ):
            values = tuple(str(o["const"]) for o in options)
            return values, tuple(str(o.get("title", o["const"])) for o in options)
    return (), ()


def form_fields(schema: Mapping[str, Any] | None) -> list[FormField]:
    """The fields of a form schema, in its order."""
    properties = (schema or {}).get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = set((schema or {}).get("required") or ())
    fields = []
    for name, spec in properties.items():
        if not isinstance(spec, Mapping):
            continue
        kind = str(spec.get("type", "string"))
        choices, labels = _choices(spec)
        if kind == "array" and isinstance(spec.get("items"), Mapping):
            choices, labels = _choices(spec["items"])
        fields.append(
            FormField(
                name=str(name),
                kind=kind,
                title=str(spec.get("title") or name),
                description=str(spec.get("description") or ""),
                required=name in required,
                default=spec.get("default"),
                has_default="default" in spec,
                choices=choices,
                labels=labels,
            )
        )
    return fields


def _pick(field: FormField, text: str) -> str | None:
    """A choice by its number, its value or its label; None if none matches."""
    if text.isdigit() and 1 <= int(text) <= len(field.choices):
        return field.choices[int(text) - 1]
    for value, label in zip(field.choices, field.labels, strict=True):
        if text in (value, label):
            return value
    return None


def parse_value(field: FormField, text: str) -> tuple[Any, str | None]:
    """``text`` as the field's JSON value: ``(value, None)``, or ``(None, why not)``."""
    text = text.strip()
    if field.kind == "boolean":
        if text.lower() in _TRUE:
            return True, None
        if text.lower() in _FALSE:
            return False, None
        return None, "answer y or n"
    if field.kind in ("integer", "number"):
        try:
            number = float(text) if field.kind == "number" else int(text)
        except ValueError:
            return None, f"not {'an integer' if field.kind == 'integer' else 'a number'}"
        return number, None
    if field.kind == "array":
        items = [item.strip() for item in text.split(",") if item.strip()]
        if not field.choices:
            return items, None
        picked = [_pick(field, item) for item in items]
        if None in picked:
            return None, "pick from the choices (numbers or values)"
        return picked, None
    if field.choices:
        picked_one = _pick(field, text)
        if picked_one is None:
            return None, "pick one of the choices (a number or a value)"
        return picked_one, None
    return text, None


async def ask_form(
    fields: list[FormField], ask: Ask, say: Callable[[str], None]
) -> dict[str, Any] | None:
    """Ask each field in turn; the answers by name (empty lines left out), or None on EOF."""
    content: dict[str, Any] = {}
    for field in fields:
        if field.description:
            say(f"  {field.title}: {field.description}")
        for line in field.choice_lines():
            say(line)
        while True:
            answer = await ask(field.prompt())
            if answer is None:
                return None
            if not answer.strip():
                if field.required and not field.has_default:
                    say("    an answer is required")
                    continue
                break  # the default, or left out
            value, problem = parse_value(field, answer)
            if problem is None:
                content[field.name] = value
                break
            say(f"    {problem}")
    return content
