"""OpenAPI schemas (3.0 and 3.1) as JSON Schema a validator and a model API accept."""

from __future__ import annotations

import json
from typing import Any

from ._spec import Resolver

__all__ = ["SchemaConverter"]

# OpenAPI-only keywords, which JSON Schema validators and model APIs do not need.
_DROPPED = frozenset(
    {"discriminator", "xml", "externalDocs", "example", "nullable", "readOnly", "writeOnly"}
)
# Keywords whose value is one schema, a list of schemas, or a map of name to schema.
_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else")
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
_MAX_DEPTH = 40
_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _unique_strings(value: Any) -> bool:
    return (
        isinstance(value, list)
        and all(isinstance(v, str) for v in value)
        and len(set(value)) == len(value)
    )


def _type(value: Any) -> bool:
    if isinstance(value, str):
        return value in _TYPES
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(v, str) and v in _TYPES for v in value)
        and len(set(value)) == len(value)
    )


def _unique_json(value: Any) -> bool:
    try:
        keys = [json.dumps(v, sort_keys=True) for v in value]
    except (TypeError, ValueError):
        return False
    return len(set(keys)) == len(keys)


# What the Draft 2020-12 meta-schema asks of each keyword's value (schema-valued
# keywords are converted, not checked here). A keyword whose value breaks its rule
# is dropped: a document with a typo still gives a valid, if looser, schema.
_RULES: dict[str, Any] = {
    "type": _type,
    "enum": lambda v: isinstance(v, list),
    "multipleOf": lambda v: _number(v) and v > 0,
    **{k: _number for k in ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum")},
    **{
        k: _count
        for k in (
            "maxLength",
            "minLength",
            "maxItems",
            "minItems",
            "maxContains",
            "minContains",
            "maxProperties",
            "minProperties",
        )
    },
    "pattern": lambda v: isinstance(v, str),
    "uniqueItems": lambda v: isinstance(v, bool),
    "required": _unique_strings,
    "dependentRequired": lambda v: isinstance(v, dict) and all(map(_unique_strings, v.values())),
    **{
        k: lambda v: isinstance(v, str)
        for k in (
            "title",
            "description",
            "format",
            "contentEncoding",
            "contentMediaType",
            "$comment",
        )
    },
    **{k: lambda v: isinstance(v, bool) for k in ("deprecated", "readOnly", "writeOnly")},
    "examples": lambda v: isinstance(v, list),
}


class SchemaConverter:
    """Converts schemas of one document, following ``$ref`` with a guard against cycles.

    The result has no ``$ref``: references are inlined; a reference met again
    inside its own expansion (a recursive schema) becomes an open schema
    ``{"description": "(recursive: Name)"}``, so any value is accepted there.
    Conversions are cached by reference, so a large API with shared schemas is
    converted once; the cached dicts are shared between tools and must not be
    changed.
    """

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self._cache: dict[tuple[str, str, bool], dict[str, Any]] = {}

    def convert(self, schema: Any, base: str, *, request: bool) -> dict[str, Any]:
        """JSON Schema for ``schema`` (from the document at ``base``).

        ``request``: the schema describes what is sent, so ``readOnly``
        properties are left out (and ``writeOnly`` ones kept); otherwise the
        opposite.
        """
        return self._convert(schema, base, request, (), 0)

    def _convert(
        self,
        schema: Any,
        base: str,
        request: bool,
        stack: tuple[tuple[str, str], ...],
        depth: int,
    ) -> dict[str, Any]:
        if schema is True or schema is None:
            return {}
        if schema is False:
            return {"not": {}}
        if not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return {}
        if "$ref" in schema:
            return self._reference(schema, base, request, stack, depth)
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _DROPPED or key.startswith("x-") or key in ("$schema", "$id", "$anchor"):
                continue
            if key == "items" and isinstance(value, list):  # 3.0 tuple form (invalid, but seen)
                if not value:  # prefixItems must not be empty; no items is no constraint
                    continue
                out["prefixItems"] = [
                    self._convert(v, base, request, stack, depth + 1) for v in value
                ]
            elif key in _ONE:
                out[key] = (
                    value
                    if isinstance(value, bool)
                    else self._convert(value, base, request, stack, depth + 1)
                )
            elif key in _MANY:
                if isinstance(value, list) and value:  # an empty list is no schema at all
                    out[key] = [self._convert(v, base, request, stack, depth + 1) for v in value]
            elif key in _MAP:
                if isinstance(value, dict):
                    out[key] = {
                        name: self._convert(v, base, request, stack, depth + 1)
                        for name, v in value.items()
                        if not (key == "properties" and _hidden(v, self.resolver, base, request))
                    }
            elif key in ("dependencies", "dependentSchemas"):
                continue  # rare, and their shapes vary between drafts: left out
            elif key in _RULES:
                if _RULES[key](value):
                    out[key] = value
            elif key not in ("$ref", "$dynamicRef", "$recursiveRef", "$vocabulary", "$defs"):
                out[key] = value
        _exclusive_bounds(schema, out)
        if "enum" in out and not _unique_json(out["enum"]):
            del out["enum"]
        if isinstance(out.get("required"), list) and isinstance(schema.get("properties"), dict):
            left_out = set(schema["properties"]) - set(out.get("properties", ()))
            out["required"] = [name for name in out["required"] if name not in left_out]
            if not out["required"]:
                del out["required"]
        if schema.get("nullable") is True:
            _allow_null(out)
        if out.get("type") == "file":  # Swagger-era upload type that some 3.0 specs keep
            out["type"] = "string"
        return out

    def _reference(
        self,
        schema: dict[str, Any],
        base: str,
        request: bool,
        stack: tuple[tuple[str, str], ...],
        depth: int,
    ) -> dict[str, Any]:
        ref = schema["$ref"]
        target_base, target = self.resolver.target(ref, base)
        key = (target_base, ref.partition("#")[2])
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        if key in stack:
            name = key[1].rsplit("/", 1)[-1] or ref
            return {"description": f"(recursive: {name})"}
        cache_key = (key[0], key[1], request)
        converted = self._cache.get(cache_key)
        if converted is None:
            converted = self._convert(target, target_base, request, (*stack, key), depth + 1)
            if not _mentions_recursion(converted):
                self._cache[cache_key] = converted
        if not siblings:
            return converted
        # 3.1 allows keywords beside $ref (a description, say); they refine the target.
        extra = self._convert(siblings, base, request, stack, depth + 1)
        return {**converted, **extra}


def _mentions_recursion(schema: Any) -> bool:
    """Whether a converted schema cut a cycle (then it depends on where it was met)."""
    if isinstance(schema, dict):
        description = schema.get("description")
        if isinstance(description, str) and description.startswith("(recursive: "):
            return True
        return any(_mentions_recursion(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_mentions_recursion(v) for v in schema)
    return False


def _hidden(schema: Any, resolver: Resolver, base: str, request: bool) -> bool:
    """Whether a property is left out: readOnly in a request, writeOnly in a response."""
    if not isinstance(schema, dict):
        return False
    if "$ref" in schema:
        try:
            _, schema = resolver.deref(schema, base)
        except ValueError:
            return False
        if not isinstance(schema, dict):
            return False
    return bool(schema.get("readOnly" if request else "writeOnly"))


def _allow_null(out: dict[str, Any]) -> None:
    """3.0 ``nullable: true`` as JSON Schema: ``null`` joins the type (and the enum)."""
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        out["type"] = [*kind, "null"]
    elif kind is None and not any(k in out for k in ("allOf", "anyOf", "oneOf")):
        return  # no type: null is already allowed
    elif kind is None:
        out.update({"anyOf": [{k: out.pop(k) for k in list(out)}, {"type": "null"}]})
        return
    if isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]


def _exclusive_bounds(schema: dict[str, Any], out: dict[str, Any]) -> None:
    """3.0's boolean ``exclusiveMinimum``/``exclusiveMaximum`` as 3.1's numbers."""
    for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        value = schema.get(flag)
        if value is True and bound in schema:
            out[flag] = schema[bound]
            out.pop(bound, None)
        elif isinstance(value, bool):
            out.pop(flag, None)
