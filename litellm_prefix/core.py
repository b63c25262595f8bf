"""The one transform behind both LiteLLM hooks: load the session journal, run the rules,
save the journal (compare-and-set), write the request back, report.

Pure decisions come from ``pipeline``; this module is the thin shell that does the I/O
(store, logs, JSONL, symlinks) and fails open: any internal error leaves the request
exactly as it came, and is logged (traceback frames only, never prompt text) and counted.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
import traceback
from collections import Counter
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache

from . import pipeline, wire
from .context import Context, Event, Target
from .journal import Journal
from .session import scoped_key, session_id, tenant_of
from .settings import Settings
from .store import build_store, journal_text_refs
from .symlink import ensure_symlink

logger = logging.getLogger("litellm_prefix")

SAVE_ATTEMPTS = 3
_BOOKKEEPING = frozenset({"texts", "need_texts", "drift", "head"})


def is_warmup_ping(data: Mapping[str, Any]) -> bool:
    """``max_tokens: 1`` (or its Responses/new-OpenAI names): a cache warm-up, not a turn."""
    return any(data.get(k) == 1 for k in ("max_tokens", "max_completion_tokens", "max_output_tokens"))


@dataclass
class Report:
    """What one request produced, kept briefly for the proxy's response header."""

    head: str
    drift: dict[str, Any] | None = None


class Stabilizer:
    def __init__(self, settings: Settings, store: Any = None) -> None:
        self.settings = settings
        self.stats: Counter[str] = Counter()
        if store is not None:  # an explicit store (tests, replays): shared by several stabilizers
            self.store = self.local_store = store
        else:
            self.store, self.local_store = build_store(settings, self.stats)
        self.reports: TTLCache[str, Report] = TTLCache(maxsize=4096, ttl=600)
        # litellm_call_ids this gateway already rewrote. The same call reaches the hooks again
        # after the pre-call hook (the deployment hook), on retries and fallbacks, and, for
        # /v1/messages served through another provider's API, translated into that API's
        # shape: history-dependent rules run once per call, on the client's own request.
        self.applied: TTLCache[str, bool] = TTLCache(maxsize=16384, ttl=900)
        self._linked: set[str] = set()
        self._log_lock = threading.Lock()

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
    ) -> MutableMapping[str, Any]:
        """Rewrite ``data`` in place (top-level fields only) and return it; never raises."""
        if not self.settings.enabled:
            return data
        try:
            adapter = wire.wire_for(data, call_type)
            if adapter is None:
                self.stats["skipped_shape"] += 1
                return data
            settings = self.settings.for_model(model_names, model_info)
            view = adapter.read(data)
            ctx = Context(settings=settings, target=target or Target(), client_body=view.body,
                          ping=is_warmup_ping(data))
            call_id = data.get("litellm_call_id") if isinstance(data.get("litellm_call_id"), str) else None
            if call_id and call_id in self.applied:
                new_view, _, events = pipeline.run(view, Journal(), ctx, pipeline.STATELESS_RULES)
                key, drift = None, None
            else:
                key = scoped_key(tenant_of(data, api_key_hash, team_id), session_id(data, view)[0])
                new_view, events = await self._run_with_journal(view, ctx, key)
                drift = next((e.data for e in events if e.kind == "drift"), None)
            updates = adapter.write(data, new_view) if new_view is not view else {}
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
        self.stats["requests"] += 1
        if updates:
            self.stats["rewritten"] += 1
        if call_id:
            self.applied[call_id] = True
        self._after(call_id, key, new_view, events, drift, settings, target)
        return data

    def stabilize_sync(self, data: MutableMapping[str, Any], call_type: Any = None, **kwargs: Any):
        """``stabilize`` for code without an event loop (scripts, tests); memory store only."""
        if self.store is not self.local_store:
            raise RuntimeError("stabilize_sync works with the in-memory store only; await stabilize() instead")
        return asyncio.run(self.stabilize(data, call_type, **kwargs))

    async def _run_with_journal(self, view, ctx: Context, key: str):
        """Load, run, compare-and-set; on a conflict reload and run again (bounded).

        The load brings the texts the journal refers to, so the rules run once and the
        shared store costs two round trips (load, save) per request. The save goes to
        the store that answered the load, never to the other one."""
        for attempt in range(SAVE_ATTEMPTS):
            loaded = await self.store.load(key)
            journal = Journal.from_json(json.loads(loaded.journal)) if loaded.journal else Journal()
            run_ctx = dataclasses.replace(ctx, texts={**ctx.texts, **loaded.texts}) if loaded.texts else ctx
            new_view, new_journal, events = pipeline.run(view, journal, run_ctx)
            needed = [h for e in events if e.kind == "need_texts" for h in e.data["hashes"]]
            if needed:  # a text the load did not bring: evicted, or one the journal does not refer to
                missing = [h for h in needed if h not in run_ctx.texts and h not in loaded.refs]
                texts = await self.store.get_texts(loaded, missing) if missing else {}
                run_ctx = dataclasses.replace(run_ctx, texts={**run_ctx.texts, **texts}, texts_fetched=True)
                new_view, new_journal, events = pipeline.run(view, journal, run_ctx)
            texts = {h: t for e in events if e.kind == "texts" for h, t in e.data["texts"].items()}
            if new_journal == journal:
                if texts:
                    await self.store.put_texts(loaded, texts)
                return new_view, events
            encoded = new_journal.encoded()
            if len(encoded) > ctx.settings.max_session_bytes:
                self.stats["journal_reset"] += 1
                logger.warning("litellm-prefix: session %s journal over maxSessionBytes (%d); re-seeded",
                               key[:16], len(encoded))
                new_journal = Journal(head=new_journal.head, requests=new_journal.requests)
                encoded = new_journal.encoded()
            saved = await self.store.save(key, loaded, encoded, journal_text_refs(new_journal), texts)
            if saved:
                return new_view, events
            if saved is None:  # the store that answered the load did not answer the save
                self.stats["save_unrecorded"] += 1
                return new_view, events
            self.stats["save_conflicts"] += 1
        self.stats["save_gave_up"] += 1
        logger.warning("litellm-prefix: session %s journal busy; this request's decisions were not recorded", key[:16])
        return new_view, events

    # -- edges: logs, symlinks, reports -----------------------------------------------

    def _after(self, call_id, key, view, events: list[Event], drift, settings: Settings, target: Target | None) -> None:
        try:
            rules = [e for e in events if e.kind not in _BOOKKEEPING]
            session = key[:16] if key else None
            head = next((e.data["fingerprint"] for e in events if e.kind == "head"), None)
            if call_id and head:
                self.reports[call_id] = Report(head=head)
            if rules and session:
                logger.debug("litellm-prefix: session %s rules %s", session, [e.kind for e in rules])
                self._jsonl({"event": "rewrite", "session": session, "rules": [{"rule": e.kind, **e.data} for e in rules]})
            if drift:
                drift = {**drift, "session": session, "model": (target.model if target else "")}
                self.stats["drift"] += 1
                logger.warning(
                    "litellm-prefix: head changed in session %s: %s at char %d (~token %d), ~%d tokens to prefill "
                    "again, %s -> %s",
                    session, ",".join(drift["changed"]), drift["first_diff_char"], drift["first_diff_token_est"],
                    drift["reprefill_tokens_est"], drift["before"], drift["after"],
                )
                self._jsonl(drift)
                if call_id:
                    self.reports[call_id].drift = drift
            if settings.create_symlink:
                for event in events:
                    if event.kind == "install_path":
                        self._link(event.data["root"], settings)
        except Exception as exc:
            self.stats["errors"] += 1
            logger.warning("litellm-prefix: reporting failed (%s)", type(exc).__name__)

    def _link(self, root: str, settings: Settings) -> None:
        if root in self._linked:
            return
        outcome = ensure_symlink(settings.resolved_stable_path, root)
        self._linked.add(root)
        record = {"event": "symlink", "stable_path": settings.resolved_stable_path, "target": root, "outcome": outcome}
        (logger.warning if outcome.startswith(("failed", "skipped")) else logger.info)(
            "litellm-prefix: symlink %s -> %s: %s", record["stable_path"], root, outcome
        )
        self._jsonl(record)

    def _jsonl(self, record: Mapping[str, Any]) -> None:
        path = self.settings.log
        if not path:
            return
        line = json.dumps(record, ensure_ascii=False, sort_keys=True, default=str)
        with self._log_lock, open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    def response_headers(self, call_id: str | None) -> dict[str, str]:
        report = self.reports.get(call_id) if call_id else None
        if report is None or not self.settings.drift_header:
            return {}
        headers = {"x-litellm-prefix-head": report.head}
        if report.drift:
            d = report.drift
            headers["x-litellm-prefix-drift"] = (
                f"changed={','.join(d['changed'])}; first_diff_char={d['first_diff_char']}; "
                f"reprefill_tokens_est={d['reprefill_tokens_est']}; before={d['before']}; after={d['after']}"
            )
        return headers

