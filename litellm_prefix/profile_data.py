"""The agent profiles as data: every agent-specific fact, each read from the agent's own source.

What each coding agent sends and how to recognise it (``Profile``, one per agent), the volatile
presets' patterns (the date lines and blocks the agents write), the notification blocks that
start a run no one typed, and pi's install path, which the settings' defaults name
(``packagePathSuffix``, ``stablePath``). ``profiles`` detects an agent and applies its profile;
``settings`` takes its agent defaults from here. Nothing here imports from the package: it is
the bottom of the layering, so the settings can read it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

BILLING_PREFIX = "x-anthropic-billing-header:"


@dataclass(frozen=True)
class Profile:
    name: str
    # (header name, regex searched in its value); any one match recognises the agent.
    headers: tuple[tuple[str, str], ...] = ()
    # Regexes matched at the start of one of the head's first three segments.
    head_signature: tuple[str, ...] = ()
    # Plain substrings found in the first 20,000 characters of one of those segments.
    head_markers: tuple[str, ...] = ()
    # Names from VOLATILE_PRESETS (below) turned on for this agent.
    volatile_presets: tuple[str, ...] = ()
    notification_patterns: tuple[str, ...] = ()
    # The agent's own session id, first found wins: ``header:NAME``, ``body:FIELD`` or
    # ``metadata:FIELD``, each optionally followed by ``|json:KEY`` (the value is a JSON object:
    # its KEY) or ``|re:REGEX`` (group 1 of the regex in the value).
    session_sources: tuple[str, ...] = ()
    # Headers naming a subagent inside the session: its own stream.
    subagent_headers: tuple[str, ...] = ()
    # Head segments that are the same for the main agent and its subagents (skipped when
    # the stream is told apart by the head): regexes matched at the segment's start.
    shared_head: tuple[str, ...] = ()
    # Tell subagents apart by the first head segment that is not shared (when no header says so).
    stream_by_head: bool = False
    # A subagent's request (regexes matched at the start of one of the head's first three segments):
    # where no header names its stream, its first prompt does too, so two runs of one subagent type
    # (the same head) are two streams; the main agent's stream stays its head's.
    subagent_head: tuple[str, ...] = ()
    # Agent ids naming a stream where they differ from the session id (``header:NAME``,
    # ``body:FIELD``): spawned agents under one subagent header (Codex's ``thread-id``).
    stream_sources: tuple[str, ...] = ()
    # Subagents that share the session id and the head (no header says so) are told apart by the
    # conversation's first prompt: the first user message not matching these context patterns.
    stream_by_first_prompt: tuple[str, ...] = ()
    # Auxiliary calls, each its own stream: (kind, ``head:REGEX`` matched at the start of one of
    # the first three head segments, or ``last_user:REGEX`` at the start of the last user message).
    aux_streams: tuple[tuple[str, str], ...] = ()
    # The main loop always sends tools: a request of this agent without tools is an auxiliary call.
    main_has_tools: bool = False
    # Where the agent names its workspace (regexes, group 1 the path), before session.WORKSPACE.
    workspace: tuple[str, ...] = ()
    # Where the agent's package sits when installed (``packagePathSuffix`` values): the install
    # root it prints into its prompt ends in one of these (rules/paths.py).
    install_suffixes: tuple[str, ...] = ()
    # Blocks the agent writes at the start of its first user message (``firstUserContext``, never
    # the user's typed text): (start regex, end regex or "" for the part's end, presets pinned inside).
    first_user_context: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    # Text parts it sends in a user message and leaves out when it replays the conversation
    # (``transientParts``, rules/transient.py): regexes, whole part.
    transient_parts: tuple[str, ...] = ()
    # The agent's fixed reply to a first user message that is all context (regexes, whole text): it
    # and that message are no part of the session's identity (session.first_typed).
    context_ack: tuple[str, ...] = ()
    # User messages that are all the agent's own context wherever they stand before the first typed
    # prompt (regexes matched at the start of the message's text), each answered by a fixed reply of
    # ``context_ack``: aider's repo map, read-only files and chat files (session.first_typed).
    context_messages: tuple[str, ...] = ()
    # A user message among the conversation's first 32 (regexes at the start of its text) that closes
    # an example conversation the agent writes before the real one: it, its fixed reply and every
    # message before it are the agent's (aider's "I switched to a new code base", session.first_typed).
    context_through: tuple[str, ...] = ()
    # What the agent writes after the typed prompt or leaves there when it replays it (regexes searched
    # in its text, in order; the text from a match on is cut): left out of the session's identity so
    # that the prompt as first sent and as replayed are one anchor (aider's edit-format reminder).
    typed_suffixes: tuple[str, ...] = ()
    # An agent without a session id that goes on from a compaction with the summary as its first
    # prompt: (regex of that first typed text, whole, with a group ``summary``; regex of what it
    # drops from its compaction call's answer before putting it there). The compacted session's
    # journal goes on with it (core._compaction_links).
    compaction_summary: tuple[tuple[str, str], ...] = ()
    # Lists it writes in an order it does not keep (``listings``, rules/listing_order.py): (name, order
    # "first" or "sort",
    # ((region regex with group ``list``, entry regex with group ``key``), ...), its tools' enums too).
    listings: tuple[tuple[str, str, tuple[tuple[str, str], ...], bool], ...] = ()
    # The order of its ``tools[]`` (rules/tools.py), applied where ``toolOrder`` is ``auto``: ``keep``
    # (its own order is deterministic: never reordered), ``sort``, or None (the session decides).
    tool_order: str | None = None
    # Head lines that must reach the provider exactly as sent, whatever digits they carry: the
    # learned-line rule never pins them (regexes searched in each head line; for every request,
    # detected or not, beside ``learnedVolatileExclude``).
    never_learned: tuple[str, ...] = ()
    source: str = ""


CLAUDE_CODE = Profile(
    name="claude-code",
    headers=(
        ("user-agent", r"^(?:claude-cli|claude-code)/"),
        ("x-app", r"^cli$"),
        ("anthropic-beta", r"(?:^|,)\s*claude-code-"),
        ("x-claude-code-session-id", r"."),
    ),
    head_signature=(
        rf"{re.escape(BILLING_PREFIX)} cc_version=",
        r"You are Claude Code, Anthropic's official CLI for Claude",
        r"You are an agent for Claude Code, Anthropic's official CLI for Claude",
        r"You are a Claude agent, built on Anthropic's Claude Agent SDK",
    ),
    volatile_presets=("todays-date", "git-status"),
    notification_patterns=(r"^\s*<task-notification>",),
    # metadata.user_id: a JSON string with session_id (2.1.78+); user_<hash>_account_<id>_session_<uuid> before.
    session_sources=("header:x-claude-code-session-id", "metadata:user_id|json:session_id",
                     r"metadata:user_id|re:_session_([A-Za-z0-9-]{8,})$"),
    subagent_headers=("x-claude-code-agent-id",),
    shared_head=(
        re.escape(BILLING_PREFIX),
        r"You are Claude Code, Anthropic's official CLI for Claude(?:, running within the Claude Agent SDK)?\.\s*$",
        r"You are a Claude agent, built on Anthropic's Claude Agent SDK\.\s*$",
    ),
    stream_by_head=True,
    # 2.1.332 (explore_cc.md): a subagent's billing block says so, and its prompt opens with its own line.
    subagent_head=(rf"{re.escape(BILLING_PREFIX)}[^\n]*\bcc_is_subagent=true;",
                   r"You are an agent for Claude Code, Anthropic's official CLI for Claude"),
    # /compact (2.1.197, explore_cc.md) appends its instructions as text blocks to the LAST user message
    # under the main head and tools: that request is the main stream's (its prefix is the main
    # conversation, pins included). Older versions sent it under a summarizer system prompt of its own.
    aux_streams=(("compaction", r"head:You are a helpful AI assistant tasked with summarizing conversations"),),
    # 2.1.197 (native binary, otr()): the user context as the first part of the first user message,
    # "<system-reminder>\nAs you answer ...context:\n# claudeMd\n...\n# currentDate\nToday's date is
    # 2026-12-03.\n\n      IMPORTANT: ...\n</system-reminder>\n".
    first_user_context=((r"<system-reminder>\nAs you answer the user's questions, you can use the following context:\n",
                         r"\n</system-reminder>", ("reminder-date", "git-status")),),
    # The attribution block (rules/billing.py) must reach Anthropic's own API exactly as sent.
    never_learned=(rf"^{re.escape(BILLING_PREFIX)}",),
    source="@anthropic-ai/claude-code 2.1.90 cli.js (request headers, z08 attribution header, user_id metadata, "
    "system blocks [billing, identity, prompt]); 2.1.197 is a native binary",
)

CODEX = Profile(
    name="codex",
    headers=(
        ("originator", r"^codex"),
        ("user-agent", r"^(?:codex_cli_rs|codex_exec|codex-tui|codex_vscode|codex_sdk_ts|Codex Desktop)/"),
    ),
    head_signature=(
        r"You are Codex, ",
        r"You are a coding agent running in the Codex CLI",
    ),
    session_sources=("header:session-id", "header:thread-id", "header:session_id", "header:x-client-request-id",
                     "body:prompt_cache_key"),
    # Review, compaction and memory runs share the conversation's id under another prompt.
    subagent_headers=("x-openai-subagent",),
    # Spawned agents share the session id and header value; each has its own thread id.
    stream_sources=("header:thread-id",),
    stream_by_first_prompt=(r"<user_instructions>", r"# AGENTS\.md instructions for ", r"<INSTRUCTIONS>",
                            r"<environment_context>", r"<[a-z_]+_(?:context|instructions)>"),
    # Automatic compaction comes without the subagent header (codex-rs core compact prompt.md).
    # Automatic compaction (0.171.0, explore_cc.md): same headers, no tools, request_kind in the turn metadata.
    aux_streams=(("compaction", r'header:x-codex-turn-metadata:"request_kind"\s*:\s*"compaction"'),
                 ("compaction", r"last_user:You are performing a CONTEXT CHECKPOINT COMPACTION")),
    main_has_tools=True,
    # (Its tools come in build_specs' registration order, MCP tools sorted by name: the same order on
    # every request. The default toolOrder auto keeps that order, and only pins a session's order
    # should it ever move; keep would let a moving order through.)
    source="openai/codex codex-rs/codex-api/src/requests/headers.rs (session_id header, x-openai-subagent), "
    "codex-rs/core (originator codex_cli_rs, user agent <originator>/<version> (...))",
)

OPENCODE = Profile(
    name="opencode",
    headers=(
        ("user-agent", r"^opencode/"),
        ("x-opencode-session", r"."),
    ),
    head_signature=(
        r"You are opencode, ",
        r"You are OpenCode, ",
    ),
    volatile_presets=("todays-date",),
    session_sources=("header:x-session-affinity", "header:x-opencode-session"),
    # Its title and compaction requests share the session id (src/agent/prompt/title.txt, compaction.txt).
    # 1.18.33 (explore_cc.md): the title request comes first, no tools, system "You are a title
    # generator. You output ONLY a thread title...". Compaction's system prompt, by version.
    aux_streams=(("title", r"head:You are a title generator"),
                 ("compaction", r"head:(?:You are a helpful AI assistant tasked with summarizing conversations"
                                r"|You are summarizing a conversation for continuation by another agent"
                                r"|You are an anchored context summarization assistant"
                                r"|You are a context summarization agent)")),
    main_has_tools=True,
    source="anomalyco/opencode packages/opencode/src/session (x-session-affinity / X-Session-Id / "
    "x-parent-session-id headers; x-opencode-session and User-Agent opencode/<version> to its own providers)",
)

PI = Profile(
    name="pi",
    headers=(
        ("user-agent", r"^pi/\d|^pi-coding-agent"),
    ),
    head_signature=(
        r"You are an expert coding assistant operating inside pi, a coding agent harness",
    ),
    head_markers=("\n</tools>\n\n<rules>\n",),  # its sectioned head
    volatile_presets=("current-date",),
    session_sources=("header:session_id", "header:x-session-affinity", "body:prompt_cache_key"),
    # Both package names print the root (README, docs, examples paths): @mariozechner/... 0.73.1 and
    # @earendil-works/... 1.6.0 dist/core/system-prompt.js (getReadmePath/getDocsPath/getExamplesPath).
    install_suffixes=("node_modules/@earendil-works/pi-coding-agent", "node_modules/@mariozechner/pi-coding-agent"),
    source="@earendil-works/pi-coding-agent 0.74.2 dist/core/system-prompt.js (Current date line), "
    "dist/utils/pi-user-agent.js (pi/<version> (...)), dist/core/sdk.js",
)

# aider (aider-chat 0.86.2, aider/coders/): an OpenAI-SDK client (``OpenAI/Python``, no header of its
# own, no session id, no workspace path in its prompt). Its system prompt opens with the edit format's
# "Act as an expert ..." and, for the formats that suggest shell commands, carries platform lines
# ending in ``- Current date: YYYY-MM-DD``. The conversation opens with aider's own messages: the edit
# format's example conversation closed by "I switched to a new code base...", the read-only files, the
# repo map, then the history, then the chat files, each answered by a fixed reply; the prompt goes
# last, with the format's reminder appended (base_coder.format_chat_chunks). Replayed from
# ``.aider.chat.history.md`` the prompt loses the reminder and keeps two trailing blanks.
AIDER_REMINDERS = (r"# \*SEARCH/REPLACE block\* Rules:", r"To suggest changes to a file you MUST return",
                   r"# File editing rules:", r"# V4A Diff Format Rules:")
AIDER = Profile(
    name="aider",
    head_signature=(
        r"Act as an expert software developer(?:\.\n| who edits source code\.| and make changes to source code\.)",
        r"Act as an expert code analyst\.\n",
        r"Act as an expert architect engineer and provide direction to your editor engineer\.",
        r"You are an expert on the AI coding tool called Aider\.",
    ),
    volatile_presets=("current-date",),
    context_messages=(
        r"Here are summaries of some files present in my git repository\.\n",
        r"Here are some READ ONLY files, provided for your reference\.\n",
        r"I have \*added these files to the chat\* so you can go ahead and edit them\.\n",
        r"Don't try and edit any existing code without asking me to add the files to the chat!\n",
        r"I am not sharing any files that you can edit yet\.\Z",
        r"Image file: ",
    ),
    context_through=(r"I switched to a new code base\. Please don't consider the above files",),
    context_ack=(
        r"Ok\.?",
        r"Ok, I won't try and edit those files without asking first\.",
        r"Ok, I will use these (?:files|images) as references\.",
        r"Ok, any changes I propose will be to those files\.",
        r"Ok, based on your requests I will suggest which files need to be edited and then stop and wait for your approval\.",
    ),
    typed_suffixes=(r"\n\n(?:" + "|".join(AIDER_REMINDERS) + ")", r"\s+\Z"),
    source="aider-chat 0.86.2 aider/coders/base_coder.py (format_chat_chunks, get_platform_info), "
    "base_prompts.py, *_prompts.py (main_system, system_reminder)",
)

# Qwen Code: no session id to an OpenAI-compatible base URL (``metadata.sessionId`` goes only to
# DashScope). Its context (date, OS, cwd, folder tree) is the first user message, answered by a fixed
# "Got it. Thanks for the context!"; main agent and subagents both start with it, then the task.
# 0.24 sends that context as a <system-reminder> text part of the first user message, after a skills
# reminder and before a "The current date is: ..." reminder and the prompt; a continued or resumed
# session replays that message as first sent (the date moves in a later reminder of its own), but
# its system prompt's git snapshot is taken again (``git-snapshot``).
QWEN_CODE_CONTEXT = r"This is the Qwen Code\. We are setting up the context for our chat\."
# 0.24: "<system-reminder>\nThe current date is: Friday, December 4, 2026. Note: This is the authoritative
# current date \u2014 it may differ from ...\n</system-reminder>", a text part of its own.
QWEN_DATE_REMINDER = r"<system-reminder>\nThe current date is: [^\n]*\n</system-reminder>"
QWEN_STARTUP_REMINDER = (r"<system-reminder>\nThe (?:following (?:MCP tools|skills/commands|Agent tool subagent types) "
                         r"became available|available MCP tools changed) after startup[\s\S]*\n</system-reminder>")
QWEN_CODE = Profile(
    name="qwen-code",
    headers=(
        ("user-agent", r"^QwenCode/"),
        ("x-dashscope-useragent", r"^QwenCode/"),
    ),
    head_signature=(
        r"You are Qwen Code, an interactive CLI agent",
    ),
    stream_by_first_prompt=(QWEN_CODE_CONTEXT,),
    # The whole first user message is its context; "Today's date is <toLocaleDateString> (formatted ...)."
    first_user_context=(
        (QWEN_CODE_CONTEXT + r"\n", "", ("context-date", "workspace-tree")),  # 0.15: the whole first user message
        # 0.24 (chunks/: getInitialChatHistory's reminders, each a part "<system-reminder>\n...\n</system-reminder>",
        # their bodies' own tags escaped; then the first query's "The current date is" reminder: none of
        # them is the typed prompt).
        (r"<system-reminder>\nThe text below was supplied by the MCP server\.", r"\n</system-reminder>", ()),
        (r"<system-reminder>\nThe following skills are available for use with the Skill tool\.", r"\n</system-reminder>", ()),
        (r"<system-reminder>\n" + QWEN_CODE_CONTEXT + r"\n", r"\n</system-reminder>", ("context-date", "workspace-tree")),
        (r"<system-reminder>\nThe following tools are reachable through `", r"\n</system-reminder>", ()),
        (QWEN_DATE_REMINDER + r"\Z", "", ()),
    ),
    context_ack=(r"Got it\. Thanks for the context!",),  # STARTUP_CONTEXT_MODEL_ACK
    aux_streams=(("title", r"head:Generate a concise, sentence-case title"),
                 ("compaction", r"head:\s*You are the component that summarizes internal chat history"),
                 ("compaction", r"head:You are the component that summarizes a conversation when its context window"),
                 ("memory", r"head:You are now acting as the managed memory extraction subagent"),
                 ("next-speaker", r"last_user:Analyze \*only\* the content and structure of your immediately")),
    main_has_tools=True,
    workspace=(r"(?m)^I'm currently working in the directory: (\S[^\n]*?)[ \t]*$",
               r"(?m)^I'm currently working in the following directories:\n  - (\S[^\n]*?)[ \t]*$"),
    volatile_presets=("git-snapshot",),
    # 0.24: the date reminder of a process's first query is not kept in the session file: a
    # continued session replays that message without it; nor are the reminders of what changed after
    # the process started (chunks/ buildChangedMcpToolsReminder and its skill and subagent kin: an MCP
    # server the user added, seen in the real CLI's runs).
    transient_parts=(QWEN_DATE_REMINDER, QWEN_STARTUP_REMINDER),
    # 0.24 (postProcessSummary): the summary, its <analysis> block dropped, then RESUME_TRAILER, as
    # the text after the prelude in the first user message of the history it goes on with.
    compaction_summary=((r"(?s)(?P<summary>.+?)\n\nResume the prior task using the summary above\. Continue from the "
                         r"last in-flight step; do not acknowledge the summary, do not re-introduce, do not greet "
                         r"the user again\.", r"<analysis>[\s\S]*?</analysis>\s*|<analysis>[\s\S]*$"),),
    source="@qwen-code/qwen-code 0.15.10 cli.js (DefaultOpenAICompatibleProvider.buildHeaders: User-Agent "
    "QwenCode/<version> (<platform>; <arch>); DashScope provider X-DashScope-UserAgent, buildMetadata; "
    "utils/environmentContext.ts; services/sessionTitle.ts; getCompressionPrompt); 0.24.4 chunks/ "
    "(getRecentGitStatus, getEnvironmentContext, the current-date reminder)",
)

# Gemini CLI: Google-native routes; no session id. Its <session_context> block (date, OS, temp dir,
# workspace, folder tree) is the first part of the first user message, the prompt the second part.
GEMINI_CLI = Profile(
    name="gemini-cli",
    headers=(
        ("user-agent", r"^GeminiCLI(?:-[^/\s]+)?/|proxy_client=geminicli"),
    ),
    head_signature=(
        r"You are Gemini CLI, an (?:autonomous|interactive) CLI agent specializing in software engineering",
        r"You are an interactive CLI agent specializing in software engineering tasks\.",
    ),
    aux_streams=(("compaction", r"head:\s*You are a specialized system component responsible for distilling chat history"),
                 ("loop-check", r"head:You are a diagnostic agent that determines whether a conversational AI"),
                 ("summary", r"last_user:Summarize the user's primary intent or goal in this conversation"),
                 ("next-speaker", r"last_user:Analyze \*only\* the content and structure of your immediately")),
    main_has_tools=True,
    workspace=(r"(?m)^- \*\*Workspace Directories:\*\*\n  - (\S[^\n]*?)[ \t]*$",),
    first_user_context=((r"<session_context>\nThis is the Gemini CLI\. We are setting up the context for our chat\.\n",
                         r"\n</session_context>", ("context-date", "workspace-tree")),),
    # Its generalist subagent shares the head's start and the session: told apart by its task (the
    # first typed text: the prompt part after <session_context>, or the subagent's first message).
    stream_by_first_prompt=(r"<session_context>\n",),
    # Its skills come from glob() (loadSkillsFromDir: results in the file system's order, which moved
    # between two processes of one session in a test run, and differs between sessions): the
    # <available_skills> entries of the system prompt, the activate_skill tool's "(Available: 'a',
    # 'b')" and its enum, sorted by name: every session of every machine the same head bytes.
    listings=(("skills", "sort", ((r"<available_skills>\n(?P<list>(?:  <skill>\n[\s\S]*?\n  </skill>\n)+)</available_skills>",
                           r"  <skill>\n    <name>(?P<key>[^<\n]+)</name>\n[\s\S]*?\n  </skill>\n"),
                          (r"\(Available: (?P<list>'[^'\n]+'(?:, '[^'\n]+')+)\)", r"'(?P<key>[^'\n]+)'")), True),),
    source="@google/gemini-cli 0.61.0 bundle/chunk-JDPZ4CE3.js (createContentGenerator: User-Agent "
    "GeminiCLI[-<client>]/<version>/<model> (<platform>; <arch>; <surface>), CloudCodeVSCode/... proxy_client=geminicli; "
    "getEnvironmentContext; getCompressionPrompt; LOOP_DETECTION_SYSTEM_PROMPT; SUMMARY_PROMPT)",
)

PROFILES: tuple[Profile, ...] = (CLAUDE_CODE, CODEX, OPENCODE, PI, QWEN_CODE, GEMINI_CLI, AIDER)


NAMES: tuple[str, ...] = tuple(p.name for p in PROFILES)

# pi's install root and where a stable link to it goes: the defaults of ``packagePathSuffix`` and
# ``stablePath`` (rules/paths.py), which hold for requests from any agent (detected or not).
PI_PACKAGE_PATH_SUFFIX = PI.install_suffixes[0]
PI_STABLE_PATH = "$HOME/.pi/pi-home"

# The default ``notificationPatterns``: an agent's own notification that starts a run no one typed
# (pi's background tasks and extensions, Claude Code's task notifications).
DEFAULT_NOTIFICATION_PATTERNS = [
    r"^\s*<background-task-notification>",
    r"^\s*<task-notification>",
    r"^\s*<extension-notification>",
]

# One directory's tree as getFolderStructure writes it (Qwen Code, Gemini CLI): its summary line and a
# blank line (optional for the first), the root, the entries.
_SUMMARY = r"Showing up to [0-9]+ items[^\r\n]*\r?\n\r?\n"
_ENTRIES = r"[^\r\n]+(?:\r?\n(?:\u2502   |    )*[\u251c\u2514]\u2500\u2500\u2500[^\r\n]*)*"

# The volatile presets (``volatilePresets``, a profile's ``volatile_presets``): spans an agent
# rewrites on every request without meaning anything new, pinned by rules/volatile.py.
VOLATILE_PRESETS = {
    # Each pattern was written from the agent's own source; a group named ``value`` (when
    # present) is the span pinned, so indentation and bullets stay outside the value.
    # Lines end at CR or LF, so CRLF heads pin the same text.
    #
    # pi: "Current date and time: Thursday, December 3, 2026 at 08:30:12\u202fAM UTC"
    #   (@mariozechner/pi-coding-agent 0.52.5, dist/core/system-prompt.js: toLocaleString("en-US",
    #   {weekday: "long", ..., second: "2-digit", timeZoneName: "short"})) and "Current date: 2026-12-03"
    #   (@mariozechner/pi-coding-agent 0.58.3 and 0.73.1, same file). @earendil-works/pi-coding-agent
    #   1.6.0 (sectioned head) writes no date. aider: "- Current date: 2026-12-04", a bullet of its
    #   platform lines (aider-chat 0.86.2 base_coder.get_platform_info). Also the generic "Current
    #   date:" line of other agents.
    "current-date": r"(?m)^[ \t]*(?:- )?(?P<value>Current date(?: and time)?: [^\r\n]+)",
    # Claude Code: "Today's date: 2026-12-03" inside <env> and, in its env_info_simple variant,
    #   " - The current date is: 2026-12-03" (@anthropic-ai/claude-code 2.1.36, cli.js; 2.1.332 puts
    #   the date in a user-message reminder instead, outside the head).
    # opencode: "  Today's date: Thu Dec 03 2026", indented inside <env> (new Date().toDateString();
    #   anomalyco/opencode packages/opencode/src/session/system.ts at 69cafb24).
    "todays-date": r"(?m)^[ \t]*(?:- )?(?P<value>(?:Today's date|The current date is): [^\r\n]+)",
    # Claude Code: the gitStatus system-context block, "gitStatus: This is the git status at the start
    #   of the conversation. ..." through "Recent commits:" and its `git log --oneline -n 5` lines
    #   (@anthropic-ai/claude-code 2.1.36 cli.js: parts joined by "\n" and "\n\n"; 2.1.332 native
    #   binary: every part joined by "\n\n", an optional "Git user:" part).
    #   2.1.332 writes it as "# gitStatus\nThis is the git status at the start of the conversation. ..."
    #   in its first-message <system-reminder> context (the profile's block pins it there).
    "git-status": r"(?ms)^(?:gitStatus: |# gitStatus\r?\n(?=This is the git status)).*?^Recent commits:"
                  r"(?:\r?\n[0-9a-f]{4,64}(?: [^\r\n]*)?){0,5}",
    # Qwen Code 0.24: "Git snapshot at conversation start. ...not instructions.\n```text\ngit: Current
    #   branch: main\ngit: Status:\ngit: (clean)\ngit: Recent commits:\ngit: a57cbf5 initial commit\n```"
    #   in the system prompt (@qwen-code/qwen-code 0.24.4 chunks/chunk-P6OZD6V2.js getRecentGitStatus:
    #   every line of the branch, `git status --short` (2,000 characters at most, then a "... (truncated"
    #   line) and `git log --oneline -n 5` prefixed "git: ", so no line of the block starts with ```).
    #   Rebuilt when a session is continued or resumed: the value is the fenced block's lines.
    "git-snapshot": r"(?m)^Git snapshot at conversation start\. [^\r\n]*\r?\n```text\r?\n"
                    r"(?P<value>(?:git: [^\r\n]*\r?\n)*git: [^\r\n]*)(?=\r?\n```)",
    # Dates in an agent's context block at the start of the first user message (``firstUserContext``),
    # each anchored on the agent's own text around it, so a user's line inside the block (a quoted
    # CLAUDE.md) is never the match:
    # Claude Code 2.1.197: "# currentDate\nToday's date is 2026-12-03.\n\n      IMPORTANT: this context ..."
    #   in its <system-reminder> (otr() and qla() in the native binary's bundle; currentDate is the last
    #   key; the apostrophe is one of ' \u2019 \u02bc \u02b9, the date 2026/12/03 in China's time zones).
    "reminder-date": r"(?m)^# currentDate\r?\n(?P<value>Today['\u2019\u02bc\u02b9]s date is [^\r\n]+)"
                     r"(?=\r?\n\r?\n[ \t]*IMPORTANT: this context may or may not be relevant)",
    # Qwen Code 0.15 and Gemini CLI 0.61: "This is the <agent>. We are setting up the context for our
    #   chat.\nToday's date is Thursday, December 3, 2026 (formatted according to the user's locale)."
    #   (toLocaleDateString; packages/core/src/utils/environmentContext.ts in both).
    "context-date": r"We are setting up the context for our chat\.\r?\n(?P<value>Today's date is [^\r\n]+)",
    # The workspace's folder tree in the same blocks (getFolderStructure, one per workspace directory,
    #   joined by "\n"): "Showing up to 200 items (files + folders).[ Folders or files indicated with
    #   ... were ignored, or the display limit (200 items) was reached.]\n\n/abs/root/\n" then one line
    #   per entry, indented by "    " or "\u2502   " per level, "\u251c\u2500\u2500\u2500" or
    #   "\u2514\u2500\u2500\u2500" before the name (Qwen Code 0.15 "Showing up to 20 items:"). After
    #   Qwen Code's "Here is the folder structure of the current working directories:\n\n" (0.15 and
    #   0.24, chunks/ getDirectoryContextString) and Gemini CLI's "- **Directory Structure:**\n\n"
    #   (0.61.0 bundle/ getDirectoryContextString). A file added or removed changes it; the value ends
    #   with the tree's last line, so Gemini CLI's session memory after it stays outside.
    "workspace-tree": r"(?:Here is the folder structure of the current working directories:|- \*\*Directory Structure:\*\*)"
                      r"\r?\n\r?\n(?P<value>(?:" + _SUMMARY + ")?" + _ENTRIES + r"(?:\r?\n" + _SUMMARY + _ENTRIES + r")*)",
}

# The same presets inside tool descriptions (the tools come first in the prompt, so a date
# there moves everything after it). Pinned under the name "<preset>:tools".
TOOL_VOLATILE_PRESETS = {
    # Claude Code's WebSearch tool: "  - Today's date is 2026-12-03. You MUST use this year ..."
    #   (@anthropic-ai/claude-code 2.1.36 cli.js) and "  - The current month is December 2026. ..."
    #   (2.1.332). Its example line's year ("React documentation 2026") still moves once a year.
    "todays-date": r"(?m)^[ \t]*- (?P<value>(?:Today's date is [0-9]{4}-[0-9]{2}-[0-9]{2}|"
                   r"The current month is [A-Z][a-z]+ [0-9]{4}))\. You MUST use this year",
}
