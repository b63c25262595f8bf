"""The one transform behind both LiteLLM hooks: read, run the rules, write back, observe drift.

Pure decisions come from ``pipeline`` and ``drift``; this module is the thin shell that
holds the session record, writes logs and symlinks, and fails open: any internal
error leaves the request exactly as it came, and is logged and counted.
"""
from __future__ import annotations

import json
import logging
import threading
import traceback
from collections import Counter
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from cachetools import TTLCache

from . import pipeline, wire
from .context import Context, Event, Target
from .drift import HeadSnapshot, drift_event
from .session import SessionHeads, scoped_key, session_id, tenant_of
from .settings import Settings
from .symlink import ensure_symlink

logger = logging.getLogger("litellm_prefix")


def is_warmup_ping(data: Mapping[str, Any]) -> bool:
    """``max_tokens: 1`` (or its Responses/new-OpenAI names): a cache warm-up, not a turn."""
    return any(data.get(k) == 1 for k in ("max_tokens", "max_completion_tokens", "max_output_tokens"))


@dataclass
class Report:
    """What one request produced, kept briefly for the proxy's response header."""

    head: str
    drift: dict[str, Any] | None = None
    rewrites: dict[str, int] = field(default_factory=dict)


class Stabilizer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.heads = SessionHeads(settings.max_sessions, settings.session_ttl_seconds)
        self.reports: TTLCache[str, Report] = TTLCache(maxsize=4096, ttl=600)
        self.stats: Counter[str] = Counter()
        self._linked: set[str] = set()
        self._log_lock = threading.Lock()
        if settings.store != "memory":
            logger.warning(
                "litellm-prefix: store %s is not available in this version; using the in-memory store",
                settings.store.split("@")[-1],
            )

    # -- the transform -------------------------------------------------------------

    def stabilize(
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
            target = target or Target()
            settings = self.settings.for_model(model_names, model_info)
            view = adapter.read(data)
            new_view, events = pipeline.run(view, Context(settings=settings, target=target))
            updates = adapter.write(data, new_view) if new_view is not view else {}
            snapshot = HeadSnapshot.of(new_view)
            sid, _ = session_id(data, new_view)
            key = scoped_key(tenant_of(data, api_key_hash, team_id), sid)
            previous = self.heads.observe(key, snapshot, record=not is_warmup_ping(data))
            drift = (
                drift_event(previous, snapshot, new_view, session=key[:16], model=target.model or "")
                if previous is not None
                else None
            )
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
        self._after(data, key, snapshot, events, drift, settings)
        return data

    # -- edges: logs, symlinks, reports -----------------------------------------------

    def _after(self, data, key: str, snapshot: HeadSnapshot, events: list[Event], drift, settings: Settings) -> None:
        try:
            rewrites = Counter(e.kind for e in events)
            call_id = data.get("litellm_call_id")
            if isinstance(call_id, str):
                earlier = self.reports.get(call_id)
                self.reports[call_id] = Report(
                    head=snapshot.fingerprint,
                    drift=drift or (earlier.drift if earlier else None),
                    rewrites=dict(rewrites),
                )
            if events:
                logger.debug("litellm-prefix: session %s rewrites %s", key[:16], dict(rewrites))
                self._jsonl({"event": "rewrite", "session": key[:16], "rules": [self._event_json(e) for e in events]})
            if drift:
                self.stats["drift"] += 1
                logger.warning(
                    "litellm-prefix: head changed in session %s: %s at char %d (~token %d), ~%d tokens to prefill "
                    "again, %s -> %s",
                    drift["session"],
                    ",".join(drift["changed"]),
                    drift["first_diff_char"],
                    drift["first_diff_token_est"],
                    drift["reprefill_tokens_est"],
                    drift["before"],
                    drift["after"],
                )
                self._jsonl(drift)
            if settings.create_symlink:
                for event in events:
                    if event.kind == "install_path":
                        self._link(event.data["root"], settings)
        except Exception as exc:
            self.stats["errors"] += 1
            logger.warning("litellm-prefix: reporting failed (%s)", type(exc).__name__)

    @staticmethod
    def _event_json(event: Event) -> dict[str, Any]:
        return {"rule": event.kind, **event.data}

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
