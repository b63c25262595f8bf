"""Tool order (issue 24 item 7): the agent's own order stays where it is stable; a moving
order is pinned to the session's first-seen one (journaled); sorting is the ``sort`` setting's.

Sorting an order the agent already keeps stable costs prefix sharing between streams:
Codex's subagent shared 544 instead of 864 prefix tokens with its main agent once its own
order was re-sorted."""
from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings, strategies as st

from harness.agent_requests import codex_headers, responses_tools
from harness.realistic import TOOL_NAMES, anthropic_tools, openai_tools, pi_system_prompt, shuffled
from litellm_prefix.fleet.store import MemoryStore
from litellm_prefix.offline import replay
from litellm_prefix.request import profiles
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.rules.tools import pinned_order
from litellm_prefix.request.target import Target
from litellm_prefix.request.view import tool_name
from litellm_prefix.settings import Settings
from tests.support import examples

# Codex's own order (codex-rs/core/src/tools/spec.rs build_specs: built-ins in registration
# order, the multi-agent tools after them, MCP tools sorted by name at the end).
CODEX_BUILTINS = ["exec_command", "write_stdin", "update_plan", "apply_patch", "view_image", "web_search",
                  "list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource"]
CODEX_AGENT_TOOLS = ["spawn_agent", "send_input", "wait", "close_agent"]
CODEX_MCP = ["mcp__github__get_pr", "mcp__github__list_prs"]
CODEX_PROMPT = ("You are Codex, a coding agent based on GPT-5. You and the user share the same workspace and "
                "collaborate to achieve the user's goals.\n\n" + "\n".join(
                    f"- Guideline {i}: prefer small, reviewable changes and run the tests you touch." for i in range(40)))


def _names(tools) -> list[str]:
    return [tool_name(t) for t in tools]


def _codex_request(tools: list[str], prompt: str, thread: str, subagent: str | None = None) -> dict:
    headers = {**codex_headers(), "session-id": "0199a213-81c0-7800-8aa1-bbab2a035a53", "thread-id": thread}
    if subagent:
        headers["x-openai-subagent"] = subagent
    return {"model": "gpt-5-codex", "instructions": CODEX_PROMPT, "tools": responses_tools(tools),
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}],
            "proxy_server_request": {"headers": headers, "body": {}}}


def _rendered(out: dict) -> list[int]:
    request = {k: out[k] for k in ("model", "instructions", "tools", "input") if k in out}
    return replay.tokens(replay.render(replay.Turn("s", "responses", request)))


def _codex_shared_prefix(settings: Settings | None) -> tuple[int, list[dict]]:
    main = _codex_request(CODEX_BUILTINS + CODEX_AGENT_TOOLS + CODEX_MCP, "Fix the flaky checkout test.", "t-main")
    # The spawned explorer: no multi-agent tools of its own.
    sub = _codex_request(CODEX_BUILTINS + CODEX_MCP, "Find where the checkout total is computed.", "t-sub",
                         subagent="collab_spawn")
    if settings is None:
        outs = [main, sub]
    else:
        stabilizer = Stabilizer(settings)
        outs = [stabilizer.stabilize_sync(copy.deepcopy(r), "aresponses", target=Target(provider="openai"))
                for r in (main, sub)]
    return replay.common_prefix(_rendered(outs[0]), _rendered(outs[1])), outs


def test_codex_main_and_subagent_share_the_longer_prefix_with_the_plugin():
    own, _ = _codex_shared_prefix(None)
    plugin, outs = _codex_shared_prefix(Settings(path_check="absolute"))
    sorted_, _ = _codex_shared_prefix(Settings(path_check="absolute", tool_order="sort"))
    assert plugin == own > sorted_
    # Codex's tools reach the model in Codex's order, byte for byte.
    assert _names(outs[0]["tools"]) == CODEX_BUILTINS + CODEX_AGENT_TOOLS + CODEX_MCP
    assert outs[0]["tools"] == responses_tools(CODEX_BUILTINS + CODEX_AGENT_TOOLS + CODEX_MCP)
    assert _names(outs[1]["tools"]) == CODEX_BUILTINS + CODEX_MCP


def test_a_profile_s_tool_order_applies_under_auto_and_an_explicit_setting_wins():
    import dataclasses

    keeping = dataclasses.replace(profiles.CODEX, name="codex-keeping", tool_order="keep")
    defaults, sorting = Settings(), Settings(tool_order="sort")  # (held: apply remembers by settings object)
    assert profiles.apply(defaults, keeping).tool_order == "keep"
    assert profiles.apply(sorting, keeping).tool_order == "sort"
    # Codex keeps its own order on every request: auto leaves it as sent (and pins it if it moves)
    assert profiles.apply(defaults, profiles.CODEX).tool_order == "auto"
    assert profiles.apply(defaults, profiles.PI).tool_order == "auto"


# -- a moving order ------------------------------------------------------------------------------

BUILTINS = ["read", "write", "edit", "bash", "grep"]
MCP = ["mcp__github__create_issue", "mcp__github__list_prs", "mcp__github__get_pr", "mcp__slack__post",
       "mcp__linear__create"]


def _chat_request(tools: list[dict], turn: int, session: str = "mcp-race") -> dict:
    body = []
    for n in range(turn + 1):
        body += [{"role": "user", "content": f"step {n}"}, {"role": "assistant", "content": f"did {n}"}]
    return {"model": "chat-model", "messages": [{"role": "system", "content": "You are a helpful coding agent."},
                                                *body[:-1]],
            "tools": tools, "metadata": {"session_id": session}}


def test_mcp_tools_in_another_order_per_request_get_the_first_seen_order():
    stabilizer = Stabilizer(Settings(path_check="absolute"))
    first = BUILTINS + shuffled(MCP, 0)
    outputs = []
    for turn in range(6):
        order = BUILTINS + shuffled(MCP, turn)  # the MCP servers answered in another order
        out = stabilizer.stabilize_sync(_chat_request(openai_tools(order), turn))
        assert _names(out["tools"]) == first, f"turn {turn}"
        assert out["tools"] == openai_tools(first)  # the tools themselves, untouched
        outputs.append(out)
    for earlier, later in zip(outputs, outputs[1:]):
        assert later["messages"][: len(earlier["messages"])] == earlier["messages"]
    assert stabilizer.stats["drift"] == 0


def test_anthropic_cache_control_on_the_last_tool_moves_with_the_end():
    stabilizer = Stabilizer(Settings(path_check="absolute"))
    first = BUILTINS + MCP
    for turn in range(3):
        tools = anthropic_tools(BUILTINS + shuffled(MCP, turn + 3) if turn else first)
        tools[-1] = {**tools[-1], "cache_control": {"type": "ephemeral"}}
        data = {"model": "claude", "max_tokens": 8, "system": "You are a helpful coding agent.", "tools": tools,
                "messages": [{"role": "user", "content": f"step {n}"} for n in range(turn + 1)],
                "metadata": {"session_id": "anthropic-mcp"}}
        out = stabilizer.stabilize_sync(data, "anthropic_messages")
        assert _names(out["tools"]) == first, f"turn {turn}"
        assert [("cache_control" in t) for t in out["tools"]] == [False] * (len(first) - 1) + [True]


def test_a_resume_on_another_replica_pins_the_same_order():
    store = MemoryStore(100, 3600)
    replicas = [Stabilizer(Settings(path_check="absolute"), store=store) for _ in range(2)]
    first = BUILTINS + shuffled(MCP, 1)
    for turn in range(4):
        out = replicas[turn % 2].stabilize_sync(_chat_request(openai_tools(BUILTINS + shuffled(MCP, turn + 1)), turn))
        assert _names(out["tools"]) == first, f"turn {turn}"


def test_a_new_tool_goes_after_the_known_ones_and_a_removed_one_leaves_the_rest_in_place():
    recorded = ("read", "bash", "grep")
    tools = tuple(openai_tools(["grep", "ask_user", "read", "bash"]))
    assert _names(pinned_order(tools, recorded)) == ["read", "bash", "grep", "ask_user"]
    tools = tuple(openai_tools(["grep", "read"]))
    assert _names(pinned_order(tools, recorded)) == ["read", "grep"]
    same = tuple(openai_tools(["read", "bash", "grep"]))
    assert pinned_order(same, recorded) is same
    twice = tuple(openai_tools(["grep", "read"]) + openai_tools(["read"]))
    assert pinned_order(twice, recorded) is twice  # a name twice: left as sent


def test_auto_sends_the_first_request_as_sent_and_still_sorts_a_pi_tools_section():
    order = shuffled(TOOL_NAMES, 9)
    data = {"model": "chat-model", "metadata": {"session_id": "pi-auto"}, "tools": openai_tools(order),
            "messages": [{"role": "system", "content": pi_system_prompt(tool_order=order)},
                         {"role": "user", "content": "hi"}]}
    out = Stabilizer(Settings(path_check="absolute")).stabilize_sync(copy.deepcopy(data))
    assert out["tools"] == data["tools"]
    section = out["messages"][0]["content"].split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    assert [line[2:].split(":")[0] for line in section.split("\n") if line.startswith("- ")] == sorted(TOOL_NAMES)


def test_keep_and_sort_settings():
    order = BUILTINS + shuffled(MCP, 2)
    for mode, expected in (("keep", [order, BUILTINS + shuffled(MCP, 3)]),
                           ("sort", [sorted(order), sorted(order)])):
        stabilizer = Stabilizer(Settings(path_check="absolute", tool_order=mode))
        for turn, sent in enumerate((order, BUILTINS + shuffled(MCP, 3))):
            out = stabilizer.stabilize_sync(_chat_request(openai_tools(sent), turn, session=f"mode-{mode}"))
            assert _names(out["tools"]) == expected[turn], (mode, turn)


# -- properties -----------------------------------------------------------------------------------

NAMES = BUILTINS + MCP + ["ask_user", "plan_update"]


@st.composite
def tool_sessions(draw) -> list[list[str]]:
    """A session's tool lists: mostly the same set in moving orders, now and then a tool added or removed."""
    current = draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=1, max_size=8))
    out = []
    for _ in range(draw(st.integers(2, 6))):
        change = draw(st.sampled_from(["shuffle", "shuffle", "same", "add", "remove"]))
        if change == "add":
            extra = [n for n in NAMES if n not in current]
            if extra:
                current = current + [draw(st.sampled_from(extra))]
        elif change == "remove" and len(current) > 1:
            victim = draw(st.sampled_from(current))
            current = [n for n in current if n != victim]
        if change != "same":
            current = list(draw(st.permutations(current)))
        out.append(current)
    return out


def _run(session: list[list[str]], stabilizer: Stabilizer) -> list[list[str]]:
    return [_names(stabilizer.stabilize_sync(_chat_request(openai_tools(order), turn, "prop"))["tools"])
            for turn, order in enumerate(session)]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool_sessions())
def test_property_tool_order_is_deterministic_idempotent_and_prefix_monotone(session):
    upstream = _run(session, Stabilizer(Settings(path_check="absolute")))
    # Deterministic: another gateway gives the same orders.
    assert _run(session, Stabilizer(Settings(path_check="absolute"))) == upstream
    # Nothing lost: every tool the client sent, once.
    assert all(sorted(out) == sorted(sent) for out, sent in zip(upstream, session))
    # The first request goes as sent; each later one keeps the order sent before it: the same set
    # gives the same list, an added tool goes after the known ones, a removed one leaves the rest in order.
    assert upstream[0] == session[0]
    for before, after in zip(upstream, upstream[1:]):
        kept = [n for n in before if n in after]
        assert after[: len(kept)] == kept
    # Idempotent: the upstream request sent again (a retry, or the next turn unchanged) keeps its order.
    stabilizer = Stabilizer(Settings(path_check="absolute"))
    again = _run(session, stabilizer)
    last = stabilizer.stabilize_sync(_chat_request(openai_tools(again[-1]), len(session), "prop"))
    assert _names(last["tools"]) == again[-1]
