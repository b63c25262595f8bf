"""Install-path rule on realistic pi prompts, and the acceptance cases of the original pi extension."""
from __future__ import annotations

import os
import time

import pytest

from harness.realistic import PI_SUFFIX, install_root, pi_system_prompt
from litellm_prefix.request.context import Context
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.disk import forget_path
from litellm_prefix.request.rules.paths import rewrite_text, stabilize_install_paths
from litellm_prefix.request.view import View
from litellm_prefix.settings import Settings


def _rewrite(text: str, ctx: Context) -> str:
    return rewrite_text(text, ctx, {})


def test_moved_install_root_gives_identical_heads(ctx):
    c = ctx(stable_path="/srv/pi-home")
    a = _rewrite(pi_system_prompt(root=install_root("a")), c)
    b = _rewrite(pi_system_prompt(root=install_root("b")), c)
    assert a == b
    assert install_root("a") not in a
    assert "/srv/pi-home/docs/extensions.md" in a
    assert "(/srv/pi-home/docs/extensions.md)" in a  # after "(" boundary
    assert "Examples: /srv/pi-home/examples (extensions" in a


@pytest.mark.parametrize(
    "text",
    [
        f"see {PI_SUFFIX}/docs for details",  # relative
        f"see ./{PI_SUFFIX}/docs",  # relative with ./
        f"see /{PI_SUFFIX}/docs",  # bare slash: nothing before the suffix
        f"see https://registry.example/{PI_SUFFIX}",  # URL
        f"see /home/u/lib/{PI_SUFFIX}-fork/docs",  # another package
        f"see x/home/u/lib/{PI_SUFFIX}/docs",  # not at a boundary
        "cd / && ls",
    ],
)
def test_relative_bare_and_foreign_mentions_are_left_alone(ctx, text):
    assert _rewrite(text, ctx(stable_path="/srv/pi-home")) == text


def test_exists_check_rewrites_only_the_root_the_stable_path_resolves_to(tmp_path, ctx):
    real, other = tmp_path / "lib" / PI_SUFFIX, tmp_path / "lib2" / PI_SUFFIX
    real.mkdir(parents=True)
    other.mkdir(parents=True)
    text = f"Docs: {real}/docs\nOther: {other}/docs\nOld: /nonexistent/lib/{PI_SUFFIX}/docs"
    nowhere = _rewrite(text, ctx(stable_path=str(tmp_path / "pi-home"), path_check="exists"))
    assert nowhere == text  # no link at the stable path: nothing it would name is there
    os.symlink(real, tmp_path / "pi-home")
    forget_path(str(tmp_path / "pi-home"))  # (a link the operator makes is seen within a second)
    out = _rewrite(text, ctx(stable_path=str(tmp_path / "pi-home"), path_check="exists"))
    assert out == f"Docs: {tmp_path}/pi-home/docs\nOther: {other}/docs\nOld: /nonexistent/lib/{PI_SUFFIX}/docs"


def test_absolute_mode_passes_roots_through(ctx):
    text = f'"/nonexistent/lib/{PI_SUFFIX}"'
    assert _rewrite(text, ctx(stable_path="/srv/pi-home", path_check="absolute")) == text


def test_trusted_mode_rewrites_without_disk(ctx):
    out = _rewrite(f'"/nonexistent/lib/{PI_SUFFIX}"', ctx(stable_path="/srv/pi-home", path_check="trusted"))
    assert out == '"/srv/pi-home"'


def test_configured_stable_path_and_suffix_normalise_a_docs_path(ctx):
    c = ctx(stable_path="/opt/stable/agent", package_path_suffix="node_modules/@acme/agent-cli")
    text = "Read /Users/bob/.volta/tools/image/node_modules/@acme/agent-cli/docs/usage.md first."
    assert _rewrite(text, c) == "Read /opt/stable/agent/docs/usage.md first."
    # the default suffix is no longer a candidate
    assert _rewrite(f"/home/u/lib/{PI_SUFFIX}/docs", c) == f"/home/u/lib/{PI_SUFFIX}/docs"


@pytest.mark.parametrize("tail", [".", ",", ";", ")", "]", "'", '"', "`", "\n", ""])
def test_trailing_punctuation_ends_the_root(ctx, tail):
    out = _rewrite(f"at /a/b/{PI_SUFFIX}{tail}", ctx(stable_path="/s"))
    assert out == f"at /s{tail}"


def test_paths_inside_tool_definitions_are_rewritten(ctx):
    tool = {"type": "function", "function": {"name": "pi_docs", "description": f"Reads {install_root('a')}/docs",
                                             "parameters": {"type": "object", "properties": {}}}}
    untouched = {"type": "function", "function": {"name": "read", "parameters": {}}}
    view = View(shape="chat", head=("system",), tools=(tool, untouched), body=())
    out, events = stabilize_install_paths(view, ctx(stable_path="/s"))
    assert out.tools[0]["function"]["description"] == "Reads /s/docs"
    assert out.tools[1] is untouched  # copy on write
    assert tool["function"]["description"].startswith("Reads /home")  # the client's object is not mutated
    assert events[0].kind == "install_path" and events[0].data["count"] == 1


def test_rewrite_is_idempotent_even_when_stable_path_ends_in_suffix(ctx):
    c = ctx(stable_path=f"/opt/{PI_SUFFIX}")
    once = _rewrite(pi_system_prompt(), c)
    assert _rewrite(once, c) == once


def _pi_request(root: str) -> dict:
    return {"model": "m", "messages": [{"role": "system", "content": pi_system_prompt(root=root)},
                                       {"role": "user", "content": "hi"}]}


def test_default_settings_write_nothing(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    root = tmp_path / "lib" / PI_SUFFIX
    root.mkdir(parents=True)
    before = sorted(p for p in tmp_path.rglob("*"))
    stabilizer = Stabilizer(Settings())  # defaults: pathCheck exists, no symlink, no log
    out = stabilizer.stabilize_sync(_pi_request(str(root)))
    # $HOME/.pi/pi-home is not there: the root is shown as sent (issue 24: pi's docs reads failed)
    assert f"{root}/docs" in out["messages"][0]["content"] and "pi-home" not in out["messages"][0]["content"]
    assert sorted(p for p in tmp_path.rglob("*")) == before


def test_symlink_opt_in_creates_the_link(tmp_path):
    root = tmp_path / "lib" / PI_SUFFIX
    root.mkdir(parents=True)
    stable = tmp_path / "home" / ".pi" / "pi-home"
    stabilizer = Stabilizer(Settings(stable_path=str(stable), create_symlink=True))
    out = stabilizer.stabilize_sync(_pi_request(str(root)))
    assert stable.is_symlink() and os.readlink(stable) == str(root)
    assert f"{stable}/docs" in out["messages"][0]["content"]  # made before the rule: rewritten at once


def test_symlink_never_replaces_a_good_link_with_a_bad_one(tmp_path):
    good = tmp_path / "good" / PI_SUFFIX
    good.mkdir(parents=True)
    stable = tmp_path / "pi-home"
    os.symlink(good, stable)
    stabilizer = Stabilizer(Settings(stable_path=str(stable), create_symlink=True, path_check="absolute"))
    stabilizer.stabilize_sync(_pi_request(f"/nonexistent/lib/{PI_SUFFIX}"))
    assert os.readlink(stable) == str(good)


def test_symlink_follows_a_removed_install_and_never_touches_a_real_directory(tmp_path):
    old, new = tmp_path / "v1" / PI_SUFFIX, tmp_path / "v2" / PI_SUFFIX
    old.mkdir(parents=True)
    new.mkdir(parents=True)
    stable = tmp_path / "pi-home"
    os.symlink(old, stable)
    # A link to an existing install is kept (another session may read through it) ...
    out = Stabilizer(Settings(stable_path=str(stable), create_symlink=True)).stabilize_sync(_pi_request(str(new)))
    assert os.readlink(stable) == str(old) and f"{new}/docs" in out["messages"][0]["content"]
    # ... and re-pointed once that install is gone (a dangling link names nothing).
    old.rmdir()
    forget_path(str(stable))
    out = Stabilizer(Settings(stable_path=str(stable), create_symlink=True)).stabilize_sync(_pi_request(str(new)))
    assert os.readlink(stable) == str(new) and f"{stable}/docs" in out["messages"][0]["content"]

    real_dir = tmp_path / "real-home"
    real_dir.mkdir()
    Stabilizer(Settings(stable_path=str(real_dir), create_symlink=True)).stabilize_sync(_pi_request(str(new)))
    assert real_dir.is_dir() and not real_dir.is_symlink()


def test_nested_roots_are_rewritten_each_as_itself(ctx):
    inner = f"/home/u/lib/{PI_SUFFIX}"
    outer = f"/x{inner}"
    out = _rewrite(f"a {inner}/docs and b {outer}/docs", ctx(stable_path="/s"))
    assert out == "a /s/docs and b /s/docs"


def test_path_exists_is_remembered_for_a_second_per_path(tmp_path, monkeypatch):
    """The shell's ``pathCheck: exists`` answer: one ``stat`` per path and second; a root that
    appears or goes is seen once the second has passed."""
    from litellm_prefix.caches import Recent
    from litellm_prefix.request import disk

    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(disk, "_EXISTS", Recent(disk.EXISTS_SECONDS, 4096))
    root = tmp_path / "lib" / "node_modules" / "@earendil-works" / "pi-coding-agent"
    assert disk.path_exists(str(root)) is False
    root.mkdir(parents=True)
    assert disk.path_exists(str(root)) is False  # within the second: remembered
    clock[0] += disk.EXISTS_SECONDS
    assert disk.path_exists(str(root)) is True
    root.rmdir()
    clock[0] += disk.EXISTS_SECONDS
    assert disk.path_exists(str(root)) is False
    assert Context(settings=Settings()).path_exists is disk.path_exists
