"""The token store: one JSON file per server, only the user can read."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..._text import loads

__all__ = ["TokenFile"]

log = logging.getLogger("agentloop.mcp")
_STORE_VERSION = 1

# ------------------------------------------------------------------ the token file


class TokenFile:
    """One server's record in the token store: a JSON file only the user can read.

    The directory is made mode 0700 and each file 0600, whatever the umask; a
    write goes to a temporary file that replaces the old one, so a reader never
    sees half of it.
    """

    def __init__(self, directory: Path, key: str) -> None:
        self.directory = directory
        self.key = key
        host = re.sub(r"[^A-Za-z0-9.-]+", "_", urlsplit(key).netloc or "server")[:60]
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
        self.path = directory / f"{host}-{digest}.json"

    def read(self) -> dict[str, Any] | None:
        try:
            data = loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            log.warning("cannot read the OAuth token file %s: %s", self.path, type(error).__name__)
            return None
        if not isinstance(data, dict) or data.get("key") != self.key:
            return None
        record = data.get("record")
        return record if isinstance(record, dict) else None

    def write(self, record: Mapping[str, Any]) -> None:
        self._make_directory()
        text = json.dumps({"version": _STORE_VERSION, "key": self.key, "record": record}, indent=1)
        temporary = self.directory / f".{self.path.name}.{secrets.token_hex(6)}.tmp"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                os.fchmod(file.fileno(), 0o600)
                file.write(text)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def _make_directory(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if (self.directory.stat().st_mode & 0o777) != 0o700:
            os.chmod(self.directory, 0o700)
