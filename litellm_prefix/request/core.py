"""The one transform behind both LiteLLM hooks: load the session journal, run the rules,
save the journal (compare-and-set), write the request back, report.

Pure decisions come from ``pipeline``; this module is the thin shell that does the
store I/O and fails open: any internal error leaves the request exactly as it came, and
is logged (traceback frames only, never prompt text) and counted. Everything the
transform reports (logger, JSONL, response headers, metrics, symlinks, the measured
cache use of each call) goes to ``sinks``.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
import traceback
from collections.abc import Mapping, MutableMapping
from typing import Any

from cachetools import Cache, LRUCache

from ..caches import Digest, Expiring, StreamRecord, Streams, body_digests, body_json, orjson
from ..fleet.store import Store, build_store, journal_text_refs
from ..measure.metrics import Stats
from ..measure.sinks import Sinks
from ..settings import Settings
from . import pipeline, profiles, wire
from .appended import extends as appended_extends, extensible
from .context import Context
from .drift import head_record, tools_entry, tools_json
from .events import AgentSeen, Drift, Event, payload
from .journal import Journal, content_hash, unmarked
from .rules.billing import is_billing_block
from .rules.paths import link_target
from .sections import release_joined, text_digest
from .session import (
    DERIVED,
    answer_turns,
    compaction_answers,
    context_ends,
    continuation_key,
    continued_summary,
    first_user_text,
    identify,
    opening_digest,
    request_digest,
    scoped_key,
    turns_digest,
    workspace,
)
from .target import Target

logger = logging.getLogger("litellm_prefix")

SAVE_ATTEMPTS = 3
FIRST_BUCKET_SECONDS = 600  # a derived session's first journal waits this long (to 2x) for its second request
# The first-request entry two first requests of one derived key with other heads wrote (``_first_keys``):
# no second request starts from it.
AMBIGUOUS = Journal(trace=(0, "ambiguous", ""))
MAX_FORKS = 16  # later look-alike sessions one derived key keeps listed (``Stabilizer._generation``): the newest

# The top-level fields a wire adapter reads a request's view from.
_VIEW_FIELDS = ("messages", "tools", "system", "input", "instructions", "contents", "systemInstruction",
                "system_instruction")


# A journal is immutable: the text a session's journal was saved as decodes once, and each later
# request that loads it unchanged (most of them) costs a string lookup. The journal this process
# saved is remembered under the text it saved, so the next request of the session does not decode
# what was just encoded (``Journal.from_json`` of ``encoded()`` equals the journal: the tests check
# it on every save).
_DECODED: LRUCache[str, Journal] = LRUCache(maxsize=2048)
_DECODED_LOCK = threading.Lock()


def _decoded(encoded: str) -> Journal:
    with _DECODED_LOCK:
        journal = _DECODED.get(encoded)
    if journal is None:
        journal = Journal.decoded(encoded)
        _remember_decoded(encoded, journal)
    return journal


def _remember_decoded(encoded: str, journal: Journal) -> None:
    with _DECODED_LOCK:
        _DECODED[encoded] = journal


def _same(value: Any, written: Any) -> bool:
    return value is written or (type(value) is type(written) and value == written)


@dataclasses.dataclass(frozen=True, slots=True)
class Applied:
    """What the transform did to a call it rewrote: under which adapter, settings and target, the
    session key (the provider hints derive from it), the agent and the affinity key."""

    shape: str
    model_settings: Settings  # the model's settings, before the agent profile's presets
    settings: Settings  # with them
    target: Target
    key: str  # identify(...).cache_key
    agent: str | None
    affinity_key: str | None = None  # affinity.session_key of the client's request (no subagent stream)
    context_ends: tuple[int, ...] = ()  # Context.context_ends, for the hints of the deployment hook

    def holds(self, data: Mapping[str, Any], shape: str, settings: Settings, target: Target,
              written: tuple[Any, ...] | None) -> bool:
        """The request still carries exactly the objects written (``written``), for the same
        adapter, settings and target: the stateless rules (idempotent) would change nothing."""
        # (LiteLLM hands the deployment hook a copy of the tools list: equal, not the same object.)
        return (written is not None and shape == self.shape
                and all(_same(data.get(k), o) for k, o in zip(_VIEW_FIELDS, written))
                and target == self.target and (settings is self.model_settings or settings == self.model_settings))


def answer_text(response: Any) -> str | None:
    """The text of a call's answer: chat (``choices[0].message.content``, a string or text parts),
    Anthropic (``content`` text blocks) or Responses (``output`` message items); None where none."""
    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)

    def texts(content: Any) -> str | None:
        if isinstance(content, str):
            return content
        if isinstance(content, (list, tuple)):
            found = [t for part in content if isinstance(t := get(part, "text"), str)]
            return "".join(found) if found else None
        return None

    choices = get(response, "choices")
    if isinstance(choices, (list, tuple)) and choices:
        return texts(get(get(choices[0], "message"), "content"))
    output = get(response, "output")
    if isinstance(output, (list, tuple)):
        found = [t for item in output if get(item, "type") == "message" and (t := texts(get(item, "content")))]
        return "".join(found) if found else None
    return texts(get(response, "content"))


def _context_ends(data: Mapping[str, Any], view, profile) -> tuple[int, ...]:
    """``Context.context_ends``: ``session.context_ends`` in the request's own message list."""
    ends = context_ends(view, profile)
    if not ends:
        return ()
    items = data.get("messages") if isinstance(data.get("messages"), list) else data.get("input")
    offset = (len(items) - len(view.body)) if isinstance(items, list) else 0
    return tuple(offset + end for end in ends)


def call_id_of(data: Mapping[str, Any]) -> str | None:
    """The request's ``litellm_call_id`` (the same on every hook of one call), if it has one."""
    call_id = data.get("litellm_call_id")
    return call_id if isinstance(call_id, str) else None


def is_warmup_ping(data: Mapping[str, Any]) -> bool:
    """``max_tokens: 1`` (or its Responses/new-OpenAI names): a cache warm-up, not a turn."""
    return any(data.get(k) == 1 for k in ("max_tokens", "max_completion_tokens", "max_output_tokens"))


def _head_key(view, ctx: Context) -> tuple[Any, ...] | None:
    """The raw head parts by digest (``text_digest``: one ``memcmp`` for a known text), with the
    context the rules read; None where the tools' JSON is not exact (a marked tool)."""
    tools = None
    if view.tools:
        _, text, exact = tools_entry(view.tools, ctx)
        if not exact:
            return None
        tools = Digest.of(text)
    # Claude Code's billing block is new on every request: the billing rule sets it aside, and no
    # rule reads it (its size goes into an event); it is written back as this request sent it.
    return (view.shape, view.text_part, tuple(("billing", len(s)) if is_billing_block(s) else text_digest(s)
                                              for s in view.head), view.head_aside,
            view.head_dropped, tools, view.tools is None, ctx.settings, ctx.target, ctx.ping, ctx.texts_fetched)


def _script(items, inputs) -> tuple[Any, ...] | None:
    """Output items as runs of the input objects they are (by identity), ``(start, stop)`` slices
    of the inputs, or as JSON bytes of an item a rule made; None where an item cannot be encoded."""
    # By id for this call only (not a cache): ``inputs`` holds every input object meanwhile, so
    # an id names one object. An ``Identity`` per message would cost more than the script saves.
    position = {id(item): i for i, item in enumerate(inputs)}
    out: list[Any] = []
    for item in items:
        at = position.get(id(item))
        if at is not None and inputs[at] is item:
            last = out[-1] if out else None
            if type(last) is tuple and last[1] == at:
                out[-1] = (last[0], at + 1)
            else:
                out.append((at, at + 1))
            continue
        encoded = body_json((item,))
        if encoded is None:
            return None
        out.append(encoded)
    return tuple(out)


def _extended(script: tuple[Any, ...], count: int, new_count: int) -> tuple[Any, ...]:
    """``script`` (over ``count`` inputs) followed by inputs ``count`` to ``new_count`` as they came."""
    last = script[-1] if script else None
    if type(last) is tuple and last[1] == count:
        return (*script[:-1], (last[0], new_count))
    return (*script, (count, new_count))


def _replayed(script, inputs) -> tuple[Any, ...]:
    if len(script) == 1 and type(script[0]) is tuple and script[0] == (0, len(inputs)):
        return inputs if type(inputs) is tuple else tuple(inputs)
    out: list[Any] = []
    for part in script:
        if type(part) is tuple:
            out.extend(inputs[part[0]:part[1]])
        else:
            out.append(orjson.loads(part)[0])
    return tuple(out)


def _last_at(encoded: bytes, body) -> int | None:
    """Where the body's last message begins in its JSON ``encoded``."""
    last = body_json((body[-1],)) if body else None
    return None if last is None else len(encoded) - len(last) + 1


def _unmarked_digest(item: Any) -> int | None:
    """The hash of a message's JSON without its marker fields, keys sorted (Claude Code moves its
    ``cache_control`` mark to the newest message each turn, a marked string becoming one text
    part): two messages that differ only there have the same (``journal.unmarked``: the rules
    never read those fields)."""
    try:
        return hash(orjson.dumps(unmarked(item), option=orjson.OPT_SORT_KEYS))
    except TypeError:
        return None


def _body_record(encoded: bytes, body, as_sent: bool) -> dict[str, Any]:
    """A stream record's fields for the body whose JSON is ``encoded`` (``StreamRecord``): its
    size and digests, and, where the output carries its last message as sent, where that message
    begins and its digest without marks."""
    last = _last_at(encoded, body) if as_sent else None
    unmarked_last = _unmarked_digest(body[-1]) if last is not None else None
    if unmarked_last is None:
        last = None
    return {"size": len(encoded), "digests": body_digests(encoded, len(encoded) - 1 if last is None else last),
            "last": last, "last_unmarked": unmarked_last}


def _fork_key(family: str, name: str) -> str:
    return scoped_key(family, f"fork\x00{name}")


def _digest_of(view):
    """``request_digest(view)`` when first asked, then the same string (a request's whole JSON:
    ``_continued`` and ``_tracer`` may both want it)."""
    kept: list[str] = []

    def digest() -> str:
        if not kept:
            kept.append(request_digest(view))
        return kept[0]
    return digest


def _tracer(turns: tuple[str, ...], digest):
    """``journal`` -> the journal with its trace taken at this request where due: at 1, 2, 4, 8, ...
    answers (``Journal.trace``); the same object where not. ``digest``: the request's (``_digest_of``)."""
    count = len(turns)

    def advance(journal: Journal) -> Journal:
        reached = journal.trace[0] if journal.trace is not None else 0
        if count == 0 or count <= reached or (reached and count < 2 * reached):
            return journal
        return journal.replace(trace=(count, turns_digest(turns, count), digest()))
    return advance


def _same_output(a, b) -> bool:
    return (a.shape, a.head, a.tools, a.body, a.text_part, a.head_aside, a.head_dropped) == \
        (b.shape, b.head, b.tools, b.body, b.text_part, b.head_aside, b.head_dropped)


def _continued(candidates, view, ctx: Context, turns: tuple[str, ...], digest):
    """Of the journals of one derived key (``(key, journal, load, index)``, the first one index 0),
    the one this request goes on with, or None (``Stabilizer._generation``). ``digest``: the
    request's (``_digest_of``)."""
    count = len(turns)
    empty: list = []

    def unchanged(candidate) -> bool:
        """This request on that journal is what it is on none: no pin or note of it shows."""
        _, journal, loaded, _ = candidate
        if not empty:
            empty.append(pipeline.run(view, Journal(), ctx).view)
        run_ctx = ctx.but(texts={**ctx.texts, **loaded.texts}) if loaded.texts else ctx
        result = pipeline.run(view, journal, run_ctx)
        return not result.needed and _same_output(result.view, empty[0])

    fitting = []
    for candidate in candidates:
        reached, calls, request = candidate[1].trace or (0, "", "")
        if count < reached or (reached and turns_digest(turns, reached) != calls):
            continue  # fewer answers than that session had, or other ones
        if count <= max(reached, 1):  # no further than it got: that request again, or nothing of it shows
            if digest() != request and not unchanged(candidate):
                continue
        fitting.append(candidate)
    furthest = max(((c[1].trace or (0,))[0] for c in fitting), default=0)
    best = [c for c in fitting if (c[1].trace or (0,))[0] == furthest]  # the longest history it carries
    return best[0] if len(best) == 1 else None  # (two alike: neither's pins; one of its own)


def _time_free(journal: Journal) -> bool:
    """The rules read the clock only for learned volatile lines (``rules/volatile``)."""
    return journal.learned is None or not journal.learned.learned


class Stabilizer:
    def __init__(self, settings: Settings, store: Store | None = None, *, incremental: bool | None = None) -> None:
        self.settings = settings
        # The incremental request path (``_probe``): a stream's last request reused where every
        # input the rules read is the same, or where only messages no rule acts on were appended
        # to it (``appended``). On by default (setting ``incremental``; ``incremental=False`` is
        # the full path's twin the tests and benchmarks compare it with).
        if incremental is None:
            incremental = settings.incremental
        self.incremental = incremental
        # (setting ``incrementalStreams``: streams whose last request is remembered, caches.Streams)
        self.streams = Streams(min(settings.incremental_streams, settings.max_sessions))
        self.stats: Stats = Stats()  # mirrored to the litellm_prefix_internal_events metric
        if store is not None:  # an explicit store (tests, replays): shared by several stabilizers
            self.store = self.local_store = store
        else:
            self.store, self.local_store = build_store(settings, self.stats)
        self.sinks = Sinks(settings, self.stats)
        # litellm_call_ids this gateway already rewrote. The same call reaches the hooks again
        # after the pre-call hook (the deployment hook), on retries and fallbacks, and, for
        # /v1/messages served through another provider's API, translated into that API's
        # shape: history-dependent rules run once per call, on the client's own request.
        self.applied: Expiring = Expiring(maxsize=16384, seconds=900)
        # The view's objects as the transform wrote them, until the next hook of the call reads
        # them (milliseconds later): they hold the request's messages, so they are kept briefly.
        self.written: Expiring = Expiring(maxsize=256, seconds=30)
        # Compactions of derived sessions (``_compaction_links``): the journal key of each stream this
        # process served, by what its compaction call shares with it (tenant, agent, workspace, first
        # user message, first answer, stream); and each compaction call's, until its answer comes.
        self.anchors: Expiring = Expiring(maxsize=4096, seconds=settings.session_ttl_seconds)
        self.compactions: Expiring = Expiring(maxsize=256, seconds=900)
        self.clock = time.time  # the time rules see (Context.now); tests replace it

    # -- the transform -------------------------------------------------------------

    async def stabilize(
        self,
        data: MutableMapping[str, Any],
        call_type: Any = None,
        *,
        target: Target | None = None,
        model_names: tuple[str, ...] = (),
        model_info: Mapping[str, Any] | None = None,
        api_key_hash: str | None = None,
        team_id: str | None = None,
        hints: bool = False,
    ) -> MutableMapping[str, Any]:
        """Rewrite ``data`` in place (top-level fields only) and return it; never raises.

        ``hints``: also add provider cache hints (the deployment hook, which knows the target)."""
        if not self.settings.enabled:
            return data
        started = time.perf_counter()
        try:
            adapter = wire.wire_for(data, call_type, target)
            if adapter is None:
                self.stats["skipped_shape"] += 1
                return data
            settings = model_settings = self.settings.for_model(model_names, model_info)
            if not settings.enabled:  # switched off for this model (``models`` / ``model_info``)
                self.stats["disabled_for_model"] += 1
                return data
            call_id = call_id_of(data)
            applied = self.applied.get(call_id) if call_id else None
            written = self.written.pop(call_id, None) if applied is not None else None
            if applied is not None and applied.holds(data, adapter.name, settings, target or Target(), written):
                # The deployment hook on the very objects the pre-call hook wrote: nothing to redo.
                return self._unchanged_since_applied(data, applied, hints)
            view = adapter.read(data)
            # The agent's profile (data, not branches): its presets merge into this request's settings.
            profile = profiles.detect(data, view.head, settings, model_names)
            settings = profiles.apply(settings, profile)
            agent = profile.name if profile is not None else None
            ctx = Context(settings=settings, target=target or Target(), client_body=view.body,
                          ping=is_warmup_ping(data), context_ends=_context_ends(data, view, profile) if hints else ())
            if settings.create_symlink:  # first: the install-path rule rewrites only roots stablePath resolves to
                root = link_target(view, ctx)
                if root is not None:
                    self.sinks.link(root, settings)
            affinity_key = hint_key = None
            if applied is not None:
                new_view, _, events = pipeline.run(view, Journal(), ctx, pipeline.STATELESS_RULES)
                key, drift = None, None
            else:
                # One identity (session.identify): the journal's key (a subagent or an auxiliary call
                # is its own stream), the hints' key and the router's never disagree.
                identity = identify(data, view, profile, api_key_hash, team_id)
                seeds = self._first_keys(identity, view, profile)
                preloaded = advance = None
                if identity.source == DERIVED and not identity.fresh:
                    # Look-alike sessions of one derived key: which one this request goes on with.
                    turns = answer_turns(view, profile)
                    digest = _digest_of(view)
                    gen_key, preloaded, forked = await self._generation(identity.key, view, ctx, turns, digest)
                    if forked:
                        seeds = ()  # a new look-alike session starts from nothing of another's
                    identity = dataclasses.replace(identity, key=gen_key)
                    advance = _tracer(turns, digest)
                key, hint_key, affinity_key = identity.key, identity.cache_key, identity.affinity_key
                if profile is not None and profile.compaction_summary and identity.source == DERIVED:
                    seeds = (*self._compaction_links(call_id, identity, view, profile), *seeds)
                new_view, events = await self._run_with_journal(view, ctx, key, fresh=identity.fresh, seeds=seeds,
                                                                preloaded=preloaded, advance=advance)
                drift = payload(events, Drift)
            updates = adapter.write(data, new_view) if new_view is not view else {}
            release_joined()  # (the written request holds its head's strings)
        except Exception as exc:  # fail open: the gateway never breaks a call
            self.stats["errors"] += 1
            # Frames only: an exception's message may quote prompt text, which is never logged.
            logger.error(
                "litellm-prefix: internal error, request passed through unchanged (%s)\n%s",
                type(exc).__name__,
                "".join(traceback.format_tb(exc.__traceback__)),
            )
            return data
        data.update(updates)
        if hints:
            events = events + self._apply_hints(data, adapter.name, ctx, hint_key if applied is None else applied.key)
        self.stats["requests"] += 1
        if updates:
            self.stats["rewritten"] += 1
        if call_id:
            self.applied[call_id] = Applied(adapter.name, model_settings, settings, target or Target(),
                                            hint_key if applied is None else applied.key, agent,
                                            affinity_key if applied is None else applied.affinity_key,
                                            _context_ends(data, view, profile) if applied is None
                                            else applied.context_ends)
            self.written[call_id] = tuple(data.get(k) for k in _VIEW_FIELDS)
        if agent:  # reported like a rule's event: every sink reads the agent from the events
            events = [Event("agent", AgentSeen(agent)), *events]
        self.sinks.transformed(call_id, key, data, adapter.name, events, drift, settings, target,
                               model_group=next((n for n in model_names if n), ""),
                               seconds=time.perf_counter() - started, sessions_held=self._sessions_held,
                               tools_text=tools_json(new_view, ctx) if key and new_view.tools else None)
        return data

    def _unchanged_since_applied(self, data, applied: Applied, hints: bool) -> MutableMapping[str, Any]:
        self.stats["requests"] += 1
        self.stats["unchanged_since_applied"] += 1
        if hints:
            ctx = Context(settings=applied.settings, target=applied.target, context_ends=applied.context_ends)
            self._apply_hints(data, applied.shape, ctx, applied.key)
        # Nothing to report: the pre-call hook reported this call (its head, drift, rules, shape),
        # and a sink reports an unnamed session's hint events nowhere (``Sinks.transformed``).
        return data

    def _apply_hints(self, data, shape: str, ctx: Context, key: str) -> list[Event]:
        """Provider cache hints on the stabilized request (rules/hints.py), for the session's
        ``identify(...).cache_key``; fails open on its own."""
        if not pipeline.hints_apply(ctx):  # a target that reads no hint: nothing to read or write
            return []
        try:
            updates, events = pipeline.run_hints(data, shape, ctx.but(session_key=key))
        except Exception as exc:
            self.stats["errors"] += 1
            logger.error("litellm-prefix: internal error in provider hints, none added (%s)\n%s",
                         type(exc).__name__, "".join(traceback.format_tb(exc.__traceback__)))
            return []
        if updates:
            data.update(updates)
            self.stats["hinted"] += 1
        return events

    def stabilize_sync(self, data: MutableMapping[str, Any], call_type: Any = None, **kwargs: Any):
        """``stabilize`` for code without an event loop (scripts, tests); memory store only."""
        if self.store is not self.local_store:
            raise RuntimeError("stabilize_sync works with the in-memory store only; await stabilize() instead")
        try:
            return asyncio.run(self.stabilize(data, call_type, **kwargs))
        finally:
            self.sinks.flush()  # a script reads the JSONL log next

    def _compaction_links(self, call_id: str | None, identity, view, profile) -> tuple[str, ...]:
        """A derived session's compaction (``Profile.compaction_summary``): the session that goes on
        from the summary has another first prompt, so another key. The compaction call's answer
        leaves a copy of the compacted stream's journal under ``continuation_key`` (``answered``),
        and the request that carries that summary in its first prompt starts from it (the seed
        returned), where it has no journal of its own yet. The compaction call and the stream it
        compacts differ in their head (the summarizer's), so the stream's key is found by what they
        share: this process must have served the stream's last request (an idle gateway's or
        another replica's compaction leaves no copy: the session starts again, as without it)."""
        ws = workspace(view, profile)
        base = identity.stream
        compaction = bool(base) and base.rsplit("\x00", 1)[-1] == "aux:compaction"
        if compaction:
            base = base.rsplit("\x00", 1)[0] if "\x00" in base else None
        if not compaction and base is not None and base.rsplit("\x00", 1)[-1].startswith("aux:"):
            return ()  # another auxiliary call: no stream of its own to compact
        anchor = (identity.tenant, profile.name, ws, content_hash(first_user_text(view, profile)), identity.answer, base)
        if compaction:
            stream = self.anchors.get(anchor)
            if stream is not None and call_id:
                self.compactions[call_id] = (stream, identity.tenant, profile, ws)
            return ()
        if not identity.fresh:
            self.anchors[anchor] = identity.key
            summary = continued_summary(view, profile)
            if summary is not None:
                return (continuation_key(identity.tenant, profile, ws, summary),)
        return ()

    async def answered(self, kwargs: Mapping[str, Any], response: Any) -> None:
        """A compaction call's answer: its session's journal copied to where the session goes on
        (``_compaction_links``); fails open (a miss, never a broken call)."""
        slo = kwargs.get("standard_logging_object")
        call_id = kwargs.get("litellm_call_id") or (slo.get("litellm_call_id") if isinstance(slo, Mapping) else None)
        pending = self.compactions.pop(call_id, None) if isinstance(call_id, str) else None
        if pending is None:
            return
        try:
            stream, tenant, profile, ws = pending
            summaries = compaction_answers(profile, answer_text(response) or "")
            if not summaries:
                return
            loaded = await self.store.load(stream)
            if not loaded.journal:
                return
            refs = journal_text_refs(_decoded(loaded.journal))
            for summary in summaries:
                link = continuation_key(tenant, profile, ws, summary)
                there = await self.store.load(link)
                if there.journal is None:
                    await self.store.save(link, there, loaded.journal, refs, dict(loaded.texts))
                    self.stats["compaction_links"] += 1
        except Exception as exc:
            self.stats["errors"] += 1
            logger.error("litellm-prefix: internal error keeping a compacted session (%s)\n%s",
                         type(exc).__name__, "".join(traceback.format_tb(exc.__traceback__)))

    def _first_keys(self, identity, view, profile) -> tuple[str, ...]:
        """Where a derived session's first request leaves its journal for the session's second one
        (newest first): under the stream's key, the first request's messages up to its typed prompt
        (``session.opening_digest``: the agent's context with its date and folder tree, for the agents
        that put them there) and a 10-minute time bucket. The first request starts from an empty
        journal (it may share its derived key with an older session); the second, the first to carry
        an answer and so its own key, starts from what its first request decided (its pins, the lines
        to learn) when it finds no journal of its own and comes within 10 to 20 minutes. A one-off
        resumed days later starts empty: no older session's decisions leak in; nor do those of a
        look-alike session started meanwhile with another context. The head is part of the key too
        (the agents that put a date there: pi, aider), and a second entry without it serves the second
        request whose head moved since the first (a date at midnight), unless two first requests of
        other heads left theirs there (``AMBIGUOUS``: then it starts empty)."""
        if identity.source != DERIVED:
            return ()
        bucket = int(self.clock() // FIRST_BUCKET_SECONDS)
        opening = opening_digest(view, profile)
        head = content_hash(list(view.head))
        exact = tuple(scoped_key(identity.cache_key, f"first\x00{b}\x00{opening}\x00{head}") for b in (bucket, bucket - 1))
        loose = tuple(scoped_key(identity.cache_key, f"first\x00{b}\x00{opening}") for b in (bucket, bucket - 1))
        return (*exact, *loose)

    async def _generation(self, family: str, view, ctx: Context, turns: tuple[str, ...], digest):
        """(journal key, its load or None, whether it is a new look-alike session) for a derived
        session's request that carries an answer (session.py, "look-alike sessions").

        ``family`` (the derived key) holds the first session's journal and the names of the later
        ones (``Journal.forks``), each under a key of its own. A request goes on with the journal
        whose recorded answers (``Journal.trace``) it carries, the same calls, and no fewer; where
        it is no further than the journal got (a session's second request, a short first answer),
        only where it is the very request that got there again, or where that journal changes
        nothing in it. Of several, the furthest (the longest recorded history this request
        carries); where two are alike that far, or none fits, a new session of its own (its pins
        its own values), recorded in the first journal's ``forks``: a new session never
        inherits another's pins or notes, whatever it costs in prefill. The first journal costs the
        load the request makes anyway; the later ones one load each, all at once (an expired one is
        dropped from the list when the next is added; ``MAX_FORKS`` at most, the newest)."""
        ctx = ctx.but(now=self.clock())
        for _ in range(SAVE_ATTEMPTS):
            loaded = await self.store.load(family)
            if loaded.journal is None:
                return family, loaded, False
            first = _decoded(loaded.journal)
            forks = [_fork_key(family, name) for name in first.forks]
            loads = await asyncio.gather(*(self.store.load(fork) for fork in forks)) if forks else []
            candidates = [(family, first, loaded, 0)]
            live = []  # the forks whose journal is still there (not expired)
            for index, (name, fork, there) in enumerate(zip(first.forks, forks, loads), 1):
                if there.journal:
                    candidates.append((fork, _decoded(there.journal), there, index))
                    live.append(name)
            chosen = _continued(candidates, view, ctx, turns, digest)
            if chosen is not None:
                return chosen[0], chosen[2], False
            name = str(max((int(n) for n in first.forks if n.isdigit()), default=0) + 1)
            if len(live) >= MAX_FORKS:  # the oldest look-alike's journal is no longer found (a miss there, nothing false)
                self.stats["forks_full"] += 1
                live = live[len(live) - MAX_FORKS + 1:]
            updated = first.replace(forks=(*live, name))
            encoded = updated.encoded()
            saved = await self.store.save(family, loaded, encoded, journal_text_refs(updated), {})
            if saved is False:
                continue  # the first journal changed meanwhile: decide again on what it holds now
            if saved:
                _remember_decoded(encoded, updated)
            self.stats["sessions_forked"] += 1
            return _fork_key(family, name), None, True
        return family, None, False

    async def _run_with_journal(self, view, ctx: Context, key: str, fresh: bool = False,
                                seeds: tuple[str, ...] = (), preloaded=None, advance=None):
        """Load, run, compare-and-set; on a conflict reload and run again (bounded).

        The load brings the texts the journal refers to, so the rules run once and the
        shared store costs two round trips at most (load; a save only when a decision changed). The save goes to
        the store that answered the load, never to the other one. ``fresh``: the first request of
        a derived session (session.py) runs on an empty journal, neither loaded nor saved.
        ``preloaded``: the first attempt's load, already made (``_generation``); ``advance``: the
        journal as this request leaves it besides the rules' decisions (a derived session's trace)."""
        ctx = ctx.but(now=self.clock())  # the time history-dependent rules see
        if fresh:  # run on an empty journal; kept for the session's second request only (seeds[0])
            result = pipeline.run(view, Journal(), ctx)
            new_view, new_journal, events = result
            if seeds and new_journal != Journal():
                texts = result.texts
                exact, loose = seeds[0], seeds[len(seeds) // 2]
                for _ in range(SAVE_ATTEMPTS):
                    loaded = await self.store.load(exact)
                    if await self.store.save(exact, loaded, new_journal.encoded(),
                                             journal_text_refs(new_journal), texts) is not False:
                        break
                for _ in range(SAVE_ATTEMPTS):  # the entry without the head: one first request's, or none
                    loaded = await self.store.load(loose)
                    if loaded.journal is not None and _decoded(loaded.journal) in (new_journal, AMBIGUOUS):
                        break
                    kept = new_journal if loaded.journal is None else AMBIGUOUS
                    if await self.store.save(loose, loaded, kept.encoded(), journal_text_refs(kept),
                                             texts if kept is new_journal else {}) is not False:
                        break
            return new_view, events
        for attempt in range(SAVE_ATTEMPTS):
            loaded = preloaded if preloaded is not None and attempt == 0 else await self.store.load(key)
            journal = _decoded(loaded.journal) if loaded.journal else Journal()
            seeded = False
            journal_in = loaded.journal  # the journal text the rules run on
            if loaded.journal is None and loaded.version == 0:
                for seed in seeds:  # the second request of a derived session: its first one's decisions
                    first = await self.store.load(seed)
                    if first.journal and _decoded(first.journal) != AMBIGUOUS:
                        journal, seeded, journal_in = _decoded(first.journal), True, first.journal
                        loaded = dataclasses.replace(loaded, texts={**first.texts, **loaded.texts})
                        break
            run_ctx = ctx.but(texts={**ctx.texts, **loaded.texts}) if loaded.texts else ctx
            # (a seeded request reuses nothing: its journal is not the one its key holds yet)
            probe = self._probe(key, view, run_ctx, loaded, reuse=not seeded) if self.incremental else None
            if probe is not None and probe[0] is not None:
                # The stream's last request again, or it with messages appended that change no
                # decision, on the journal it ran on: its output (the run left the journal as it
                # was: there is nothing to save but a derived session's trace where due, which no
                # rule reads, so the stream's record holds on the saved journal).
                new_view, events = probe[0], probe[1]
                new_journal, texts, retag = journal, pipeline.texts_of(events), True
            else:
                result = pipeline.run(view, journal, run_ctx)
                new_view, new_journal, events = result
                needed = result.needed
                if probe is not None and not needed:
                    self._remember(key, probe, view, loaded, journal, result, run_ctx, journal_in)
                if needed:  # a text the load did not bring: evicted, or one the journal does not refer to
                    missing = [h for h in needed if h not in run_ctx.texts and h not in loaded.refs]
                    texts = await self.store.get_texts(loaded, missing) if missing else {}
                    run_ctx = run_ctx.but(texts={**run_ctx.texts, **texts}, texts_fetched=True)
                    result = pipeline.run(view, journal, run_ctx)
                    new_view, new_journal, events = result
                texts = result.texts
                # the rules decided nothing: what is saved differs from what they ran on by no input of theirs
                retag = new_journal == journal
            if advance is not None:
                new_journal = advance(new_journal)
            if new_journal == journal and not seeded:  # (a seeded journal is saved under its own key)
                if texts:
                    await self.store.put_texts(loaded, texts)
                return new_view, events
            encoded = new_journal.encoded()
            if len(encoded) > ctx.settings.max_session_bytes:
                self.stats["journal_reset"] += 1
                logger.warning("litellm-prefix: session %s journal over maxSessionBytes (%d); re-seeded",
                               key[:16], len(encoded))
                new_journal = Journal(head=new_journal.head, requests=new_journal.requests, trace=new_journal.trace,
                                      forks=new_journal.forks)
                encoded = new_journal.encoded()
                retag = False
            saved = await self.store.save(key, loaded, encoded, journal_text_refs(new_journal), texts)
            if saved is not False:  # the next load of this session brings this text back
                _remember_decoded(encoded, new_journal)
            if saved and retag:  # only the trace or the seed's key is new: the stream's record holds
                self.streams.retag(key, journal_in, encoded)
            if saved:
                return new_view, events
            if saved is None:  # the store that answered the load did not answer the save
                self.stats["save_unrecorded"] += 1
                return new_view, events
            self.stats["save_conflicts"] += 1
        self.stats["save_gave_up"] += 1
        logger.warning("litellm-prefix: session %s journal busy; this request's decisions were not recorded", key[:16])
        return new_view, events

    # -- the incremental path ------------------------------------------------------------

    def _probe(self, key: str, view, ctx: Context, loaded, reuse: bool = True):
        """``(view, events, head key, body JSON)``: the remembered output where this request
        equals the stream's last one in every input the rules read (head parts, journal,
        context, and the body, or the body with messages appended that change no decision:
        ``appended``), else ``(None, None, head key, body JSON)``; None where nothing can be
        remembered for it."""
        head = _head_key(view, ctx)
        encoded = body_json(view.body) if head is not None else None
        if encoded is None:
            self.streams.drop(key)
            return None
        record = self.streams.get(key) if reuse else None
        if record is None or record.head != head or record.journal_in != loaded.journal \
                or record.texts != loaded.texts.keys():
            return None, None, head, encoded
        size, count = record.size, len(view.body)
        cut = size - 1 if record.last is None else record.last
        moved = False
        if count == record.count and len(encoded) == size and body_digests(encoded, cut) == record.digests:
            appended = False
        elif count > record.count and record.tail is not None and len(encoded) > size \
                and appended_extends(record.tail, view.body[record.count:], view.body, ctx) \
                and hash(encoded[:cut]) == record.digests[0] \
                and (encoded[size - 1] == 0x2C  # (where the new ones begin)
                     and hash(encoded[cut:size - 1]) == record.digests[1]
                     or (moved := record.last is not None
                         and _unmarked_digest(view.body[record.count - 1]) == record.last_unmarked)):
            appended = True
        else:
            return None, None, head, encoded
        segments, tools, body, events, aside, dropped = record.result
        if segments is None:  # the rules changed nothing
            new_view = view
        else:
            if appended:
                body = _extended(body, record.count, count)
            new_view = view.replace(segments=segments, tools=None if tools is None else _replayed(tools, view.tools),
                                    body=_replayed(body, view.body), head_aside=aside, head_dropped=dropped)
        out = new_view.body
        if appended:
            self.stats["incremental_appended"] += 1
            serial = self.streams.put(key, dataclasses.replace(
                record, count=count, result=(segments, tools, body, events, aside, dropped),
                **_body_record(encoded, view.body, True)))
            # the last output again, but for the appended messages (and the last one, its marks moved)
            same = len(out) - (count - record.count) - moved
        else:
            self.stats["incremental_reused"] += 1
            serial, same = record.serial, len(out)
        self.sinks.expect_same(key, out[-1] if out else None, record.serial, same, len(out), serial)
        return new_view, list(events), head, encoded

    def _remember(self, key: str, probe, view, loaded, journal: Journal, result, ctx: Context,
                  journal_in: str | None) -> None:
        """Keep what this request produced for the stream's next one, where reusing it is exact:
        the run left the journal as loaded (so the same inputs give the same output) and read
        no clock; else forget the stream's record."""
        new_view = result.view
        # A run that changed the journal is not kept for the next request, though its bytes would
        # be (a retry on the saved journal writes them again): the same request on the saved
        # journal reports other events (no drift, no texts to keep, no learn or note action), and
        # the events reach the sinks too. Tried and measured: the turn after a save would take
        # this path (0.59-0.73 -> ~0.45 ms warm), and tests/unit/request/test_incremental.py's property test
        # found the events differ on its first example.
        reusable = result.journal == journal and _time_free(journal)
        tools = None if new_view.tools is None else _script(new_view.tools, view.tools or ())
        body = _script(new_view.body, view.body) if reusable else None
        if body is None or (new_view.tools is not None and tools is None) \
                or new_view.shape != view.shape or new_view.text_part != view.text_part:
            self.streams.drop(key)
            self.sinks.expect_same(key, None, None, 0, 0, None)
            return
        kept = (None, None, None, tuple(result.events), None, None) if new_view is view else \
            (new_view.segments, tools, body, tuple(result.events), new_view.head_aside, new_view.head_dropped)
        as_sent = new_view is view or (body and type(body[-1]) is tuple and body[-1][1] == len(view.body))
        serial = self.streams.put(key, StreamRecord(
            head=probe[2], count=len(view.body), journal_in=journal_in, texts=frozenset(loaded.texts),
            tail=extensible(view.body, journal, ctx), result=kept, **_body_record(probe[3], view.body, as_sent)))
        # measured whole (nothing proved equal), and the record it leaves named for the next request
        out = new_view.body
        self.sinks.expect_same(key, out[-1] if out else None, None, 0, len(out), serial)

    # -- edges: everything reported goes to sinks ---------------------------------------

    def _sessions_held(self) -> int | None:
        """Sessions in the local store, for the gauge: asked only where a request is counted, and
        without ``TTLCache.__len__``'s walk over the expired entries (purged at the next write)."""
        journals = getattr(self.local_store, "_journals", None)
        if journals is None:
            return None
        return Cache.__len__(journals) if isinstance(journals, Cache) else len(journals)

    def affinity_key(self, call_id: str) -> tuple[bool, str | None]:
        """Whether the transform took this call, and the affinity key it computed on the client's request."""
        applied = self.applied.get(call_id)
        return (False, None) if applied is None else (True, applied.affinity_key)

    def response_headers(self, call_id: str | None) -> dict[str, str]:
        return self.sinks.response_headers(call_id)

    def observed_headers(self, data: Mapping[str, Any], request_headers: Mapping[str, Any] | None) -> dict[str, str]:
        """The response headers of a request no transform took: a pass-through route's raw provider
        body (chat, Anthropic, Responses or Gemini shaped), seen only by the response-headers hook.
        The head as sent (``x-litellm-prefix-head``, its fingerprint) and the agent its headers or
        head show; nothing is rewritten, recorded or logged. Empty where off or the shape is unknown."""
        if not self.settings.enabled or not self.settings.drift_header:
            return {}
        adapter = wire.wire_for(data)
        view = adapter.read(data) if adapter is not None else None
        if view is None or not view.head:
            return {}
        headers = {str(k).lower(): v for k, v in (request_headers or {}).items()}
        model = data.get("model") if isinstance(data.get("model"), str) else ""
        profile = profiles.detect({"proxy_server_request": {"headers": headers}}, view.head, self.settings, (model,))
        record, _ = head_record(view)
        out = {"x-litellm-prefix-head": record.fingerprint}
        if profile is not None:
            out["x-litellm-prefix-agent"] = profile.name
        return out

    def completed(self, kwargs: Mapping[str, Any], response: Any) -> dict[str, Any] | None:
        """The success callback's half: measured cache use of the call, classified (see ``sinks``)."""
        # Answered: no later hook of the call reads the objects it wrote (a translated call's second
        # deployment hook, a Gemini route's inner call, a call no retry followed kept them 30-60 s).
        call_id = call_id_of(kwargs)
        if call_id is not None:
            self.written.pop(call_id, None)
        return self.sinks.completed(kwargs, response)
