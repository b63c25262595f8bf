"""Session identity, always tenant-scoped: ``identify`` is the one derivation behind the journal
key, the router's affinity key and the provider-hint key, so they never disagree.

**Session id**, first found wins: the agent's own id (its profile's ``session_sources``:
Claude Code's ``x-claude-code-session-id`` or ``metadata.user_id``, Codex's
``session-id``/``thread-id``/``session_id``/``x-client-request-id`` headers and
``prompt_cache_key``, opencode's ``x-session-affinity``/``x-opencode-session``), then
LiteLLM's ``litellm_session_id`` / ``metadata.session_id`` (the proxy fills them from
``x-session-id``), ``prompt_cache_key``, the ``x-session-affinity`` header, else a
**derived** key. The tenant is the team id, else the API-key hash; every stored key is a
hash of both, so one tenant can never read or steer another's state, and no raw id is ever
logged.

**A derived key never merges two sessions.** It is a hash of what tells sessions apart:

- the *anchor*: the first typed text (``first_typed``, its marks ignored: the first user
  message without the context blocks the profile declares at its start, ``first_user_context``,
  found as rules/volatile.py's ``context_blocks`` finds them; a first user message that is all
  declared context, Qwen Code's, is skipped with the agent's fixed reply to it, ``context_ack``,
  and the next user message is the prompt as typed; so are the agent's own messages its profile
  declares wherever they stand before the prompt (``context_messages``, ``context_through``:
  aider's example conversation, repo map and chat files), and what it appends to the prompt
  (``typed_suffixes``: aider's reminder) is cut. So a resume that re-renders the block with
  that day's date and folder tree keeps its anchor; text the user types is never taken for
  context: only declared blocks, only at the start of the first user message), the workspace
  the request names (the cwd line of the head or of the context items before the first answer:
  pi's ``cwd`` section, Claude Code's and opencode's ``Working directory:``, Codex's ``<cwd>``,
  Qwen Code's and Gemini CLI's blocks; the profile's ``workspace`` patterns first, then the
  generic ones), the agent, and the head's identity: the start (256 characters) of its first
  segment that is not shared by every agent of the kind, with digits and weekday/month names
  blanked. Only the start: an AGENTS.md edit, a new tool, a date or an install path later in
  the head never changes it, so a session whose head genuinely changes is never split;
- the *first answer*: the first assistant turn after that first typed prompt (never the
  agent's fixed reply to its context): its tool-call ids where a model generated them (random);
  ids that carry no randomness (``synthesized_call_id``: Gemini CLI's come back from LiteLLM as
  ``call_<tool name>``, the same in every session) are no identity, and the calls' names and
  arguments with the answer's text are used instead; an answer without calls: its text.

Look-alike sessions. Two sessions can share all of that: the same first prompt in the same
workspace, and the same first answer (Gemini's calls carry no id and come back as ``call_<tool
name>``; a short prompt, "hi", often gets the same text from a hosted model). Their derived key is
one; the journal under it is the first session's, and each later look-alike session gets a journal
of its own (``core.Stabilizer._generation``), so a new session never inherits another's pins or
notes. A journal records how far its session got (``Journal.trace``, at 1, 2, 4, 8, ... answers:
the number of answers, their calls, the request's digest). A request goes on with the journal whose
recorded answers it carries (no fewer, the same calls). A request no further than the journal got
(a session's second request, a resume of a one-answer session) goes on with it only where it is
that very request again (a retry) or where that journal changes nothing in it (its pinned date,
folder tree, memory and head are this request's own). So a second session started a day later, or
after a file was added, or after the first session went on, starts its own journal on its second
request; and each journal then takes its own session's requests, also while the other goes on.
Where two sessions are alike in every byte so far (the same day, the same context, the same answers),
they share one journal until their requests differ: its pins are then each one's own values, so
nothing it shows either of them is false (a note tells the current value of what was pinned at
either's start). Where a request fits two journals that would both change it and neither got
further, it starts one of its own (a cache miss, never a pin of the other session). An operator
who runs byte-identical sessions in parallel sends ``x-session-id`` (or ``metadata.session_id``)
per session: it comes before any derived key.

Decision. A request with no answer in its history is the first request of a session (or a
retry of it): it runs on an empty journal, and nothing is loaded or saved under its key (which its
own bytes name), so it can never inherit another session's pins or notes. Every later request
keys on (anchor, first answer), and on which look-alike session it continues: a continuation and a
resume (its history carries the first answer) find their own journal; a second session with the
same first prompt has another first answer, another workspace, or a journal of its own. The link
between request 1 and request 2 is the client's own: request 2 pins the head it carries, which is
request 1's head unless the head changed in the seconds between them (then only request 1's short
prefix is computed again). Router affinity and ``prompt_cache_key`` use the anchor (with the
stream), which holds from the first request on: routing two look-alike sessions together shares a
cache, never state.

**Streams.** Inside a session each of these is its own stream with its own head and pins
(``session_stream``), so none reads as a change of the main head: a subagent (a subagent
header; an agent id such as Codex's ``thread-id`` that differs from the session id; else,
where the profile says its subagents share the session id, the first head segment that is
not shared, or the conversation's first prompt after the agent's context items), and an
auxiliary call (the profile's ``aux_streams`` patterns on the head, a header's value, or the start of the
last user message or of one of its text parts (Claude Code's ``/compact`` appends its
instructions there): titles, summaries, compaction prompts; and, for an agent whose main loop
always sends tools, any request without tools).
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .journal import content_hash, unmarked
from .rules.volatile import context_blocks, first_user
from .sections import segment_memo
from .view import TEXT_PART_TYPES, View, field_of, is_user_message

if TYPE_CHECKING:
    from .profiles import Profile

SESSION_HEADERS = ("x-session-id", "x-litellm-session-id", "x-claude-code-session-id", "session_id", "x-session-affinity")
DERIVED = "derived"  # the source of a derived session id

# Where a request names its workspace, for agents without a profile pattern (one group: the path).
WORKSPACE = (
    r"(?m)^[ \t]*(?:Current )?[Ww]orking directory:[ \t]*(\S[^\n]*?)[ \t]*$",
    r"<cwd>\s*([^<\n]+?)\s*</cwd>",
)


def _metadata(data: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in ("metadata", "litellm_metadata"):
        value = data.get(key)
        if isinstance(value, Mapping) and value:
            return value
    return {}


def _headers(data: Mapping[str, Any]) -> Mapping[str, Any]:
    request = data.get("proxy_server_request")
    if isinstance(request, Mapping) and isinstance(request.get("headers"), Mapping):
        return request["headers"]
    headers = _metadata(data).get("headers")
    return headers if isinstance(headers, Mapping) else {}


def _content_text(content: Any) -> str:
    """A content's text: the string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "\n".join(t for part in content
                         if isinstance(t := field_of(part, "text"), str))
    return ""


@lru_cache(maxsize=64)
def _block_rules(blocks: tuple[tuple[str, str, tuple[str, ...]], ...]) -> tuple:
    """A profile's ``first_user_context`` compiled the way ``context_blocks`` reads them."""
    return tuple((re.compile(start), re.compile(end) if end else None, ()) for start, end, _ in blocks)


def _typed_content(content: Any, rules: tuple) -> Any:
    """``content`` without the declared context blocks at its start (rules/volatile.py's
    ``context_blocks``: from the start of its first text part, block after block); None where
    nothing else is left (the whole message is the agent's context)."""
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, (list, tuple)):
        texts = []
        for part in content:
            if not (field_of(part, "type") in TEXT_PART_TYPES and isinstance(field_of(part, "text"), str)):
                break
            texts.append(field_of(part, "text"))
    else:
        return content
    blocks = context_blocks(texts, rules)
    if not blocks:
        return content
    cut: dict[int, int] = {}
    for index, _, stop, _ in blocks:
        cut[index] = stop
    if isinstance(content, str):
        return content[cut[0]:].lstrip() or None
    parts = []
    for position, part in enumerate(content):
        if position in cut:
            rest = texts[position][cut[position]:].lstrip()
            if not rest:
                continue  # a part that is all context
            part = {**part, "text": rest} if isinstance(part, Mapping) else rest
        parts.append(part)
    return parts or None


CONTEXT_THROUGH_SCAN = 32  # messages searched for the end of an agent's example conversation


def first_typed(view: View, profile: Profile | None) -> tuple[int, Any] | None:
    """(index, content) of the conversation's first typed text: the first user message with the
    profile's declared context blocks at its start taken off (``first_user_context``: Gemini CLI's
    ``<session_context>`` part, Claude Code's date reminder). A user message that is *all* the
    agent's context (the first one all declared blocks, Qwen Code's; any one the profile's
    ``context_messages`` open, aider's repo map and chat files; and, where a message among the first
    32 opens with a ``context_through`` pattern, aider's example conversation up to and with it) is
    skipped with the agent's fixed reply to it (``context_ack``), and the next user message is the
    prompt, as typed (its ``typed_suffixes`` cut: aider's reminder), never searched for blocks: only
    the start of the first user message is the agent's. Where the reply is not the declared one, the
    context message stands as the prompt (the key is then as fine as the whole message), as it does
    where no prompt follows yet. None: no user message."""
    body = view.body
    first = first_user(body)
    if first is None:
        return None
    at = first
    if profile is not None and profile.context_through:
        for index in range(first, min(len(body), first + CONTEXT_THROUGH_SCAN)):
            if is_user_message(body[index]) and _opens(body[index], profile.context_through):
                reply = _acknowledged(body, index + 1, profile)
                after = first_user(body, reply) if reply is not None else None
                if after is not None:
                    at = after
                break
    rules = _block_rules(profile.first_user_context) if profile is not None and profile.first_user_context else ()
    while True:
        content = field_of(body[at], "content")
        typed = _typed_content(content, rules) if rules and at == first else content
        if typed is not None and not (profile is not None and profile.context_messages
                                      and _opens(body[at], profile.context_messages)):
            return at, _without_suffixes(typed, profile)
        reply = _acknowledged(body, at + 1, profile)
        if reply is None:
            return at, content
        later = first_user(body, reply)
        if later is None:
            return at, content  # (no prompt yet after the context: the context stands for it)
        at = later


def _opens(item: Any, patterns: tuple[str, ...]) -> bool:
    text = _text_of(item)
    return any(_re(pattern).match(text) for pattern in patterns)


def context_ends(view: View, profile: Profile | None) -> tuple[int, ...]:
    """Where the agent's own leading context ends, in ``view.body`` (ascending; empty where the
    profile declares none): the fixed reply closing its example conversation (``context_through``,
    the same bytes in every session of the agent) and the message before the first typed prompt
    (its context messages too: aider's repo map, the same in one repository). Cache marks there
    serve every session that shares them (rules/hints.py)."""
    if profile is None or not (profile.context_through or profile.context_messages):
        return ()
    body = view.body
    ends: list[int] = []
    first = first_user(body)
    if first is not None and profile.context_through:
        for index in range(first, min(len(body), first + CONTEXT_THROUGH_SCAN)):
            if is_user_message(body[index]) and _opens(body[index], profile.context_through):
                after = _acknowledged(body, index + 1, profile)
                if after is not None and after - 1 > index:
                    ends.append(after - 1)
                break
    typed = first_typed(view, profile)
    if typed is not None and typed[0] >= 1 and (not ends or typed[0] - 1 > ends[-1]):
        ends.append(typed[0] - 1)
    return tuple(ends)


def _acknowledged(body: Sequence[Any], at: int, profile: Profile | None) -> int | None:
    """Where the conversation goes on after an agent's context message whose reply (at ``at``) is one
    of its fixed ones (``context_ack``), or after one with no reply at all; None: another reply."""
    if at < len(body) and field_of(body[at], "role") == "assistant":
        reply = _text_of(body[at]).strip()
        if profile is None or not any(_re(pattern).fullmatch(reply) for pattern in profile.context_ack):
            return None
        return at + 1
    return at


def _without_suffixes(content: Any, profile: Profile | None) -> Any:
    """``content`` with the profile's ``typed_suffixes`` cut from its text (a string; else as it is)."""
    if profile is None or not profile.typed_suffixes or not isinstance(content, str):
        return content
    for pattern in profile.typed_suffixes:
        found = _re(pattern).search(content)
        if found is not None:
            content = content[:found.start()]
    return content


def first_user_text(view: View, profile: Profile | None = None) -> str:
    typed = first_typed(view, profile)
    if typed is None:
        return ""
    content = typed[1]
    try:
        return json.dumps(unmarked({"content": content})["content"], sort_keys=True, ensure_ascii=False,
                          default=str)
    except (TypeError, ValueError):
        return str(content)


def _text_of(item: Any) -> str:
    """The text of a message or item: a string content, or its text parts joined."""
    return _content_text(field_of(item, "content"))


# Blanked in the head's identity and a head-told stream: a date, clock, counter or version
# near the start never splits a session or a stream.
_VOLATILE = re.compile(r"[0-9]+|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\b"
                       r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b")


def _blanked(text: str) -> str:
    return _VOLATILE.sub("0", text)


@lru_cache(maxsize=64)
def _source_pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _parsed(value: str, parse: str) -> Any:
    """A profile source's ``json:KEY`` (the value is a JSON object: its KEY) or ``re:REGEX``
    (group 1 of the regex's first match in the value)."""
    kind, _, arg = parse.partition(":")
    if kind == "json":
        if not value.startswith("{"):
            return None
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed.get(arg) if isinstance(parsed, dict) else None
    if kind == "re":
        match = _source_pattern(arg).search(value)
        return match.group(1) if match else None
    return None


def _agent_source(data: Mapping[str, Any], headers: Mapping[str, Any], source: str) -> str | None:
    """A profile's id source: ``header:NAME``, ``body:FIELD`` or ``metadata:FIELD``, then
    optionally ``|json:KEY`` or ``|re:REGEX`` to read the id inside that value."""
    where, _, rest = source.partition(":")
    name, _, parse = rest.partition("|")
    if where == "header":
        value = headers.get(name)
    elif where == "body":
        value = data.get(name)
    elif where == "metadata":
        metadata = data.get("metadata")
        value = metadata.get(name) if isinstance(metadata, Mapping) else None
    else:
        value = None
    if isinstance(value, str) and value and parse:
        value = _parsed(value, parse)
    return value if isinstance(value, str) and value else None


def agent_session_id(data: Mapping[str, Any], profile: Profile | None) -> tuple[str, str] | None:
    """(the agent's own session id, its source), from the profile's sources in order."""
    if profile is None:
        return None
    headers = _headers(data)
    for source in profile.session_sources:
        value = _agent_source(data, headers, source)
        if value:
            return value, source
    return None


# -- what tells sessions and streams apart ---------------------------------------------


@lru_cache(maxsize=256)
def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _identity_segment(view: View, profile: Profile | None) -> str | None:
    """The head's first segment not shared by every agent of the kind, blanked, its start only."""
    shared = profile.shared_head if profile is not None else ()
    for segment in view.head:
        if not any(_re(pattern).match(segment) for pattern in shared):
            return _blanked(segment[:256])
    return None


def head_identity(view: View, profile: Profile | None) -> str:
    segment = _identity_segment(view, profile)
    return content_hash(segment) if segment is not None else ""


def _context_items(view: View) -> list[Any]:
    """The body's user, system and developer items before the first answer (the agent's context)."""
    items = []
    for item in view.body:
        if field_of(item, "role") not in ("user", "system", "developer"):
            break
        items.append(item)
    return items


def workspace(view: View, profile: Profile | None) -> str:
    """The workspace the request names (a cwd line in the head, else in the context items), or ''."""
    patterns = (*(profile.workspace if profile is not None else ()), *WORKSPACE)
    for segment in view.head:
        found = segment_memo(segment, ("session.workspace", patterns), lambda s: _search(s, patterns))
        if found:
            return found
    for item in _context_items(view):
        found = _search(_text_of(item), patterns)
        if found:
            return found
    return ""


def _search(text: str, patterns: tuple[str, ...]) -> str:
    for pattern in patterns:
        match = _re(pattern).search(text, 0, 200_000)
        if match:
            return match.group(1) if match.groups() else match.group(0)
    return ""


# A tool-call id that carries no randomness is the same in every session (Gemini CLI's calls come
# back from LiteLLM's translation as ``call_<tool name>``): under 8 characters once a known prefix
# and the tool's name are taken off.
_ID_PREFIX = re.compile(r"^(?:call|toolu|tooluse|fc|fn|tool)[_-]?")
_RANDOM_MIN = 8


def synthesized_call_id(call_id: str, name: Any = None) -> bool:
    """True for a tool-call id that no model generated (it tells no session from another)."""
    rest = _ID_PREFIX.sub("", call_id, count=1)
    if isinstance(name, str) and name:
        rest = rest.replace(name, "")
    return len(re.sub(r"[^0-9A-Za-z]", "", rest)) < _RANDOM_MIN


def _call_of(call: Any) -> tuple[str, Any, Any]:
    """(id, name, arguments) of a chat tool call, an Anthropic tool_use block or a Responses item."""
    function = field_of(call, "function")
    if function is not None:
        name, arguments = field_of(function, "name"), field_of(function, "arguments")
    else:
        name = field_of(call, "name")
        arguments = field_of(call, "arguments")
        if arguments is None:
            arguments = field_of(call, "input")
    call_id = field_of(call, "call_id") if field_of(call, "call_id") is not None else field_of(call, "id")
    return call_id if isinstance(call_id, str) else "", name, arguments


def first_answer(view: View, profile: Profile | None = None) -> str | None:
    """The identity of the first answer in the history (None: no answer yet): the first assistant
    turn after the conversation's first typed prompt (``first_typed``: never an agent's fixed reply
    to its context), up to the client's next item. Its tool-call ids (chat ``tool_calls``,
    Anthropic ``tool_use`` blocks, Responses ``function_call`` items) where a model generated them;
    where any is synthesized (``synthesized_call_id``), the calls' names and arguments with the
    answer's text; else its text."""
    typed = first_typed(view, profile)
    start = typed[0] + 1 if typed is not None else 0
    calls: list[tuple[str, Any, Any]] = []
    text: str | None = None
    started = False
    for item in view.body[start:]:
        role = field_of(item, "role")
        if _is_client_item(item):
            if started:  # the answer ends where the client's next item (a result, a prompt) begins
                break
            continue
        started = True
        calls.extend(_call_of(call) for call in field_of(item, "tool_calls") or ())
        content = field_of(item, "content")
        if isinstance(content, (list, tuple)):
            calls.extend(_call_of(part) for part in content
                         if field_of(part, "type") in ("tool_use", "server_tool_use"))
        if role is None and isinstance(field_of(item, "call_id"), str):
            calls.append(_call_of(item))  # a Responses function_call / custom_tool_call / local_shell_call item
        if text is None and role == "assistant":
            text = _text_of(item).strip()
        if role == "assistant" and field_of(item, "type") in (None, "message") and view.shape != "responses":
            break  # chat and Anthropic: one assistant message is the whole answer
    if not started:
        return None
    ids = [call_id for call_id, _, _ in calls if call_id]
    if ids and not any(synthesized_call_id(call_id, name) for call_id, name, _ in calls if call_id):
        return "ids:" + content_hash("\x00".join(ids))
    if calls:
        what = [[name, arguments] for _, name, arguments in calls]
        return "calls:" + content_hash(json.dumps([what, text or ""], sort_keys=True, ensure_ascii=False,
                                                  default=str))
    return "text:" + content_hash(text or "")


# -- look-alike sessions: which one a request continues (module doc; core.Stabilizer._generation) -----


def _is_client_item(item: Any) -> bool:
    role = field_of(item, "role")
    kind = field_of(item, "type")
    return role in ("user", "system", "developer", "tool") or (role is None and kind in (None, "message")) \
        or (isinstance(kind, str) and kind.endswith("_output"))


def answer_turns(view: View, profile: Profile | None = None) -> tuple[str, ...]:
    """One entry per answer after the first typed prompt (``first_typed``), in order: the answer's tool
    calls by name and arguments, as sent, then what the client sent after it: each tool result's
    digest (an identical result repeated at once counted once: Gemini CLI's resume replays each twice)
    and each prompt's text (its last text part, the typed one, its typed suffixes taken off: Qwen
    Code's reminders go before it, aider's edit-format reminder after). Ids and the answer's own text are left out (an agent
    may replay them otherwise), and so are the agent's own context messages with its fixed replies
    (aider's chat files). An answer is one assistant message (chat, Anthropic) or the model's items
    up to the client's next one (Responses)."""
    typed = first_typed(view, profile)
    if typed is None:
        return ()
    turns: list[str] = []
    calls: list[str] | None = None  # the open answer's calls, then what the client sent after it
    after: list[str] = []
    responses = view.shape == "responses"
    closed = False  # the open answer is complete (chat, Anthropic: one message); the client's items follow
    skip_reply = False  # the agent's context message came: its fixed reply is no answer

    def flush() -> None:
        turns.append("\x01".join(calls) + "\x03" + "\x01".join(after))

    for item in view.body[typed[0] + 1:]:
        if _is_client_item(item):
            if profile is not None and profile.context_messages and is_user_message(item) \
                    and _opens(item, profile.context_messages):
                skip_reply = True
                continue
            if calls is not None:
                closed = True
                for entry in _client_entries(item, profile):
                    if not after or after[-1] != entry:
                        after.append(entry)
            continue
        if skip_reply:
            skip_reply = False
            reply = _text_of(item).strip()
            if profile is not None and any(_re(pattern).fullmatch(reply) for pattern in profile.context_ack):
                continue
        if calls is not None and closed:
            flush()
            calls, after = None, []
        if calls is None:
            calls, closed = [], False
        calls.extend(_call_text(call) for call in field_of(item, "tool_calls") or ())
        content = field_of(item, "content")
        if isinstance(content, (list, tuple)):
            calls.extend(_call_text(part) for part in content if field_of(part, "type") in ("tool_use", "server_tool_use"))
        if field_of(item, "role") is None and isinstance(field_of(item, "call_id"), str):
            calls.append(_call_text(item))
        if not responses and field_of(item, "role") == "assistant":
            closed = True
    if calls is not None:
        flush()
    return tuple(turns)


def _client_entries(item: Any, profile: Profile | None) -> list[str]:
    """What a client item sent after an answer says of its session: the digest of each tool result it
    carries (a chat ``tool`` message, a Responses ``*_output`` item, an Anthropic user message's
    ``tool_result`` blocks), and a prompt's typed text: its last text part that is no transient part,
    its typed suffixes cut."""
    role = field_of(item, "role")
    if role == "tool" or (role is None and str(field_of(item, "type") or "").endswith("_output")):
        return [content_hash(field_of(item, "content") if role == "tool" else field_of(item, "output"))]
    content = field_of(item, "content")
    entries = []
    if isinstance(content, (list, tuple)):
        entries = [content_hash(field_of(part, "content")) for part in content if field_of(part, "type") == "tool_result"]
        transient = profile.transient_parts if profile is not None else ()
        texts = [t for part in content if field_of(part, "type") in TEXT_PART_TYPES
                 and isinstance(t := field_of(part, "text"), str)
                 and not any(_re(pattern).fullmatch(t) for pattern in transient)]
        text = texts[-1] if texts else ""  # the typed text comes last (an agent's reminders before it)
    else:
        text = content if isinstance(content, str) else ""
    text = _without_suffixes(text, profile).strip()
    if text and role in ("user", None):
        entries.append("p:" + content_hash(text))
    return entries


def _call_text(call: Any) -> str:
    _, name, arguments = _call_of(call)
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    return f"{name}\x02{arguments}"


def turns_digest(turns: Sequence[str], count: int) -> str:
    """The digest of the first ``count`` answers (``answer_turns``)."""
    return content_hash("\x00".join(turns[:count]))


def opening_digest(view: View, profile: Profile | None = None) -> str:
    """A digest of the conversation up to and with its first typed prompt (``first_typed``), marks
    ignored: a session's first request and the requests after it in that process share it."""
    typed = first_typed(view, profile)
    return content_hash(list(view.body[: typed[0] + 1])) if typed is not None else ""


def request_digest(view: View) -> str:
    """A digest of what a request shows (head, tools, body; marks ignored): the same request again has it."""
    return content_hash([list(view.head), view.tools, list(view.body)])


def derived_session_id(view: View, profile: Profile | None) -> str:
    """The anchor of a derived session: first user message, workspace, agent, head identity."""
    parts = (first_user_text(view, profile), workspace(view, profile), profile.name if profile is not None else "",
             head_identity(view, profile))
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"{DERIVED}:{digest}"


def _aux_stream(data: Mapping[str, Any], view: View, profile: Profile, named: bool) -> str | None:
    """The kind of auxiliary call this request is (a title, a summary, a compaction prompt), or None.
    (A request without tools is one only where no header or agent id already names its stream.)"""
    last_user = None
    for kind, spec in profile.aux_streams:
        where, _, pattern = spec.partition(":")
        if where == "head":
            if any(_re(pattern).match(segment) for segment in view.head[:3]):
                return kind
        elif where == "header":  # header:NAME:REGEX, searched in the header's value
            name, _, pattern = pattern.partition(":")
            value = _headers(data).get(name)
            if isinstance(value, str) and _re(pattern).search(value):
                return kind
        elif where == "last_user":  # at the start of the last user message, or of one of its text parts
            if last_user is None:
                item = next((item for item in reversed(view.body) if field_of(item, "role") == "user"), None)
                content = field_of(item, "content") if item is not None else None
                last_user = [_content_text(content), *(t for part in content if isinstance(
                    t := field_of(part, "text"), str))] if isinstance(content, (list, tuple)) \
                    else [_content_text(content)]
            if any(_re(pattern).match(text.lstrip()) for text in last_user):
                return kind
    if profile.main_has_tools and not view.tools and not named:
        return f"no-tools:{head_identity(view, profile)}"
    return None


def _first_prompt(view: View, profile: Profile) -> str | None:
    """The conversation's first prompt: the first typed text (``first_typed``), past the agent's
    context items that lead the conversation (user messages matching ``stream_by_first_prompt``,
    each followed by another user message: Codex's AGENTS.md and environment context)."""
    typed = first_typed(view, profile)
    if typed is None:
        return None
    index, content = typed
    body = view.body
    while True:
        text = _content_text(content).lstrip()
        following = index + 1 < len(body) and is_user_message(body[index + 1])
        if not following or not any(_re(pattern).match(text) for pattern in profile.stream_by_first_prompt):
            return text
        index += 1
        content = field_of(body[index], "content")


def session_stream(data: Mapping[str, Any], view: View, profile: Profile | None,
                   session: str | None = None) -> str | None:
    """The stream inside the session (``None``: the main stream, or no profile).

    A subagent: a subagent header names it, and an agent id that differs from the session id
    (``stream_sources``) tells spawned agents under one header apart; else, for agents whose
    subagents share the session id, the first head segment that is not shared by every agent
    of the kind (billing block, identity line), with the first prompt where the head is a
    subagent's (``subagent_head``: two runs of one type), or the conversation's first prompt after
    the agent's context items. An auxiliary call (``aux_streams``; a request without tools from an
    agent whose main loop always has tools) is a stream of its own, inside the subagent's
    stream where it is a subagent's. A subagent's head never reads as a change of the main
    head, and keeps its own pins.
    """
    if profile is None:
        return None
    headers = _headers(data)
    parts: list[str] = []
    for name in profile.subagent_headers:
        value = headers.get(name)
        if isinstance(value, str) and value:
            parts.append(f"agent:{value}")
            break
    for source in profile.stream_sources:
        value = _agent_source(data, headers, source)
        if value and value != session:
            parts.append(f"thread:{value}")
            break
    named = bool(parts)
    if not parts and profile.stream_by_head:
        segment = _identity_segment(view, profile)
        if segment is not None:
            parts.append(f"head:{content_hash(segment)}")
            if profile.subagent_head and any(_re(pattern).match(text) for pattern in profile.subagent_head
                                             for text in view.head[:3]):
                prompt = _first_prompt(view, profile)  # one subagent type, run twice: two tasks, two streams
                if prompt is not None:
                    parts.append(f"task:{content_hash(prompt)}")
    if not parts and profile.stream_by_first_prompt:
        prompt = _first_prompt(view, profile)
        if prompt is not None:
            parts.append(f"task:{content_hash(prompt)}")
    aux = _aux_stream(data, view, profile, named)
    if aux is not None:
        parts.append(f"aux:{aux}")
    return "\x00".join(parts) or None


def session_id(data: Mapping[str, Any], view: View, profile: Profile | None = None) -> tuple[str, str]:
    """(raw session id, how it was found); a derived id is the session's anchor (see the module doc)."""
    own = agent_session_id(data, profile)
    if own is not None:
        return own
    metadata = _metadata(data)
    for source, value in (
        ("litellm_session_id", data.get("litellm_session_id")),
        ("metadata.session_id", metadata.get("session_id")),
        ("prompt_cache_key", data.get("prompt_cache_key")),
    ):
        if isinstance(value, str) and value:
            return value, source
    headers = _headers(data)
    for name in SESSION_HEADERS:
        value = headers.get(name)
        if isinstance(value, str) and value:
            return value, f"header {name}"
    return derived_session_id(view, profile), DERIVED


# -- the one identity ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a request belongs to. ``key``: its journal (tenant, session, stream and, for a derived
    session, the first answer); ``fresh``: the first request of a derived session, run on an
    empty journal that is neither loaded nor saved; ``cache_key``: the same on every request of
    the stream, for provider hints; ``affinity_key``: the session's, for the router (None: a
    derived session with no user message, nothing to tell it by)."""

    key: str
    cache_key: str
    affinity_key: str | None
    session: str  # the raw id (never logged)
    source: str
    stream: str | None
    fresh: bool = False
    tenant: str = "local"
    answer: str | None = None  # a derived session's first answer (``first_answer``), part of its key


def identify(data: Mapping[str, Any], view: View, profile: Profile | None = None,
             api_key_hash: str | None = None, team_id: str | None = None) -> Identity:
    session, source = session_id(data, view, profile)
    stream = session_stream(data, view, profile, session)
    tenant = tenant_of(data, api_key_hash, team_id)
    scoped = session if stream is None else f"{session}\x00{stream}"
    cache_key = scoped_key(tenant, scoped)
    affinity_key = scoped_key(tenant, session)
    if source != DERIVED:
        return Identity(cache_key, cache_key, affinity_key, session, source, stream, tenant=tenant)
    if not any(field_of(item, "role") == "user" for item in view.body):
        affinity_key = None
    answer = first_answer(view, profile)
    if answer is None:
        # (no journal is kept under it: its own bytes name it, so two sessions' first requests never share a name)
        return Identity(scoped_key(tenant, f"{scoped}\x00first\x00{request_digest(view)}"), cache_key, affinity_key,
                        session, source, stream, fresh=True, tenant=tenant)
    return Identity(scoped_key(tenant, f"{scoped}\x00{answer}"), cache_key, affinity_key, session, source, stream,
                    tenant=tenant, answer=answer)


# -- a compacted session goes on -----------------------------------------------------------


def continuation_key(tenant: str, profile: Profile, workspace: str, summary: str) -> str:
    """Where a compaction leaves its session's journal for the session that goes on from its summary
    (``Profile.compaction_summary``): the tenant, the agent, the workspace (``workspace(...)``) and
    the summary's hash."""
    return scoped_key(tenant, f"continued\x00{profile.name}\x00{workspace}\x00{content_hash(summary.strip())}")


def compaction_answers(profile: Profile, answer: str) -> tuple[str, ...]:
    """The summaries an agent may make of its compaction call's ``answer``, one per form of
    ``Profile.compaction_summary`` (what that form drops taken out), as they would stand in the
    next request's first prompt (``continued_summary`` matches any form); none where empty."""
    found = (_re(drop).sub("", answer).strip() if drop else answer.strip() for _, drop in profile.compaction_summary)
    return tuple(dict.fromkeys(summary for summary in found if summary))


def continued_summary(view: View, profile: Profile | None) -> str | None:
    """The summary a request's first prompt carries where it goes on from a compaction
    (``Profile.compaction_summary``, group ``summary``), else None."""
    if profile is None or not profile.compaction_summary:
        return None
    typed = first_typed(view, profile)
    if typed is None:
        return None
    text = _content_text(typed[1])
    for pattern, _ in profile.compaction_summary:
        match = _re(pattern).fullmatch(text)
        if match and match.group("summary").strip():
            return match.group("summary").strip()
    return None


def tenant_of(data: Mapping[str, Any], api_key_hash: str | None = None, team_id: str | None = None) -> str:
    metadata = _metadata(data)
    team = team_id or metadata.get("user_api_key_team_id")
    if isinstance(team, str) and team:
        return f"team:{team}"
    key = api_key_hash or metadata.get("user_api_key_hash")
    if isinstance(key, str) and key:
        return f"key:{key}"
    return "local"


@lru_cache(maxsize=4096)
def scoped_key(tenant: str, session: str) -> str:
    return hashlib.sha256(f"{tenant}\x00{session}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
