"""Install paths on a real disk (issue 24, items 1 and 3; DESIGN invariant 8): the model is never
shown a path that does not resolve, on the agent's machine, to the same files as the original.

pi's heads are built from its own source: @mariozechner/pi-coding-agent 0.73.1 and
@earendil-works/pi-coding-agent 1.6.0, ``dist/core/system-prompt.js`` (the docs block names
``getReadmePath()``, ``getDocsPath()``, ``getExamplesPath()``: absolute paths under the install
root, which the model is told to read). Each install below is a real directory with those files,
whose text names its own version, so a read through a rewritten path proves which install it hit.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.agent_requests import pi_headers
from harness.realistic import render_pi
from litellm_prefix.request import profiles
from litellm_prefix.request.context import Context
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.disk import _realpath, forget_path
from litellm_prefix.request.rules.paths import link_target, stabilize_install_paths
from litellm_prefix.request.symlink import ensure_symlink
from litellm_prefix.request.view import View
from litellm_prefix.settings import Settings, SettingsError, load_settings
from tests.support import examples

PI073 = "node_modules/@mariozechner/pi-coding-agent"
PI16 = "node_modules/@earendil-works/pi-coding-agent"
DOC_FILES = ("README.md", "docs/extensions.md", "docs/tui.md", "examples/extensions/hello.ts")


def install(prefix: Path, package: str, version: str) -> Path:
    """A real install root: the files pi's docs block points at, each naming its version."""
    root = prefix / "lib" / package
    for name in DOC_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"{package} {version}: {name}\n")
    return root


def pi073_head(root: Path, date: str = "2026-12-03", cwd: str = "/home/alice/src/webshop") -> str:
    """pi 0.73.1's system prompt (buildSystemPrompt, default tools), verbatim in its structure."""
    return f"""You are an expert coding assistant operating inside pi, a coding agent harness. You help users by reading files, executing commands, editing code, and writing new files.

Available tools:
- read: Read file contents
- bash: Execute bash commands (ls, grep, find, etc.)
- edit: Make surgical edits to files (find exact text and replace)
- write: Create or overwrite files

In addition to the tools above, you may have access to other custom tools depending on the project.

Guidelines:
- Use bash for file operations like ls, rg, find
- Be concise in your responses
- Show file paths clearly when working with files

Pi documentation (read only when the user asks about pi itself, its SDK, extensions, themes, skills, or TUI):
- Main documentation: {root}/README.md
- Additional docs: {root}/docs
- Examples: {root}/examples (extensions, custom tools, SDK)
- When asked about: extensions (docs/extensions.md, examples/extensions/), themes (docs/themes.md), skills (docs/skills.md), prompt templates (docs/prompt-templates.md), TUI components (docs/tui.md), keybindings (docs/keybindings.md), SDK integrations (docs/sdk.md), custom providers (docs/custom-provider.md), adding models (docs/models.md), pi packages (docs/packages.md)
- When working on pi topics, read the docs and examples, and follow .md cross-references before implementing
- Always read pi .md files completely and follow links to related docs (e.g., tui.md for TUI API details)
Current date: {date}
Current working directory: {cwd}"""  # noqa: E501  (pi's system prompt, verbatim: its lines as pi writes them)


def pi16_head(root: Path, cwd: str = "/home/alice/src/webshop") -> str:
    """pi 1.6.0's sectioned system prompt (buildSystemPromptSections, default tools)."""
    return render_pi({
        "preamble": "You are a coding assistant running inside pi, a coding agent harness. "
                    "Help users inspect files, run commands, and modify code.",
        "tools": "- read: Read file contents\n- bash: Execute bash commands (ls, grep, find, etc.)\n"
                 "- edit: Make precise file edits with exact text replacement\n- write: Create or overwrite files"
                 "\n\nAdditional tools may be available.",
        "rules": "- Use bash for file operations like ls, rg, find\n- Be concise in your responses\n"
                 "- Show file paths clearly when working with files",
        "docs": "Pi documentation (read only when the user asks about the harness itself, its SDK, extensions, "
                "themes, skills, or TUI):\n"
                f"- Main documentation: {root}/README.md\n- Additional docs: {root}/docs\n"
                f"- Examples: {root}/examples (extensions, custom tools, SDK)\n"
                "- When reading pi docs or examples, resolve docs/... under Additional docs and examples/... under "
                "Examples, not the current working directory",
        "cwd": cwd,
    })


def _stabilizer(settings: Settings) -> Stabilizer:
    """Only the install-path rule matters here: pi's own tool order is kept."""
    return Stabilizer(settings.model_copy(update={"tool_order": "keep"}))


def request(head: str, prompt: str = "How do I write a pi extension?") -> dict:
    return {"model": "m", "messages": [{"role": "system", "content": head}, {"role": "user", "content": prompt}],
            "proxy_server_request": {"headers": pi_headers()}}


def system_of(stabilizer: Stabilizer, head: str, prompt: str = "How do I write a pi extension?") -> str:
    return stabilizer.stabilize_sync(request(head, prompt))["messages"][0]["content"]


_PATH = re.compile(r"(?<![\w./<-])/[^\s()\"'`<>\[\]]+")


def shown_paths(text: str) -> list[str]:
    return [p.rstrip(".,;:") for p in _PATH.findall(text)]


def assert_every_read_opens_the_original(original: str, shown: str) -> None:
    """Each path the model is shown opens the file the agent's own path opens (line by line:
    the rewrite keeps the lines)."""
    assert len(original.splitlines()) == len(shown.splitlines())
    for before, after in zip(original.splitlines(), shown.splitlines()):
        for a, b in zip(shown_paths(before), shown_paths(after)):
            if a != b:
                assert os.path.realpath(b) == os.path.realpath(a), (a, b)
                assert os.path.exists(b) == os.path.exists(a)
                for name in DOC_FILES:  # the docs pi tells the model to read, through both paths
                    if a.endswith(("-agent", "-agent/")):
                        assert Path(b, name).read_text() == Path(a, name).read_text()


@pytest.mark.parametrize("package,head", [(PI16, pi16_head), (PI073, pi073_head)])
def test_default_settings_show_pi_its_own_install_path(tmp_path, home, package, head):
    """Issue 24 item 1: with the defaults, $HOME/.pi/pi-home of the gateway's user is nowhere: the
    path pi sent reaches the model, and its docs read works as without the plugin."""
    root = install(tmp_path / "nvm" / "v22", package, "A")
    text = head(root)
    shown = system_of(_stabilizer(Settings()), text)
    assert shown == text
    assert Path(shown_paths(shown)[0]).read_text() == f"{package} A: README.md\n"
    assert not (home / ".pi").exists()


@pytest.mark.parametrize("package,head", [(PI16, pi16_head), (PI073, pi073_head)])
def test_create_symlink_then_rewrite_and_every_read_opens_the_same_file(tmp_path, home, package, head):
    root = install(tmp_path / "nvm" / "v22", package, "A")
    text = head(root)
    shown = system_of(_stabilizer(Settings(create_symlink=True)), text)
    stable = home / ".pi" / "pi-home"
    assert os.readlink(stable) == str(root)
    assert str(root) not in shown and f"{stable}/docs" in shown and f"{stable}/README.md" in shown
    assert_every_read_opens_the_original(text, shown)
    assert (stable / "docs" / "extensions.md").read_text() == f"{package} A: docs/extensions.md\n"


def test_an_operators_link_is_used_and_never_written(tmp_path):
    root = install(tmp_path / "nvm" / "v22", PI16, "A")
    stable = tmp_path / "shared" / "pi-home"
    stable.parent.mkdir()
    os.symlink(root, stable)
    text = pi16_head(root)
    shown = system_of(_stabilizer(Settings(stable_path=str(stable))), text)
    assert f"{stable}/docs" in shown and str(root) not in shown
    assert_every_read_opens_the_original(text, shown)


def test_pi_073_package_name_is_normalized_through_the_profile(tmp_path):
    """Issue 24 item 3: the default suffix names only @earendil-works; the pi profile adds both."""
    root = install(tmp_path / "nvm" / "v22", PI073, "A")
    stable = tmp_path / "pi-home"
    os.symlink(root, stable)
    text = pi073_head(root)
    detected = system_of(_stabilizer(Settings(stable_path=str(stable))), text)
    assert f"{stable}/docs" in detected
    assert_every_read_opens_the_original(text, detected)
    # Undetected (profiles off): only packagePathSuffix, as before; a list form names both.
    assert system_of(_stabilizer(Settings(stable_path=str(stable), profiles="off")), text) == text
    both = Settings(stable_path=str(stable), profiles="off", package_path_suffix=[PI16, PI073])
    assert system_of(_stabilizer(both), text) == detected
    applied = profiles.apply(Settings(), profiles.PI)
    assert applied.package_path_suffixes == (PI16, PI073)
    assert profiles.apply(applied, profiles.PI).package_path_suffixes == (PI16, PI073)  # added once


def test_a_reinstall_at_another_path_keeps_the_head_once_the_link_follows(tmp_path, home):
    """pi resumed from a reinstall: the old install removed, the link (dangling) re-pointed at
    the new one, and the head the model sees is the same bytes, now naming the new files."""
    stable = home / ".pi" / "pi-home"
    st_ = _stabilizer(Settings(create_symlink=True))
    old = install(tmp_path / "nvm" / "v22", PI16, "A")
    first = system_of(st_, pi16_head(old))
    shutil.rmtree(tmp_path / "nvm" / "v22")
    forget_path(str(stable))  # (within the second the gateway remembers a path for)
    new = install(tmp_path / "nvm" / "v23", PI16, "B")
    second = system_of(st_, pi16_head(new))
    assert os.readlink(stable) == str(new)
    assert second == first
    assert_every_read_opens_the_original(pi16_head(new), second)
    assert (stable / "README.md").read_text() == f"{PI16} B: README.md\n"


def test_two_installs_at_once_only_the_linked_one_is_rewritten(tmp_path, home):
    """Two sessions on two installs (an nvm switch with the old one kept): createSymlink never
    moves a link that still resolves, so the other session's root passes through; when the
    operator re-points the link, the roles swap."""
    stable = home / ".pi" / "pi-home"
    st_ = _stabilizer(Settings(create_symlink=True))
    a = install(tmp_path / "nvm" / "v22", PI16, "A")
    b = install(tmp_path / "nvm" / "v23", PI16, "B")
    for _ in range(2):  # interleaved requests of both sessions
        shown_a = system_of(st_, pi16_head(a), "session a")
        shown_b = system_of(st_, pi16_head(b), "session b")
        assert os.readlink(stable) == str(a)
        assert f"{stable}/docs" in shown_a and shown_b == pi16_head(b)
    tmp = home / ".pi" / "next"
    os.symlink(b, tmp)
    os.replace(tmp, stable)  # the operator moves the link
    forget_path(str(stable))
    shown_a = system_of(st_, pi16_head(a), "session a")
    shown_b = system_of(st_, pi16_head(b), "session b")
    assert shown_a == pi16_head(a) and f"{stable}/docs" in shown_b
    assert_every_read_opens_the_original(pi16_head(b), shown_b)


def test_absolute_passes_through_and_trusted_rewrites(tmp_path):
    text = pi16_head(Path("/home/alice/.nvm/versions/node/v22.11.0/lib") / PI16)
    assert system_of(_stabilizer(Settings(path_check="absolute", stable_path="/srv/pi-home")), text) == text
    trusted = system_of(_stabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home")), text)
    assert "/srv/pi-home/docs" in trusted and "/home/alice/.nvm" not in trusted


def test_never_replaces_a_good_link_nor_touches_a_real_directory(tmp_path):
    a = install(tmp_path / "a", PI16, "A")
    b = install(tmp_path / "b", PI16, "B")
    stable = tmp_path / "pi-home"
    assert ensure_symlink(str(stable), str(tmp_path / "missing")) == "skipped: target does not exist"
    assert ensure_symlink(str(stable), str(a)) == "created"
    assert ensure_symlink(str(stable), str(a)) == "kept"
    assert ensure_symlink(str(stable), str(b)).startswith("skipped") and os.readlink(stable) == str(a)
    shutil.rmtree(tmp_path / "a")
    assert ensure_symlink(str(stable), str(b)) == "replaced" and os.readlink(stable) == str(b)
    real = tmp_path / "real"
    real.mkdir()
    assert ensure_symlink(str(real), str(b)).startswith("skipped") and not real.is_symlink()


def test_settings_validate_path_check_and_suffix_lists(tmp_path, monkeypatch):
    assert Settings(path_check="trusted").path_check == "trusted"
    assert Settings(package_path_suffix=[f"/{PI16}/", PI073, PI16]).package_path_suffixes == (PI16, PI073)
    assert Settings().package_path_suffixes == (PI16,)
    for value in ("sometimes", "TRUSTED"):
        monkeypatch.setenv("LITELLM_PREFIX_PATH_CHECK", value)
        with pytest.raises(SettingsError, match="pathCheck|path_check"):
            load_settings()
    monkeypatch.delenv("LITELLM_PREFIX_PATH_CHECK")
    assert Settings().for_model(("m",), {"litellm_prefix": {"pathCheck": "trusted"}}).path_check == "trusted"
    for bad in ([], [PI16, " / "], ""):
        config = tmp_path / "c.json"
        config.write_text(__import__("json").dumps({"packagePathSuffix": bad}))
        monkeypatch.setenv("LITELLM_PREFIX_CONFIG", str(config))
        with pytest.raises(SettingsError, match="packagePathSuffix"):
            load_settings()


# -- the rule's promise, for any head: what differs resolves to the same file ------------

_TAILS = ("", "/README.md", "/docs", "/docs/extensions.md", "/docs/tui.md", "/examples/extensions/hello.ts")
_FRAMES = ("Docs: {}", "read ({}) first", '"{}"', "see {}.", "`{}`", "{}/../README.md", "x{}", "./lib/{}")


@st.composite
def disk_states(draw):
    """Installs (some removed), a stable path (absent, a link to one, dangling, a real directory),
    and a head mentioning them in pi's ways."""
    n = draw(st.integers(1, 3))
    packages = [draw(st.sampled_from([PI16, PI073])) for _ in range(n)]
    removed = [draw(st.booleans()) for _ in range(n)]
    stable_kind = draw(st.sampled_from(["absent", "link", "dangling", "directory"]))
    linked = draw(st.integers(0, n - 1))
    lines = [draw(st.sampled_from(_FRAMES)).replace("{}", f"{{root{draw(st.integers(0, n - 1))}}}{draw(st.sampled_from(_TAILS))}")
             for _ in range(draw(st.integers(1, 8)))]
    return packages, removed, stable_kind, linked, lines, draw(st.booleans())


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(disk_states())
def test_property_every_rewritten_path_resolves_to_the_same_file(state):
    packages, removed, stable_kind, linked, lines, create = state
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        roots = [install(base / f"v{i}", package, str(i)) for i, package in enumerate(packages)]
        stable = base / "home" / "pi-home"
        stable.parent.mkdir()
        if stable_kind in ("link", "dangling"):
            os.symlink(roots[linked] if stable_kind == "link" else base / "gone", stable)
        elif stable_kind == "directory":
            stable.mkdir()
        for i, gone in enumerate(removed):
            if gone:
                shutil.rmtree(base / f"v{i}")
        text = "\n".join(line.format(**{f"root{i}": r for i, r in enumerate(roots)}) for line in lines)
        cfg = profiles.apply(Settings(stable_path=str(stable), create_symlink=create), profiles.PI)
        # Uncached facts: this example's disk, not the last second's.
        ctx = Context(settings=cfg, path_exists=os.path.exists, resolve_path=_realpath)
        view = View("chat", (text,), None, ({"role": "system", "content": text},))
        root = link_target(view, ctx)
        if root is not None:  # what the shell does before the rule runs
            assert os.path.isdir(root)
            ensure_symlink(str(stable), root)
        out, _ = stabilize_install_paths(view, ctx)
        for shown in (out.head[0], out.body[0]["content"]):
            assert_every_read_opens_the_original(text, shown)
            if shown != text:
                assert os.path.realpath(stable) in {os.path.realpath(r) for r in roots}
        again, _ = stabilize_install_paths(out, ctx)
        assert again.head == out.head  # idempotent


def test_a_link_that_cannot_be_made_leaves_the_paths_as_sent(tmp_path, caplog):
    root = install(tmp_path / "nvm" / "v22", PI16, "A")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    st_ = _stabilizer(Settings(stable_path=str(blocker / "pi-home"), create_symlink=True))
    text = pi16_head(root)
    assert system_of(st_, text) == text
    assert "symlink" in caplog.text and "failed" in caplog.text
    assert st_.stats["errors"] == 0  # an outcome, not an internal error
