"""Settings: source chain, trusted projects, errors naming file and key, the check command."""
from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from litellm_prefix.offline.cli import main
from litellm_prefix.settings import Settings, SettingsError, load_settings, load_with_provenance


@pytest.fixture
def files(tmp_path, monkeypatch):
    global_path = tmp_path / "global.json"
    project = tmp_path / "project"
    (project / ".litellm-prefix").mkdir(parents=True)
    monkeypatch.setenv("LITELLM_PREFIX_CONFIG", str(global_path))
    monkeypatch.setenv("LITELLM_PREFIX_PROJECT_DIR", str(project))

    def write(global_settings=None, project_settings=None):
        if global_settings is not None:
            global_path.write_text(json.dumps(global_settings))
        if project_settings is not None:
            (project / ".litellm-prefix" / "litellm-prefix.json").write_text(json.dumps(project_settings))
        return global_path, project

    return write


def test_defaults_match_the_design_table():
    s = load_settings()
    assert s.enabled and s.log is None and s.stable_path == "$HOME/.pi/pi-home"
    assert s.package_path_suffix == "node_modules/@earendil-works/pi-coding-agent"
    assert (s.create_symlink, s.path_check, s.memory_snapshot, s.store) == (False, "exists", "stable", "memory")


def test_precedence_default_global_project_environment(files, monkeypatch):
    _, project = files({"pathCheck": "absolute", "stablePath": "/g", "toolOrder": "keep",
                        "trustedProjects": []}, {"stablePath": "/p", "toolOrder": "sort"})
    monkeypatch.setenv("LITELLM_PREFIX_TRUSTED_PROJECTS", str(project))
    monkeypatch.setenv("LITELLM_PREFIX_TOOL_ORDER", "keep")
    resolved = load_with_provenance()
    s = resolved.settings
    assert (s.path_check, s.stable_path, s.tool_order) == ("absolute", "/p", "keep")
    assert resolved.origin["path_check"].startswith("global file")
    assert resolved.origin["stable_path"].startswith("project file")
    assert resolved.origin["tool_order"] == "environment LITELLM_PREFIX_TOOL_ORDER"
    assert resolved.origin["create_symlink"] == "default"


def test_untrusted_project_file_is_ignored_with_a_note(files, caplog):
    files({"pathCheck": "absolute"}, {"stablePath": "/p"})
    resolved = load_with_provenance()
    assert resolved.settings.stable_path == "$HOME/.pi/pi-home"
    assert resolved.notes and "untrusted" in resolved.notes[0] and "trustedProjects" in resolved.notes[0]


def test_project_trusted_by_the_global_file(files):
    _, project = files({}, {"stablePath": "/p"})
    files({"trustedProjects": [str(project)]})
    assert load_settings().stable_path == "/p"


def test_project_file_cannot_trust_itself(files):
    _, project = files({}, {"trustedProjects": ["/elsewhere"]})
    files({"trustedProjects": [str(project)]})
    with pytest.raises(SettingsError, match="trustedProjects"):
        load_settings()


@pytest.mark.parametrize(
    "content, message",
    [
        ({"pathCheck": "sometimes"}, "key 'pathCheck'"),
        ({"stablepath": "/x"}, "unknown key 'stablepath'"),
        ({"maxSessions": 0}, "key 'maxSessions'"),
        ({"store": "postgres://x"}, "key 'store'"),
        ({"stablePath": "relative/dir"}, "key 'stablePath'"),
        ({"models": {"gemini/*": {"toolOrdr": "keep"}}}, "models.gemini/*.toolOrdr"),
    ],
)
def test_bad_values_name_the_file_and_the_key(files, content, message):
    global_path, _ = files(content)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(global_path) in str(info.value) and message in str(info.value)


def test_invalid_json_names_the_file(files):
    global_path, _ = files({})
    global_path.write_text("{not json")
    with pytest.raises(SettingsError, match="not valid JSON"):
        load_settings()


def test_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("LITELLM_PREFIX_PATH_CHECK", "maybe")
    with pytest.raises(SettingsError, match="LITELLM_PREFIX_PATH_CHECK"):
        load_settings()


@pytest.mark.parametrize("raw, expected", [("0", False), ("false", False), ("1", True), ("true", True)])
def test_off_switch(monkeypatch, raw, expected):
    monkeypatch.setenv("LITELLM_PREFIX", raw)
    assert load_settings().enabled is expected


def test_model_overrides_by_glob_then_model_info():
    s = Settings(models={"gemini/*": {"supportsMidConversationSystem": False, "toolOrder": "keep"}})
    assert s.for_model(("gemini/gemini-2.5-pro",)).tool_order == "keep"
    assert s.for_model(("openai/gpt-4o",)).tool_order == "auto"
    assert s.for_model(("gemini/x",), {"litellm_prefix": {"toolOrder": "sort"}}).tool_order == "sort"
    with pytest.raises(ValidationError):
        s.for_model(("x",), {"litellm_prefix": {"bogus": 1}})


def test_model_settings_are_one_object_per_model_and_override():
    s = Settings(models={"gemini/*": {"toolOrder": "keep"}})
    keep = s.for_model(("gemini/x", "gemini/x"))
    assert keep is s.for_model(("gemini/x", "gemini/x")) and keep.tool_order == "keep"
    assert s.for_model(("openai/gpt-4o",)) is s  # nothing matches: the settings themselves
    # The deployment's override, by value (LiteLLM hands a fresh model_info dict per call).
    absolute = s.for_model(("m",), {"litellm_prefix": {"pathCheck": "absolute"}})
    assert absolute is s.for_model(("m",), {"litellm_prefix": {"pathCheck": "absolute"}})
    assert absolute.path_check == "absolute"
    assert s.for_model(("m",), {"litellm_prefix": {"pathCheck": "exists"}}).path_check == "exists"
    assert s.for_model(("m",), {"litellm_prefix": {"enabled": False}}).enabled is False
    assert s.for_model(("m",), {"litellm_prefix": {"enabled": True}}).enabled is True
    # Other settings objects have their own results; an unhashable or invalid override is
    # judged every time (an invalid one raises every time, it is never remembered).
    other = Settings(models={"gemini/*": {"toolOrder": "sort"}})
    assert other.for_model(("gemini/x", "gemini/x")).tool_order == "sort"
    for _ in range(2):
        with pytest.raises(ValidationError):
            s.for_model(("m",), {"litellm_prefix": {"toolOrder": ["keep"]}})
        with pytest.raises(ValidationError):
            s.for_model(("m",), {"litellm_prefix": {"bogus": 1}})


def test_check_prints_values_and_origins(files, monkeypatch, capsys):
    files({"pathCheck": "absolute"})
    monkeypatch.setenv("LITELLM_PREFIX_STORE", "redis://127.0.0.1:6379/0")
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "pathCheck" in out and "global file" in out and "environment LITELLM_PREFIX_STORE" in out
    assert main(["check", "--json"]) == 0
    parsed = json.loads(capsys.readouterr().out)
    assert parsed["pathCheck"] == {"value": "absolute", "from": f"global file {files()[0]}"}


def test_check_reports_invalid_settings_with_exit_2(files, capsys):
    files({"pathCheck": 3})
    assert main(["check"]) == 2
    assert "pathCheck" in capsys.readouterr().err


def test_stable_path_expansion_follows_the_environment(monkeypatch):
    monkeypatch.setenv("PI_ROOT_TEST", "/srv/one")
    settings = Settings(stable_path="$PI_ROOT_TEST/pi-home")
    assert settings.resolved_stable_path == "/srv/one/pi-home"
    monkeypatch.setenv("PI_ROOT_TEST", "/srv/two")
    assert settings.resolved_stable_path == "/srv/two/pi-home"
    monkeypatch.setenv("HOME", "/home/zed")
    assert Settings(stable_path="~/.pi/pi-home").resolved_stable_path == "/home/zed/.pi/pi-home"
    assert Settings(stable_path="${PI_ROOT_TEST}/x/../y").resolved_stable_path == "/srv/two/y"


def test_provenance_is_per_thread(monkeypatch):
    """Two threads resolving settings at once each get the origins of their own settings."""
    import threading

    from litellm_prefix.settings import load_with_provenance

    monkeypatch.setenv("LITELLM_PREFIX_TOOL_ORDER", "keep")
    barrier = threading.Barrier(2)
    found: dict[str, str] = {}

    def resolve(name: str, overrides: dict) -> None:
        barrier.wait()
        for _ in range(20):
            found[name] = load_with_provenance(**overrides).origin["tool_order"]

    threads = [threading.Thread(target=resolve, args=("argument", {"tool_order": "sort"})),
               threading.Thread(target=resolve, args=("environment", {}))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert found == {"argument": "argument", "environment": "environment LITELLM_PREFIX_TOOL_ORDER"}
