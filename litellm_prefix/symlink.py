"""``createSymlink``: point ``stablePath`` at the discovered install root (I/O at the edge).

Never replaces a good link with a bad one: the new target must exist; a real file or
directory at ``stablePath`` is never touched; a link is swapped atomically
(``os.replace`` of a temporary link). Every outcome is returned, never raised.
"""
from __future__ import annotations

import os


def ensure_symlink(stable: str, root: str) -> str:
    """Make ``stable`` a symlink to ``root``; return what happened (``created``, ``kept``, ``replaced``, ``skipped: ...``)."""
    try:
        if not os.path.isdir(root):
            return "skipped: target does not exist"
        if os.path.islink(stable):
            current = os.readlink(stable)
            if os.path.realpath(current) == os.path.realpath(root):
                return "kept"
            tmp = f"{stable}.litellm-prefix-{os.getpid()}"
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(root, tmp)
            os.replace(tmp, stable)
            return "replaced"
        if os.path.lexists(stable):
            return "skipped: stable path exists and is not a symlink"
        os.makedirs(os.path.dirname(stable) or ".", exist_ok=True)
        os.symlink(root, stable)
        return "created"
    except OSError as exc:
        return f"failed: {exc.strerror or exc.__class__.__name__}"
