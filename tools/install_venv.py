"""Install requirements into the virtualenv that runs this script: with pip, or uv when asked.

    .venv/bin/python tools/install_venv.py -e '.[servers]'
    .venv-litellm-1.110.2/bin/python tools/install_venv.py --no-deps -r requirements/litellm-1.110.2.txt

The second form is `make test`'s second LiteLLM release (Makefile, LITELLM_E2E): a pinned list
installed without the resolver, so it works where the release's own extras name packages the
index does not serve, and takes wheels from pip's cache.

The Makefile's installer. pip by default: it compares every configured index's files and
takes the best wheel for this machine. uv (``LITELLM_PREFIX_UV=1``; a prebuilt wheel from
PyPI, installed into the same virtualenv by pip) is about three times faster on a cold
cache, but it takes a version's files from the first index that lists that version: with a
local mirror configured before PyPI that holds only the pure-Python ``soundfile`` wheel
(no bundled libsndfile), it installed that one and LiteLLM's proxy failed to start. uv
follows pip's configuration here (``pip config list``: pip.conf files and PIP_* variables;
index, extra indexes, find-links, certificate, constraints); any failure of uv falls back
to pip with the same arguments.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

PIP = [sys.executable, "-m", "pip"]
QUIET = ["--quiet", "--disable-pip-version-check"]


def pip_config() -> dict[str, list[str]]:
    """pip's effective options (files and environment), later sources winning: key -> values."""
    out = subprocess.run([*PIP, "config", "list"], capture_output=True, text=True).stdout
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        name, _, value = line.partition("=")
        key = name.rsplit(".", 1)[-1]
        value = value.strip().strip("'\"")
        if key and value:
            found[key] = value.split()
    return found


def uv_options(config: dict[str, list[str]]) -> list[str]:
    options = ["--native-tls", "--index-strategy", "unsafe-best-match"]  # pip's choice among indexes
    for url in config.get("index-url", [])[:1]:
        options += ["--default-index", url]
    for url in config.get("extra-index-url", []):
        options += ["--index", url]
    for place in config.get("find-links", []):
        options += ["--find-links", place]
    for path in config.get("constraint", []):
        options += ["--constraints", path]
    return options


def run(cmd: list[str], env: dict[str, str] | None = None) -> bool:
    return subprocess.run(cmd, env=env).returncode == 0


def main(args: list[str]) -> int:
    if os.environ.get("LITELLM_PREFIX_UV") == "1":
        uv = Path(sys.executable).parent / "uv"
        if uv.is_file() or run([*PIP, "install", *QUIET, "uv"]):
            config = pip_config()
            env = dict(os.environ)
            for cert in config.get("cert", [])[:1]:
                env.setdefault("SSL_CERT_FILE", cert)
            cmd = [str(uv), "pip", "install", "--quiet", "--python", sys.executable, *uv_options(config), *args]
            if run(cmd, env):
                return compile_venv()
            print(f"uv could not install ({shlex.join(cmd)}); installing with pip instead", file=sys.stderr)
    # pip's own compile step (one file at a time) is skipped; the whole virtualenv is compiled
    # afterwards on every core (``compile_venv``).
    if not run([*PIP, "install", *QUIET, "--no-compile", *args]):
        return 1
    return compile_venv()


def compile_venv() -> int:
    """Write the .pyc of every installed module now, on every core: where PYTHONDONTWRITEBYTECODE is
    set (CI images often set it) Python never writes them, and each process that imports LiteLLM (a
    test session, every proxy a test starts) compiles it again: ``import litellm`` took 7.1 s
    without them and 4.6 s with them on a 2-core machine; compiling the virtualenv takes about 20 s."""
    import sysconfig

    # Best effort: a module written for a newer Python than this one (coredis ships a 3.12-only
    # file it never imports on 3.11) fails to compile, and that is no failure of the install.
    purelib = sysconfig.get_paths()["purelib"]
    run([sys.executable, "-m", "compileall", "-qq", "-j", "0", purelib])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
