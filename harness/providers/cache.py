"""The provider-neutral prompt-cache accounting of the provider emulators: pure where it can be.

A request becomes a ``Prompt``: its cache *blocks* in the provider's cache order (the wire
modules decide what a block is), each with

- ``hash``: of the block's canonical JSON (keys sorted, no spaces) with every cache mark removed
  (``cache_control``, ``prompt_cache_breakpoint``): a mark is no part of the rendered tokens. The
  wire modules normalise a string content to the one text block it renders as, so
  ``"content": "x"`` and ``[{"type": "text", "text": "x"}]`` hash alike;
- ``prefix``: the hash of every block up to and including this one (the cache key of the prefix
  that ends at this block boundary);
- ``tokens``: a deterministic estimate, UTF-8 bytes of the canonical JSON // 4, at least 1; an
  image counts a fixed estimate of its family (``IMAGE_TOKENS``) in place of its bytes;
- ``ttl``: the block's cache mark, ``None`` or the entry's lifetime in seconds.

Each rule set is a frozen dataclass with one method, ``charge(blocks, store, scope, now)``,
returning ``Charge(read, written, input)``: tokens read from the cache, tokens written by TTL
(``{300: n, 3600: m}``), tokens processed uncached, their sum the prompt's tokens. It updates the
``Store`` passed in (entries by scope: model, API key, machine) and nothing else, so a bench can
re-run the same accounting on other block lists (``replay``: an ideal client, the same blocks with
other marks, ``with_marks``). Time is the caller's ``now``: the emulator's ``Clock`` (real time plus
an offset the bench advances).

The rules and their public sources are in the docstrings of the rule sets below and of the wire
modules (anthropic.py, openai.py, gemini.py).
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, NamedTuple

MARK_KEYS = frozenset({"cache_control", "prompt_cache_breakpoint"})
HASH_CHARS = 20  # 80 bits: the record holds whole hashes, and a replay of records matches the live run
# Fixed image estimates (our choice: the emulators do not decode images). Anthropic: width x height
# / 750 for an image of about 1,092 x 1,092 px, the largest it takes without resizing (Anthropic's
# vision docs); OpenAI: 85 + 170 x 4 tiles, a 1,024 x 1,024 image at high detail (OpenAI's vision
# guide); Gemini: 258, an image of at most 384 px on both sides (Gemini's token docs).
IMAGE_TOKENS = {"anthropic": 1600, "openai": 765, "gemini": 258}


def without_marks(value: Any) -> Any:
    """``value`` with every cache-mark key removed, at any depth."""
    if isinstance(value, dict):
        return {k: without_marks(v) for k, v in value.items() if k not in MARK_KEYS}
    if isinstance(value, list):
        return [without_marks(v) for v in value]
    return value


def canonical(value: Any) -> str:
    """The bytes a block is hashed and counted by: sorted keys, no spaces, marks removed."""
    return json.dumps(without_marks(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_CHARS]


def estimate_tokens(text: str) -> int:
    return max(1, len(text.encode("utf-8")) // 4)


@dataclass(frozen=True)
class Part:
    """One block as a wire module sees it: where it is, its content (marks may stay in: they are
    removed before hashing), its mark, and its token estimate (None: ``estimate_tokens`` of its
    canonical JSON)."""

    label: str
    content: Any
    ttl: int | None = None
    tokens: int | None = None


def tokens_with_images(content: Any, is_image: Callable[[Any], bool], image_tokens: int) -> int:
    """The estimate of ``content`` where each node ``is_image`` says is an image counts
    ``image_tokens`` in place of its bytes."""
    images = 0

    def strip(value: Any) -> Any:
        nonlocal images
        if is_image(value):
            images += 1
            return None
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    rest = strip(content)
    return estimate_tokens(canonical(rest)) + images * image_tokens if images else estimate_tokens(canonical(content))


@dataclass(frozen=True)
class Block:
    label: str
    hash: str
    prefix: str
    tokens: int
    ttl: int | None = None

    def to_record(self) -> dict:
        return {"label": self.label, "hash": self.hash, "prefix": self.prefix, "tokens": self.tokens, "ttl": self.ttl}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Block:
        return cls(str(record["label"]), str(record["hash"]), str(record["prefix"]), int(record["tokens"]),
                   record.get("ttl"))


@dataclass(frozen=True)
class Prompt:
    """A request's blocks, and ``head``: the hash of the first 1,024 bytes of its serialized prompt
    (the blocks' canonical JSON, one after another): OpenAI's routing key."""

    blocks: tuple[Block, ...]
    head: str

    @property
    def tokens(self) -> int:
        return sum(b.tokens for b in self.blocks)


HEAD_BYTES = 1024


def prompt_of(parts: Iterable[Part]) -> Prompt:
    """The blocks of ``parts`` in their order, with cumulative prefix hashes."""
    blocks: list[Block] = []
    prefix = ""
    head = bytearray()
    for part in parts:
        text = canonical(part.content)
        if len(head) < HEAD_BYTES:
            head += text.encode("utf-8")[: HEAD_BYTES - len(head)]
        own = digest(text)
        prefix = digest(f"{prefix}:{own}")
        tokens = part.tokens if part.tokens is not None else estimate_tokens(text)
        blocks.append(Block(part.label, own, prefix, max(1, tokens), part.ttl))
    return Prompt(tuple(blocks), hashlib.sha256(bytes(head)).hexdigest()[:HASH_CHARS])


def ends_of(blocks: Sequence[Block]) -> list[int]:
    """The prompt's token count at each block boundary (through that block)."""
    out, total = [], 0
    for block in blocks:
        total += block.tokens
        out.append(total)
    return out


def with_marks(blocks: Sequence[Block], ttl_by_index: Mapping[int, int | None]) -> list[Block]:
    """The same blocks (same hashes, same prefixes) with the marks of ``ttl_by_index`` (index -> TTL
    seconds or None); every other block keeps its own mark. ``{i: None for i in range(len(b))}``
    clears them all."""
    return [replace(b, ttl=ttl_by_index[i]) if i in ttl_by_index else b for i, b in enumerate(blocks)]


class Charge(NamedTuple):
    read: int
    written: dict[int, int]  # TTL seconds -> tokens written with it
    input: int

    @property
    def write_total(self) -> int:
        return sum(self.written.values())

    @property
    def total(self) -> int:
        return self.read + self.write_total + self.input


# -- the store and the clock ----------------------------------------------------------


@dataclass
class Entry:
    tokens: int
    ttl: int
    expires: float


class Store:
    """Cache entries: scope -> prefix hash -> entry, each scope in recency order (oldest first).
    Expired entries are dropped when looked at."""

    def __init__(self) -> None:
        self.scopes: dict[str, OrderedDict[str, Entry]] = {}

    def live(self, scope: str, prefix: str, now: float) -> Entry | None:
        entries = self.scopes.get(scope)
        entry = entries.get(prefix) if entries else None
        if entry is None:
            return None
        if entry.expires <= now:
            del entries[prefix]
            return None
        return entry

    def refresh(self, scope: str, prefix: str, now: float) -> None:
        """A hit: the entry lives its TTL again from ``now`` and becomes the newest."""
        entries = self.scopes[scope]
        entry = entries[prefix]
        entry.expires = max(entry.expires, now + entry.ttl)
        entries.move_to_end(prefix)

    def put(self, scope: str, prefix: str, tokens: int, ttl: int, now: float, keep: int | None = None) -> None:
        """Create or refresh an entry (a refresh keeps the longer of the two lifetimes), then keep
        only the scope's newest ``keep`` entries where given."""
        entries = self.scopes.setdefault(scope, OrderedDict())
        old = self.live(scope, prefix, now)
        ttl = max(ttl, old.ttl) if old else ttl
        expires = max(now + ttl, old.expires) if old else now + ttl
        entries[prefix] = Entry(tokens, ttl, expires)
        entries.move_to_end(prefix)
        while keep is not None and len(entries) > keep:
            entries.popitem(last=False)

    def clear(self) -> None:
        self.scopes.clear()

    def count(self) -> int:
        return sum(len(e) for e in self.scopes.values())


class Clock:
    """Real time plus an offset the bench advances (``advance``): cache lifetimes run on it."""

    def __init__(self) -> None:
        self.offset = 0.0
        self.lock = threading.Lock()

    def now(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> float:
        with self.lock:
            self.offset += float(seconds)
            return self.offset


# -- rule sets --------------------------------------------------------------------------


def _written_by_ttl(blocks: Sequence[Block], ends: Sequence[int], marks: Sequence[int], read: int) -> dict[int, int]:
    """Tokens from the end of the read to the last mark, each stretch billed at the TTL of the mark
    that ends it."""
    written: dict[int, int] = {}
    done = read
    for index in marks:
        if ends[index] > done:
            ttl = int(blocks[index].ttl or 0)
            written[ttl] = written.get(ttl, 0) + ends[index] - done
            done = ends[index]
    return written


@dataclass(frozen=True)
class AnthropicRules:
    """Anthropic's explicit breakpoints (prompt-caching docs,
    https://platform.claude.com/docs/en/build-with-claude/prompt-caching): the cache is read and
    written only at marked blocks; a mark whose prefix is under ``minimum`` tokens neither reads nor
    writes; each mark looks back at most ``lookback`` block boundaries (itself included) for an
    entry, and the read is the longest hit over all marks; every mark at or above the minimum writes
    (creates or refreshes) its entry; written = from the end of the read to the last mark; entries
    live their TTL, refreshed on every hit."""

    minimum: int = 1024
    lookback: int = 20
    name: str = "anthropic"

    def charge(self, blocks: Sequence[Block], store: Store, scope: str, now: float) -> Charge:
        ends = ends_of(blocks)
        total = ends[-1] if ends else 0
        marks = [i for i, b in enumerate(blocks) if b.ttl and ends[i] >= self.minimum]
        read = 0
        for mark in marks:
            for back in range(mark, max(-1, mark - self.lookback), -1):
                if store.live(scope, blocks[back].prefix, now):
                    store.refresh(scope, blocks[back].prefix, now)
                    read = max(read, ends[back])
                    break
        written = _written_by_ttl(blocks, ends, marks, read)
        for mark in marks:
            store.put(scope, blocks[mark].prefix, ends[mark], int(blocks[mark].ttl or 0), now)
        return Charge(read, written, total - read - sum(written.values()))


@dataclass(frozen=True)
class AutomaticPrefixRules:
    """Automatic prefix caching, no marks, no write charge: every request stores the prefix at each
    of its block boundaries from ``minimum`` tokens on (in-memory, ``retention`` seconds idle,
    refreshed on a hit); the read is the longest stored prefix at a block boundary, rounded down to
    ``minimum`` + a multiple of ``step`` (OpenAI: 1,024 + 128k; Gemini: step 1), none under
    ``minimum``."""

    minimum: int = 1024
    step: int = 128
    retention: int = 300
    name: str = "openai-automatic"

    def charge(self, blocks: Sequence[Block], store: Store, scope: str, now: float) -> Charge:
        ends = ends_of(blocks)
        total = ends[-1] if ends else 0
        longest = 0
        for index in range(len(blocks) - 1, -1, -1):
            if ends[index] >= self.minimum and store.live(scope, blocks[index].prefix, now):
                store.refresh(scope, blocks[index].prefix, now)
                longest = ends[index]
                break
        read = self.minimum + (longest - self.minimum) // self.step * self.step if longest >= self.minimum else 0
        for index, block in enumerate(blocks):
            if ends[index] >= self.minimum:
                store.put(scope, block.prefix, ends[index], self.retention, now)
        return Charge(read, {}, total - read)


@dataclass(frozen=True)
class ExplicitBreakpointRules:
    """OpenAI GPT-5.6 explicit breakpoints (OpenAI's prompt-caching guide,
    https://platform.openai.com/docs/guides/prompt-caching): the marked blocks (the implicit
    breakpoint among them, placed by the wire module) at or above ``minimum`` tokens write their
    prefix; a request reads only a prefix written earlier at a breakpoint, exactly (the longest
    such stored prefix of the request; no fallback to a shorter unmarked prefix, no lookback
    window), among the scope's newest ``keep`` entries; written = from the end of the read to the
    last breakpoint, billed 1.25x by the wire module; entries live ``ttl`` (30 min), refreshed on a
    hit."""

    minimum: int = 1024
    keep: int = 80
    max_writes: int = 4
    ttl: int = 1800
    name: str = "openai-explicit"

    def charge(self, blocks: Sequence[Block], store: Store, scope: str, now: float) -> Charge:
        ends = ends_of(blocks)
        total = ends[-1] if ends else 0
        read = 0
        for index in range(len(blocks) - 1, -1, -1):
            if store.live(scope, blocks[index].prefix, now):
                store.refresh(scope, blocks[index].prefix, now)
                read = ends[index]
                break
        marks = [i for i, b in enumerate(blocks) if b.ttl and ends[i] >= self.minimum]
        written = _written_by_ttl(blocks, ends, marks, read)
        for mark in marks:
            store.put(scope, blocks[mark].prefix, ends[mark], int(blocks[mark].ttl or self.ttl), now, keep=self.keep)
        return Charge(read, written, total - read - sum(written.values()))


Rules = AnthropicRules | AutomaticPrefixRules | ExplicitBreakpointRules
RULE_CLASSES = {cls.name: cls for cls in (AnthropicRules, AutomaticPrefixRules, ExplicitBreakpointRules)}


def rules_to_record(rules: Rules) -> dict:
    return asdict(rules)


def rules_from_record(record: Mapping[str, Any]) -> Rules:
    """The rule set a record names (``rules_to_record``'s dict). Gemini's is an
    ``AutomaticPrefixRules`` named ``gemini-implicit``."""
    fields = dict(record)
    name = fields["name"]
    cls = RULE_CLASSES.get(name, AutomaticPrefixRules)
    return cls(**fields)


# -- OpenAI's machines ------------------------------------------------------------------


@dataclass
class MachinePool:
    """OpenAI's routing (prompt-caching guide): a request goes to a machine by a hash of the start
    of its prompt (``Prompt.head``: its first 1,024 bytes, about 256 tokens) combined with
    ``prompt_cache_key``; past about ``per_minute`` requests a minute for one (head, key) the
    overflow goes to more machines. Our choice where the guide is silent: ``machines`` machines;
    the k-th request of the last 60 s for a (head, key) goes to machine (home + (k - 1) //
    per_minute) mod ``machines``: the first 15 to the home machine, the next 15 to the one after
    it, and so on. Deterministic."""

    machines: int = 8
    per_minute: int = 15
    window: float = 60.0
    arrivals: dict[str, deque] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def home(self, head: str, key: str | None) -> int:
        return int(hashlib.sha256(f"{head}\0{key or ''}".encode()).hexdigest()[:8], 16) % self.machines

    def machine_for(self, head: str, key: str | None, now: float) -> int:
        route = f"{head}\0{key or ''}"
        with self.lock:
            times = self.arrivals.setdefault(route, deque())
            while times and times[0] <= now - self.window:
                times.popleft()
            times.append(now)
            k = len(times)
        return (self.home(head, key) + (k - 1) // self.per_minute) % self.machines

    def clear(self) -> None:
        with self.lock:
            self.arrivals.clear()


# -- re-running the accounting ----------------------------------------------------------


class Replayed(NamedTuple):
    """One request to re-account: when (virtual time), where (the store scope), by which rules, on
    which blocks."""

    time: float
    scope: str
    rules: Rules
    blocks: Sequence[Block]


def replay(requests: Iterable[Replayed], store: Store | None = None) -> list[Charge]:
    """The charges of ``requests``, in order, against ``store`` (a fresh one by default): the same
    accounting the emulator did, on block lists a bench may have changed. An ideal client is the
    recorded blocks with other marks: ``Replayed(t, scope, rules, with_marks(blocks, {...}))``;
    ``replayed_from_record`` reads one back from an emulator record."""
    store = store if store is not None else Store()
    return [r.rules.charge(r.blocks, store, r.scope, r.time) for r in requests]


def replayed_from_record(record: Mapping[str, Any]) -> Replayed | None:
    """The ``Replayed`` of one emulator record (None for a rejected request)."""
    if record.get("error") or not record.get("blocks"):
        return None
    return Replayed(float(record["time"]), str(record["scope"]), rules_from_record(record["rules"]),
                    [Block.from_record(b) for b in record["blocks"]])
