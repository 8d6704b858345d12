"""Reading an OpenAPI document: JSON or YAML, the version check, and ``$ref`` resolution."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import yaml

from .._errors import AgentloopError
from .._text import checked_text

__all__ = [
    "OpenApiError",
    "Resolver",
    "check_version",
    "expect_list",
    "expect_object",
    "expect_string",
    "parse_document",
    "pointer",
    "shown",
    "url_base",
]


class OpenApiError(AgentloopError, ValueError):
    """The document is not an OpenAPI 3.0 or 3.1 description agentloop can use."""


_VERSION = re.compile(r"^3\.(0|1)\.\d+$")


def pointer(base: str, *parts: object) -> str:
    """The JSON pointer ``base`` extended by ``parts`` (``~`` and ``/`` escaped).

    >>> pointer("/paths", "/pets/{id}", "get")
    '/paths/~1pets~1{id}/get'
    """
    escaped = (str(part).replace("~", "~0").replace("/", "~1") for part in parts)
    return "/".join((base, *escaped)) if parts else base


def shown(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def expect_object(value: object, where: str, source: str) -> dict[str, Any]:
    """``value`` if it is an object; else OpenApiError naming ``where`` (a JSON pointer)."""
    if not isinstance(value, dict):
        raise OpenApiError(f"{source}: {where}: expected an object, got {shown(value)}")
    return value


def expect_list(value: object, where: str, source: str) -> list[Any]:
    """``value`` if it is an array; else OpenApiError naming ``where``."""
    if not isinstance(value, list):
        raise OpenApiError(f"{source}: {where}: expected an array, got {shown(value)}")
    return value


def expect_string(value: object, where: str, source: str) -> str:
    """``value`` if it is a string; else OpenApiError naming ``where``."""
    if not isinstance(value, str):
        raise OpenApiError(f"{source}: {where}: expected a string, got {shown(value)}")
    return value


def parse_document(text: str | bytes, source: str) -> dict[str, Any]:
    """The JSON or YAML document in ``text``; ``source`` names it in errors.

    Raises:
        OpenApiError: it is neither, or not an object.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise OpenApiError(f"{source}: not UTF-8 text: {error}") from error
    stripped = text.lstrip()
    try:
        if stripped[:1] in ("{", "["):
            document = json.loads(checked_text(text))
        else:
            document = yaml.load(text, Loader=_Loader)
    except ValueError as error:  # not JSON, or nested deeper than agentloop reads
        raise OpenApiError(f"{source}: not valid JSON: {error}") from error
    except yaml.YAMLError as error:
        raise OpenApiError(f"{source}: not valid YAML: {_one_line(str(error))}") from error
    except RecursionError:  # YAML's composer recurses per level: no cheap check first
        raise OpenApiError(f"{source}: the document nests too deeply") from None
    if not isinstance(document, dict):
        kind = type(document).__name__ if document is not None else "empty"
        raise OpenApiError(f"{source}: an OpenAPI document is an object, not {kind}")
    return document


class _Loader(yaml.SafeLoader):
    """The safe loader, with timestamps and dates left as strings (as JSON has them)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def check_version(document: Mapping[str, Any], source: str) -> str:
    """The document's ``openapi`` version, which must be 3.0.x or 3.1.x.

    Raises:
        OpenApiError: Swagger 2.0, another version, or no version at all.
    """
    if "swagger" in document:
        raise OpenApiError(
            f"{source}: Swagger {document['swagger']} is not supported; convert it to "
            "OpenAPI 3 first (for example with swagger2openapi)"
        )
    version = document.get("openapi")
    if version is None:
        raise OpenApiError(f"{source}: not an OpenAPI document (no 'openapi' version field)")
    if not isinstance(version, str) or not _VERSION.match(version):
        raise OpenApiError(
            f"{source}: OpenAPI {version} is not supported (only 3.0.x and 3.1.x are)"
        )
    return version


class Resolver:
    """Follows ``$ref``: JSON pointers in the document, and relative files next to it.

    A location is ``(base, node)``: ``base`` is the URI of the document the node
    came from (a file path, a URL, or ``""`` for a document given as data); refs
    inside the node are relative to it. Documents are read once and kept.
    """

    def __init__(self, document: dict[str, Any], base: str = "") -> None:
        self.root_base = base
        self._documents: dict[str, dict[str, Any]] = {base: document}

    def document(self, base: str) -> dict[str, Any]:
        """The document at ``base``, read on first use."""
        if base not in self._documents:
            if not base or "://" in base:
                raise OpenApiError(f"cannot follow a $ref to {base!r}: only local files are read")
            try:
                text = Path(base).read_bytes()
            except OSError as error:
                raise OpenApiError(f"cannot read {base} for a $ref: {error}") from error
            self._documents[base] = parse_document(text, base)
        return self._documents[base]

    def target(self, ref: str, base: str) -> tuple[str, Any]:
        """Where ``ref`` (seen in the document at ``base``) points: ``(its base, the node)``.

        Raises:
            OpenApiError: the file cannot be read, or the pointer leads nowhere.
        """
        if not isinstance(ref, str):
            raise OpenApiError(f"a $ref must be a string, got {ref!r}")
        location, _, pointer = ref.partition("#")
        target_base = self._join(base, location) if location else base
        node: Any = self.document(target_base)
        if pointer:
            if not pointer.startswith("/"):
                raise OpenApiError(f"$ref {ref!r}: the fragment must be a JSON pointer")
            for raw in pointer[1:].split("/"):
                key = unquote(raw).replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and key in node:
                    node = node[key]
                elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                    node = node[int(key)]
                else:
                    raise OpenApiError(f"$ref {ref!r} points to nothing (no {key!r})")
        return target_base, node

    def deref(self, node: Any, base: str, *, limit: int = 64) -> tuple[str, Any]:
        """``node`` with any chain of ``$ref`` followed (for parameters, bodies, responses)."""
        base, node, _ = self.locate(node, base, "", limit=limit)
        return base, node

    def locate(self, node: Any, base: str, where: str, *, limit: int = 64) -> tuple[str, Any, str]:
        """As :meth:`deref`, with the JSON pointer of the node reached.

        ``where`` is the pointer of ``node``; after a ``$ref`` it is the ref's
        own (``#/components/parameters/Limit``, or ``file.yaml#/...`` in
        another file).
        """
        seen: set[tuple[str, str]] = set()
        while isinstance(node, dict) and "$ref" in node:
            key = (base, str(node["$ref"]))
            if key in seen or len(seen) >= limit:
                raise OpenApiError(f"$ref {node['$ref']!r} refers to itself")
            seen.add(key)
            ref = node["$ref"]
            base, node = self.target(ref, base)
            location, _, fragment = ref.partition("#")
            where = f"{location}#{fragment}" if location else f"#{fragment}"
        return base, node, where

    @staticmethod
    def _join(base: str, location: str) -> str:
        if "://" in location or "://" in base:
            return urljoin(base, location)
        if os.path.isabs(location) or not base:
            return os.path.normpath(location)
        return os.path.normpath(os.path.join(os.path.dirname(base), location))


def url_base(url: str) -> str:
    """``url`` without its fragment (the base for refs in a document fetched from it)."""
    return urlsplit(url)._replace(fragment="").geturl()
