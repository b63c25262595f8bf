"""aider (``aider-chat`` from PyPI) run headless through a LiteLLM proxy to the scripted model.

aider is a Python CLI that pins its own LiteLLM and some forty other packages, so it gets a
virtualenv of its own, ``<agents cache>/aider-<version>/`` (the cache of
``harness.real_agents.install``), made with this interpreter; a ``.installed`` stamp marks it
complete, a lock file serialises concurrent installers. It talks to the proxy through the
OpenAI SDK (``OPENAI_API_BASE``), one ``--message`` per run; ``--restore-chat-history`` goes on
with the workspace's session (``.aider.chat.history.md``), as its user would.

The sessions (``SESSIONS``), each in its own git workspace: a goes on over three prompts, the third
on the next calendar day (``TZ`` moved by 24 hours, as the real-agent harness does); b starts
with another prompt in another workspace; c with a's first prompt in a third. Each in three
variants (``VARIANTS``): the edit formats ``diff`` (SEARCH/REPLACE blocks; its system prompt carries
the platform lines with ``- Current date:``) and ``whole`` (no date), and ``diff`` with gpt-4o's
model settings (``diff-sys``).

    .venv/bin/python -m harness.aider record tests/fixtures/agents_aider/aider.json   # the test fixtures
"""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.real_agents.install import cache_dir

VERSION = "0.86.2"
PACKAGE = "aider-chat"
# (session, prompt number, prompt, next day): the workspace of each session is its own
SESSIONS = (("a", 1, "Explain app.py briefly", False), ("a", 2, "Now add a sub function", False),
            ("b", 1, "Rename add to plus", False), ("c", 1, "Explain app.py briefly", False),
            ("b", 2, "Add a docstring to plus", False), ("a", 3, "Add a test for sub", True),
            ("c", 2, "Now add a sub function", False))
# Each variant: (edit format, model settings aider reads from ``~/.aider.model.settings.yml``). The
# scripted model's name is unknown to aider, so it gets aider's defaults (examples as messages, the
# reminder appended to the prompt); ``diff-sys`` gives it gpt-4o's (aider/resources/model-settings.yml):
# the examples inside the system prompt and the reminder as a system message after the prompt.
VARIANTS = {"diff": ("diff", None), "whole": ("whole", None),
            "diff-sys": ("diff", "reminder: sys\n  examples_as_sys_msg: true\n  lazy: true\n")}
FORMATS = tuple(VARIANTS)
DAY = ("Etc/GMT+12", "Etc/GMT-12")  # the same instant, one calendar day apart


def prefix() -> Path:
    return cache_dir() / f"aider-{VERSION}"


def install() -> Path:
    """The ``aider`` executable of the pinned version, installed where missing."""
    root = prefix()
    exe, stamp = root / "bin" / "aider", root / ".installed"
    if stamp.is_file() and stamp.read_text().strip() == f"{PACKAGE}=={VERSION}" and exe.is_file():
        return exe
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".aider-{VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and exe.is_file():
            return exe
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        f"{PACKAGE}=={VERSION}"], check=True, env=env)
        stamp.write_text(f"{PACKAGE}=={VERSION}\n")
    return exe


def make_workspace(path: Path, name: str) -> Path:
    path.mkdir(parents=True)
    (path / "app.py").write_text(f"def add(a, b):\n    return a + b  # {name}\n")
    for args in (("init", "-q"), ("add", "-A"), ("-c", "user.name=u", "-c", "user.email=u@example.com",
                                                   "commit", "-qm", "init")):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    return path


def run(exe: Path, workspace: Path, home: Path, base_url: str, key: str, model: str, edit_format: str, text: str,
        resume: bool, tz: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "TZ": tz, "LANG": "C.UTF-8", "TERM": "dumb",
           "NO_COLOR": "1", "OPENAI_API_BASE": base_url, "OPENAI_API_KEY": key}
    # The scripted model answers a request without tools with its own words (``say *``), new each time.
    argv = [str(exe), "--model", f"openai/{model}", "--edit-format", edit_format, "--yes-always", "--no-pretty",
            "--no-show-model-warnings", "--no-auto-commits", "--analytics-disable", "--no-check-update",
            "--no-gitignore", "--message", f"{text} @script: say *", *(["--restore-chat-history"] if resume else []), "app.py"]
    done = subprocess.run(argv, cwd=workspace, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"aider exited with {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")
    return done


def sessions(base_url: str, key: str, model: str, work: Path,
             records: Callable[[], list[dict]]) -> list[tuple[str, str, int, list[dict]]]:
    """Every session of ``SESSIONS`` in every variant, in order: (variant, session, prompt, the
    requests that run sent) per run. ``records``: the scripted model's records so far (it records a
    request before it answers, so a run's are all there when aider exits)."""
    exe = install()
    done = []
    for variant, (edit_format, settings) in VARIANTS.items():
        spaces: dict[str, Path] = {}
        for name, number, text, next_day in SESSIONS:
            if name not in spaces:
                spaces[name] = make_workspace(work / variant / name, name)
            home = work / variant / f"home-{name}"
            home.mkdir(exist_ok=True)
            if settings:
                (home / ".aider.model.settings.yml").write_text(f"- name: openai/{model}\n  {settings}")
            before = len(records())
            run(exe, spaces[name], home, base_url, key, model, edit_format, text, number > 1, DAY[int(next_day)])
            done.append((variant, name, number, records()[before:]))
    return done


def record(out: Path) -> None:
    """The requests aider sent in every session (through a proxy with the plugin off: as sent), with
    its client headers (one run straight to the scripted model), into ``out``."""
    from harness.procs import Proxy
    from harness.real_agents.harness import GROUP_OFF, ScriptedModel, scripted_proxy_config

    work = Path(tempfile.mkdtemp(prefix="aider-record-"))
    model = ScriptedModel(work)
    proxy = Proxy(work, scripted_proxy_config(model.url), {})
    try:
        proxy.wait_ready()
        runs = sessions(f"{proxy.url}/v1", proxy.key, GROUP_OFF, work, model.records)
        requests = {f"{variant}/{name}{number}" + (f".{i}" if i else ""): rec["body"]
                    for variant, name, number, sent in runs for i, rec in enumerate(sent)}
        space = make_workspace(work / "direct", "direct")
        run(install(), space, work / "direct", f"{model.url}/v1", "none", "scripted", "whole", "hello", False, "UTC")
        headers = {k: v for k, v in model.records()[-1]["headers"].items() if k.lower() not in ("host", "content-length")}
    finally:
        proxy.stop()
        model.stop()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"source": f"{PACKAGE} {VERSION} through a LiteLLM proxy (hosted_vllm deployment) with "
                                         "the plugin off (harness/aider.py); headers: one run straight to the model",
                               "headers": headers, "requests": requests}, indent=1) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        record(Path(sys.argv[2]))
    else:
        sys.exit(__doc__)
