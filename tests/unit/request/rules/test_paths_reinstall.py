"""pi resumed from a reinstall at another path (issue 24, scenario c; DESIGN invariant 8).

The session's first install root A stays shown when the resumed head names root B, only where A
still exists and both hold a ``package.json`` with the same npm name and version: every path the
model is shown then opens a byte-identical file. Each install below is a real directory whose
files hold only the package's name and version (two copies of one version are byte-identical,
as two ``npm i`` of it are; another version differs), with the ``package.json`` fields of pi
0.73.1 (``@mariozechner/pi-coding-agent``) and pi 1.6.0 (``@earendil-works/pi-coding-agent``).
The heads are pi's own (``test_paths_disk``: built from each version's ``system-prompt.js``).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.agent_requests import pi_headers
from litellm_prefix.fleet.store import MemoryStore
from litellm_prefix.request import profiles
from litellm_prefix.request.context import Context
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.disk import _read_package, _realpath, forget_path, package_identity
from litellm_prefix.request.journal import Journal
from litellm_prefix.request.rules.paths import keep_install_root, stabilize_install_paths
from litellm_prefix.request.view import View
from litellm_prefix.settings import Settings
from tests.support import examples
from tests.unit.request.rules.test_paths_disk import pi073_head, pi16_head, shown_paths

PI073 = ("@mariozechner/pi-coding-agent", "0.73.1")
PI16 = ("@earendil-works/pi-coding-agent", "1.6.0")
FILES = ("README.md", "docs/extensions.md", "docs/tui.md", "examples/extensions/hello.ts")
HEADS = {PI073[0]: pi073_head, PI16[0]: pi16_head}


def install(prefix: Path, package: tuple[str, str]) -> Path:
    """``npm i <name>@<version>`` under ``prefix``: the same bytes for the same name and version."""
    name, version = package
    root = prefix / "lib" / "node_modules" / name
    root.mkdir(parents=True)
    (root / "package.json").write_text(json.dumps({"name": name, "version": version, "type": "module",
                                                   "bin": {"pi": "dist/cli.js"}}, indent="\t") + "\n")
    for file in FILES:
        (root / file).parent.mkdir(parents=True, exist_ok=True)
        (root / file).write_text(f"{name}@{version}: {file}\n")
    return root


def same_bytes(shown: str, sent: str) -> bool:
    """What ``shown`` names holds the bytes ``sent`` names (a file's bytes; a directory's names and
    files, all the way down; nothing at either)."""
    a, b = Path(shown), Path(sent)
    if not b.exists():
        return not a.exists()
    if b.is_file():
        return a.is_file() and a.read_bytes() == b.read_bytes()
    names = sorted(p.name for p in b.iterdir())
    return a.is_dir() and sorted(p.name for p in a.iterdir()) == names and all(
        same_bytes(str(a / n), str(b / n)) for n in names)


def assert_every_shown_path_opens_the_same_bytes(sent: str, shown: str) -> None:
    assert len(sent.splitlines()) == len(shown.splitlines())
    for before, after in zip(sent.splitlines(), shown.splitlines()):
        for a, b in zip(shown_paths(before), shown_paths(after)):
            if a != b:
                assert same_bytes(b, a), (a, b)


# -- a pi session through the gateway, resumed from another install ----------------------

CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_5f0c2e9a41d7", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pwd"}'}}]}
RESULT = {"role": "tool", "tool_call_id": "call_5f0c2e9a41d7", "content": "/home/alice/src/webshop\n"}
ANSWER = {"role": "assistant", "content": "checked"}
DOCS = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_9b1e77c03a52", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}


def turns(head_a: str, head_b: str) -> list[list[dict]]:
    """pi's requests: prompt 1 from install A (a shell call, then the answer), then ``pi -c`` from
    install B (its docs read, then the answer), the transcript replayed under B's head."""
    one = [{"role": "user", "content": "Check where you run."}]
    two = [*one, CALL, RESULT, ANSWER, {"role": "user", "content": "Read your documentation again."}]
    return [[{"role": "system", "content": head_a}, *one],
            [{"role": "system", "content": head_a}, *one, CALL, RESULT],
            [{"role": "system", "content": head_b}, *two],
            [{"role": "system", "content": head_b}, *two, DOCS, {"role": "tool", "tool_call_id": "call_9b1e77c03a52",
                                                                 "content": "pi docs"}]]


def send(stabilizer: Stabilizer, messages: list[dict]) -> list[dict]:
    data = {"model": "m", "messages": json.loads(json.dumps(messages)),
            "proxy_server_request": {"headers": pi_headers()}}
    return stabilizer.stabilize_sync(data)["messages"]


def _stabilizer(store: MemoryStore | None = None, **kwargs) -> Stabilizer:
    """Only the install-path rule matters here: pi's own tool order is kept."""
    return Stabilizer(Settings(tool_order="keep", **kwargs), store=store)


def journal_roots(stabilizer: Stabilizer) -> list[tuple[tuple[str, str], ...]]:
    return [Journal.decoded(raw).roots for _, raw, _ in stabilizer.store.snapshot()[0].values()]


@pytest.mark.parametrize("package", [PI16, PI073], ids=["pi-1.6", "pi-0.73"])
def test_resumed_from_a_copy_keeps_the_first_root_and_every_shown_path_opens_the_same_bytes(tmp_path, home, package):
    a = install(tmp_path / "npm-a", package)
    b = install(tmp_path / "npm-b", package)  # the reinstall: the same version at another prefix
    head = HEADS[package[0]]
    st_ = _stabilizer()
    out = [send(st_, msgs) for msgs in turns(head(a), head(b))]
    assert [o[0]["content"] for o in out] == [head(a)] * 4  # one head upstream, as the client sent it first
    for sent, shown in zip(turns(head(a), head(b))[2:], out[2:]):
        assert shown[1:] == sent[1:]  # the conversation as sent
        assert_every_shown_path_opens_the_same_bytes(sent[0]["content"], shown[0]["content"])
    docs = next(p for p in shown_paths(out[3][0]["content"]) if p.endswith(".md"))
    assert docs == f"{a}/README.md" and Path(docs).read_bytes() == (b / "README.md").read_bytes()
    assert out[2] == out[3][:len(out[2])]  # the resume is a prefix of its next request: cached
    assert (f"node_modules/{package[0]}", str(a)) in journal_roots(st_)[-1]


def test_another_version_at_the_new_root_passes_through_and_becomes_the_sessions_root(tmp_path, home):
    a = install(tmp_path / "npm-a", PI16)
    b = install(tmp_path / "npm-b", (PI16[0], "1.6.1"))  # an upgrade: other files behind the same names
    c = install(tmp_path / "npm-c", (PI16[0], "1.6.1"))  # ... then a copy of that one
    st_ = _stabilizer()
    out = [send(st_, msgs) for msgs in turns(pi16_head(a), pi16_head(b))]
    assert out[2][0]["content"] == out[3][0]["content"] == pi16_head(b)
    assert Path(f"{b}/README.md").read_text() != Path(f"{a}/README.md").read_text()
    later = [*turns(pi16_head(a), pi16_head(c))[3], {"role": "assistant", "content": "read"},
             {"role": "user", "content": "Again."}]
    assert send(st_, later)[0]["content"] == pi16_head(b)  # B is now the session's root: C (same version) shows it
    assert journal_roots(st_)[-1] == ((f"node_modules/{PI16[0]}", str(b)),)


def test_the_old_root_removed_passes_through(tmp_path, home):
    a = install(tmp_path / "npm-a", PI16)
    b = install(tmp_path / "npm-b", PI16)
    st_ = _stabilizer()
    msgs = turns(pi16_head(a), pi16_head(b))
    assert send(st_, msgs[0])[0]["content"] == send(st_, msgs[1])[0]["content"] == pi16_head(a)
    shutil.rmtree(tmp_path / "npm-a")
    forget_path(str(a))  # (within the second the gateway remembers a path for)
    assert send(st_, msgs[2])[0]["content"] == pi16_head(b)
    assert send(st_, msgs[3])[0]["content"] == pi16_head(b)
    assert journal_roots(st_)[-1] == ((f"node_modules/{PI16[0]}", str(b)),)


def test_a_replica_with_only_the_journal_decides_the_same(tmp_path, home):
    a = install(tmp_path / "npm-a", PI16)
    b = install(tmp_path / "npm-b", PI16)
    msgs = turns(pi16_head(a), pi16_head(b))
    one = _stabilizer()
    alone = [send(one, m) for m in msgs]
    store = MemoryStore(100, 3600)
    first = _stabilizer(store=store)
    for m in msgs[:2]:
        send(first, m)
    replica = MemoryStore(100, 3600)  # another process: the journals serialised and read back, nothing else
    journals, texts = store.snapshot()
    replica.restore({key: (1, Journal.decoded(raw).encoded(), refs) for key, (_, raw, refs) in journals.items()}, texts)
    other = _stabilizer(store=replica)
    assert [send(other, m) for m in msgs[2:]] == alone[2:]
    assert alone[2][0]["content"] == pi16_head(a)


def test_a_link_at_stable_path_wins_and_the_copy_is_shown_through_it(tmp_path, home):
    """The operator's link points at A: A is shown as stablePath, and so is B (A's copy)."""
    a = install(tmp_path / "npm-a", PI16)
    b = install(tmp_path / "npm-b", PI16)
    stable = tmp_path / "pi-home"
    os.symlink(a, stable)
    st_ = _stabilizer(stable_path=str(stable))
    out = [send(st_, m) for m in turns(pi16_head(a), pi16_head(b))]
    assert [o[0]["content"] for o in out] == [pi16_head(stable)] * 4
    assert_every_shown_path_opens_the_same_bytes(pi16_head(b), out[3][0]["content"])


def test_absolute_pins_nothing_and_trusted_shows_stable_path(tmp_path, home):
    a = install(tmp_path / "npm-a", PI16)
    b = install(tmp_path / "npm-b", PI16)
    msgs = turns(pi16_head(a), pi16_head(b))
    remote = _stabilizer(path_check="absolute")
    assert [send(remote, m)[0]["content"] for m in msgs] == [pi16_head(a)] * 2 + [pi16_head(b)] * 2
    assert journal_roots(remote) and not any(journal_roots(remote))
    trusted = _stabilizer(path_check="trusted", stable_path="/srv/pi-home")
    assert [send(trusted, m)[0]["content"] for m in msgs] == [pi16_head(Path("/srv/pi-home"))] * 4


def test_a_mid_conversation_system_message_shows_the_first_root_too(tmp_path, home):
    """A section patch (pi >= 0.86) naming the new root: head text, rewritten as the head is."""
    a = install(tmp_path / "npm-a", PI16)
    b = install(tmp_path / "npm-b", PI16)
    st_ = _stabilizer()
    msgs = turns(pi16_head(a), pi16_head(b))
    for m in msgs[:2]:
        send(st_, m)
    patch = {"role": "system", "content": 'Updated system prompt section "docs":\n\n<docs>\n'
                                          f"- Main documentation: {b}/README.md\n</docs>"}
    out = send(st_, [*msgs[2], patch])
    assert out[-1]["content"] == patch["content"].replace(str(b), str(a))


def test_old_journals_load_and_roots_round_trip():
    old = '{"n":3,"pinned":[["preamble","abc"]],"v":1}'  # written before roots were recorded
    assert Journal.decoded(old).roots == () and Journal.decoded(old).requests == 3
    journal = Journal(requests=1, roots=(("node_modules/@earendil-works/pi-coding-agent", "/opt/a/lib/x"),))
    assert Journal.decoded(journal.encoded()) == journal
    assert '"roots"' not in Journal(requests=1).encoded()  # nothing recorded: the journal as before


def test_package_identity_reads_name_and_version_only(tmp_path):
    root = install(tmp_path / "p", PI16)
    assert _read_package(str(root)) == PI16
    assert package_identity(str(root)) == PI16
    for text in ("{", "[]", '{"name": "x"}', '{"name": "", "version": "1"}', '{"name": "x", "version": 1}'):
        (root / "package.json").write_text(text)
        assert _read_package(str(root)) is None, text
    assert _read_package(str(tmp_path / "missing")) is None


# -- the promise, for any disk and session: a rewritten path opens the same bytes --------

_TAILS = ("", "/README.md", "/docs", "/docs/extensions.md", "/examples/extensions/hello.ts", "/missing.md")
_FRAMES = ("Docs: {}", "read ({}) first", '"{}"', "see {}.", "`{}`", "x{}")
_PACKAGES = (PI16, (PI16[0], "1.6.1"), PI073)


@st.composite
def sessions(draw):
    """Installs (some of one package and version, some removed), the session's recorded root, a
    stable path (absent, or a link to one install), and a head naming installs in pi's ways."""
    n = draw(st.integers(1, 4))
    packages = [draw(st.sampled_from(_PACKAGES)) for _ in range(n)]
    removed = [draw(st.booleans()) for _ in range(n)]
    first = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    link = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    lines = [draw(st.sampled_from(_FRAMES)).replace("{}", f"{{root{draw(st.integers(0, n - 1))}}}{draw(st.sampled_from(_TAILS))}")
             for _ in range(draw(st.integers(1, 6)))]
    return packages, removed, first, link, lines


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_property_every_rewritten_path_opens_the_bytes_the_client_named(case):
    packages, removed, first, link, lines = case
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        roots = [install(base / f"v{i}", package) for i, package in enumerate(packages)]
        stable = base / "pi-home"
        if link is not None:
            os.symlink(roots[link], stable)
        for i, gone in enumerate(removed):
            if gone:
                shutil.rmtree(base / f"v{i}")
        text = "\n".join(line.format(**{f"root{i}": r for i, r in enumerate(roots)}) for line in lines)
        cfg = profiles.apply(Settings(stable_path=str(stable), tool_order="keep"), profiles.PI)
        # Uncached facts: this example's disk, not the last second's.
        ctx = Context(settings=cfg, path_exists=os.path.exists, resolve_path=_realpath, package_identity=_read_package)
        journal = Journal() if first is None else Journal(roots=(
            (f"node_modules/{packages[first][0]}", str(roots[first])),))
        view = View("chat", (text,), None, ({"role": "system", "content": text},))
        out, after, _ = keep_install_root(view, journal, ctx)
        for shown in (out.head[0], out.body[0]["content"]):
            assert_every_shown_path_opens_the_same_bytes(text, shown)
        again, after_again, _ = keep_install_root(out, after, ctx)
        assert again.head == out.head and after_again.roots == after.roots  # idempotent
        assert keep_install_root(view, journal, ctx)[:2] == (out, after)  # deterministic
        retried, _ = stabilize_install_paths(out, ctx)  # a retry of the rewritten request, no session
        assert retried.head == out.head
