"""What the hook asks of the local disk: whether a path exists, where it resolves, which npm package
an install root holds. Each answer is remembered for a second per path (``Recent``), so a busy
gateway stats a session's install roots once a second, not once per request; the shell forgets a
path at once where it just made or moved a link there (``forget_path``). The rules never call these
themselves: they read them through ``Context`` (``context.py``), so tests need no disk."""
from __future__ import annotations

import json
import os

from ..caches import Recent

EXISTS_SECONDS = 1.0
_EXISTS = Recent(EXISTS_SECONDS, 4096)


def path_exists(path: str) -> bool:
    """``os.path.exists``, remembered for a second per path (the shell's answer for ``pathCheck:
    exists``): a session names the same install roots on every request, and a ``stat`` on a
    busy gateway costs more than the rules of a short request. An install root that appears
    or goes is seen within a second."""
    return _EXISTS.get(path, lambda: os.path.exists(path))


_RESOLVED = Recent(EXISTS_SECONDS, 4096)


def resolved_path(path: str) -> str | None:
    """The canonical path (every symlink resolved) of what is at ``path``, ``None`` when nothing
    is (a dangling link included); remembered for a second per path, like ``path_exists``. The
    install-path rule rewrites a root only where ``stablePath`` resolves to the same place."""
    return _RESOLVED.get(path, lambda: _realpath(path))


def _realpath(path: str) -> str | None:
    try:
        return os.path.realpath(path, strict=True)
    except (OSError, ValueError):
        return None


def forget_path(path: str) -> None:
    """Forget what was remembered about ``path`` (the shell just made or moved a link there)."""
    _EXISTS.forget(path)
    _RESOLVED.forget(path)
    _PACKAGES.forget(path)


_PACKAGES = Recent(EXISTS_SECONDS, 1024)
PACKAGE_JSON_BYTES = 1 << 20  # a larger package.json is not read (no identity: nothing pinned)


def package_identity(root: str) -> tuple[str, str] | None:
    """``(name, version)`` from ``<root>/package.json``, ``None`` where it is missing, unreadable
    or names no version; remembered for a second per root, like ``path_exists``. npm never
    publishes one name and version twice, so two roots with the same identity hold the same
    files: the install-path rule keeps a session's first root only on that ground."""
    return _PACKAGES.get(root, lambda: _read_package(root))


def _read_package(root: str) -> tuple[str, str] | None:
    try:
        with open(os.path.join(root, "package.json"), "rb") as file:
            raw = json.loads(file.read(PACKAGE_JSON_BYTES + 1))
    except (OSError, ValueError):  # (a UnicodeDecodeError is a ValueError)
        return None
    if not isinstance(raw, dict):
        return None
    name, version = raw.get("name"), raw.get("version")
    return (name, version) if isinstance(name, str) and name and isinstance(version, str) and version else None
