"""``createSymlink``: point ``stablePath`` at the discovered install root (I/O at the edge).

The shell makes the link *before* the install-path rule runs (``rules/paths.link_target``
names the root); the rule then rewrites only the roots ``stablePath`` resolves to, so a
link that could not be made leaves the paths as the agent sent them.

Never replaces a good link with a bad one, nor with another good one: the new target must
exist, and a link whose target still exists is kept (another session may be reading
through it: moving it would make the paths that session was shown name other files). A
link is created where nothing is, and replaced only where it dangles (its install was
removed), atomically (``os.replace`` of a temporary link). A real file or directory at
``stablePath`` is never touched. Every outcome is returned, never raised.
"""
from __future__ import annotations

import os


def ensure_symlink(stable: str, root: str) -> str:
    """Make ``stable`` a symlink to ``root``; return what happened (``created``, ``kept``,
    ``replaced`` (a dangling link), ``skipped: ...``, ``failed: ...``)."""
    try:
        if not os.path.isdir(root):
            return "skipped: target does not exist"
        if os.path.islink(stable):
            if os.path.realpath(stable) == os.path.realpath(root):
                return "kept"
            if os.path.exists(stable):
                return "skipped: stable path links to another existing directory"
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
