"""Volatile spans: parts of the head that change without meaning anything new.

A date line, a clock time, a git status block, a message counter or a per-request nonce
changes during a session and moves the head with it, so nothing after it can be cached.
Each volatile span keeps its first value in the head for the whole session; the model
learns the current value from a short note at the tail (placed by ``notes.place_notes``,
replayed at the same place on every later request, so turn N stays a prefix of turn N+1).
Two sources, in order:

1. **Named rules**: the presets a profile or the settings turn on (``volatilePresets``,
   see ``profile_data.VOLATILE_PRESETS``) and the user's own (``volatile``). The first match
   in the head is pinned; a group named ``value``, when the pattern has one, is the span
   pinned. Every change of the value is sent as a note, on the request where it happens.
   A preset with an entry in ``profile_data.TOOL_VOLATILE_PRESETS`` also pins its first match
   inside the tool descriptions (Claude Code's WebSearch tool carries the date).
   **Inside the agent's context blocks of the first user message** (``firstUserContext``; a
   profile declares its own): Claude Code's ``<system-reminder>`` with ``# currentDate``, Qwen
   Code's and Gemini CLI's environment context. Blocks are read only from the start of the
   first user message, one after another; the first text no block declares (the user's own)
   ends the search, so typed text is never read. A preset pins its first match inside them
   like a head span (journal name ``first-user:<preset>``), a changed value is noted at the tail.
2. **Learned lines** (``learnedVolatile``, on by default), for agents no preset knows. A
   head line that, between two consecutive requests of the session, changes only inside
   runs of digits (or a hex token of 5+ characters holding a digit, or a UUID) is
   volatile: it is pinned to its first value. Notes:

   - the line's first change always reaches the model at once, as a note, so a one-off
     numeric edit ("Max file size: 100 KB" -> "200 KB") is never held back;
   - after that, a line that keeps changing (a clock, a counter) is noted at most once
     per ``learnedVolatileNoteSeconds`` (an hour by default), and always at once when a
     calendar date in it changes;
   - a line whose changes are nonces (hex tokens, no date in the line) is pinned and
     never noted;
   - when the client compacts its history and a line's notes go with it, the line stays
     pinned (the head keeps its cache) and its current value is noted again at once.

   Value formats (``value_tokens``; each class blanked apart, so a weekday never stands in for a
   number): numbers with thousands separators ("987" -> "1,204"), the AM/PM of a 12-hour clock
   ("11:58 PM" -> "12:03 AM"), and weekday and month names that are part of a date (a full
   weekday name anywhere; any other name only next to a number or another such name, so "May
   I", "March on" and "Sun Microsystems" stay words). Lines whose shape changed meaning with
   these formats are found under a new shape key: a session saved before is loaded as it was,
   and such a line passes once and is learned again.

   A change to any other character (a word, punctuation, a sign) is genuine and passes
   untouched. Only lines whose shape (the line with its runs blanked) is unique in the
   head are learned, at most ``learnedVolatileMaxLines`` per session; lines matching
   ``learnedVolatileExclude`` are never learned. Learning needs the previous request's
   lines: the journal keeps, per candidate line (a line holding a digit), a hash of its
   shape and of its text; the texts themselves go to the store's blob space, and only
   the one that changed is fetched back (``need_texts``). The time comes from the shell
   (``Context.now``) and each note's time is recorded in the journal, so replicas and
   restarts make the same decisions.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
from functools import lru_cache

from ...profile_data import TOOL_VOLATILE_PRESETS, VOLATILE_PRESETS
from ...settings import ContextBlock
from ..context import Context
from ..events import Event, TextsNeeded, TextsToKeep
from ..journal import Journal, LearnedLine, LearnState, Note, content_hash
from ..profiles import NEVER_LEARNED
from ..sections import memo, parse_head, section_digests, segment_memo
from ..view import TEXT_PART_TYPES, View, is_user_message, tool_description, with_tool_description
from .notes import tail_anchor

# A run that may change without meaning anything new (blanked as NUMBER in a line's shape): a
# UUID, a number with thousands separators ("1,204", "1\u202f204"), a hex token of 5+ characters
# holding a digit (one case), or a run of digits. And, blanked as its own class: the AM/PM marker
# of a 12-hour clock ("11:58 PM" -> "12:03 AM"; right after the minutes or seconds, or one space on).
_RUN = re.compile(
    r"(?<![0-9A-Za-z])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![0-9A-Za-z])"
    r"|(?<![0-9])[0-9]{1,3}(?:[,\u00a0\u202f][0-9]{3})+(?![0-9])"
    r"|(?<![0-9A-Za-z])(?=[0-9a-f]*[0-9])[0-9a-f]{5,}(?![0-9A-Za-z])"
    r"|(?<![0-9A-Za-z])(?=[0-9A-F]*[0-9])[0-9A-F]{5,}(?![0-9A-Za-z])"
    r"|[0-9]+"
)
_MERIDIEM = re.compile(r"(?<=[0-9]:[0-9]{2})[ \u00a0\u202f]?(?:(?P<upper>AM|PM)|am|pm)(?![0-9A-Za-z])")
NUMBER, WEEKDAY, MONTH, MERIDIEM_UPPER, MERIDIEM_LOWER = "\x00", "\x01", "\x02", "\x03", "\x04"
# Weekday and month names (title case, whole words). A full weekday name is a value wherever it
# stands ("Today is Monday"); any other name only inside a date: a run of names and digit runs
# joined by at most three of `` ,./-`` that holds a digit or a full weekday name ("Tue Dec 01 2026",
# "December 3, 2026", "Nov 30"). So "May I", "March on", "Sun Microsystems" stay words.
_WEEKDAY_NAME = (r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|Mon|Tues|Tue|Wed|Thurs|Thur|Thu|"
                 r"Fri|Sat|Sun)")
_MONTH_NAME = (r"(?:January|February|March|April|May|June|July|August|September|October|November|December|"
               r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)")
_NAME = re.compile(rf"(?<![A-Za-z])(?:(?P<weekday>{_WEEKDAY_NAME})|{_MONTH_NAME})(?![A-Za-z])")
_NAME_CLUSTER = re.compile(
    rf"(?:(?<![A-Za-z])(?:{_WEEKDAY_NAME}|{_MONTH_NAME})(?![A-Za-z])|[0-9]+)"
    rf"(?:[ ,./\-\u00a0\u202f]{{1,3}}(?:(?<![A-Za-z])(?:{_WEEKDAY_NAME}|{_MONTH_NAME})(?![A-Za-z])|[0-9]+))*")
_FULL_WEEKDAY = re.compile(r"(?<![A-Za-z])(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day(?![A-Za-z])")
_ASCII_DIGIT = re.compile(r"[0-9]")
_HEX_LETTER = re.compile(r"[a-fA-F]")
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
# Calendar dates: ISO and slashed forms, day.month.year, month names with a day and year, and
# full weekday names (a weekday changes with the date).
_DATE = re.compile(
    r"(?<![0-9])[0-9]{4}[-/][0-9]{1,2}[-/][0-9]{1,2}(?![0-9])"
    r"|(?<![0-9])[0-9]{1,2}[/.][0-9]{1,2}[/.][0-9]{4}(?![0-9])"
    rf"|{_MONTH} [0-9]{{1,2}}(?:st|nd|rd|th)?,? [0-9]{{4}}"
    rf"|(?<![0-9])[0-9]{{1,2}} {_MONTH},? [0-9]{{4}}"
    r"|(?<![A-Za-z])(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day(?![A-Za-z])"
)
MAX_TRACKED_LINES = 512  # candidate lines remembered per session (the first ones, in head order)
MAX_LINE_CHARS = 1000  # longer lines are never learned
_KEY = 12  # hex characters of a shape key in LearnState.lines
_TEXT = 16  # hex characters of a text key (also its key in the store's blob space)


def volatile_note(name: str, value: str) -> str:
    return f"Update ({name}): the system prompt shows the value from the start of this session. Current value:\n{value}"


def learned_note(value: str) -> str:
    return ("Update: a line of the system prompt still shows its value from the start of this session. "
            f"Current value:\n{value}")


def pin_volatile_spans(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    view, journal, events = _pin_named_spans(view, journal, ctx)
    if ctx.settings.first_user_context and view.body:
        view, journal, context = _pin_context_spans(view, journal, ctx)
        events += context
    if ctx.settings.learned_volatile and view.head:
        view, journal, learned = _pin_learned_lines(view, journal, ctx)
        events += learned
    return view, journal, events


# -- 1. named rules -------------------------------------------------------------------


def _span(match: re.Match) -> tuple[int, int]:
    return match.span("value") if "value" in match.re.groupindex else match.span()


def _pin_named_spans(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    events: list[Event] = []
    rules = ctx.settings.volatile_rules
    if rules and view.head:
        head, journal = _pin_in_texts(list(view.head), rules, journal, ctx, events, search=_known_search)
        if tuple(head) != view.head:
            view = view.replace(head=tuple(head))
    rules = ctx.settings.tool_volatile_rules
    if rules and view.tools:
        descriptions = [tool_description(tool) for tool in view.tools]
        texts = [d if isinstance(d, str) else "" for d in descriptions]
        pinned, journal = _pin_in_texts(list(texts), rules, journal, ctx, events)
        if pinned != texts:
            view = view.replace(tools=tuple(
                tool if new == old else with_tool_description(tool, new)
                for tool, old, new in zip(view.tools, texts, pinned)))
    return view, journal, events


# Literals of the presets: every match holds one of its pattern's literals, on the line where the
# match starts. A search then starts at the start of the line of the first literal found (exactly
# the first match: no match can start on an earlier line) and a text without any is not searched:
# a pattern that begins with ``^[ \t]*`` is otherwise tried at every position of a 500 KB head.
_ANCHORS: dict[str, tuple[str, ...]] = {
    VOLATILE_PRESETS["current-date"]: ("Current date",),
    VOLATILE_PRESETS["todays-date"]: ("Today's date", "The current date is"),
    VOLATILE_PRESETS["git-status"]: ("gitStatus: ", "# gitStatus"),
    VOLATILE_PRESETS["git-snapshot"]: ("Git snapshot at conversation start. ",),
    TOOL_VOLATILE_PRESETS["todays-date"]: ("Today's date is ", "The current month is "),
}


def search(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """``pattern.search(text)``; for a preset, from the line of its first literal (see ``_ANCHORS``)."""
    anchors = _ANCHORS.get(pattern.pattern)
    if anchors is None:
        return pattern.search(text)
    found = [at for at in (text.find(anchor) for anchor in anchors) if at != -1]
    if not found:
        return None
    return pattern.search(text, text.rfind("\n", 0, min(found)) + 1)


def _known_search(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """``search(pattern, text)``, remembered with the head text (a session's head repeats every turn)."""
    return segment_memo(text, ("volatile-search", pattern.pattern, pattern.flags), lambda t: search(pattern, t))


def _pin_in_texts(texts: list[str], rules, journal: Journal, ctx: Context, events: list[Event], search=search):
    """Pin each rule's first match in ``texts`` (changed in place); note a changed value once.

    A remembered match may belong to an equal text object: only its offsets are used."""
    for name, pattern in rules:
        for index, text in enumerate(texts):  # noqa: B007  (read after the loop: the text matched)
            match = search(pattern, text)
            if match:
                break
        else:
            continue
        start, end = _span(match)
        value = text[start:end]
        journal, pinned = _pinned_value(journal, name, value, ctx, events, volatile_note(name, value))
        if pinned is not None:
            texts[index] = text[:start] + pinned + text[end:]
    return texts, journal


def _pinned_value(journal: Journal, key: str, value: str, ctx: Context, events: list[Event],
                  note: str) -> tuple[Journal, str | None]:
    """One pinned span's decision: its first value is recorded; a later value goes as ``note`` at the
    tail, once per change (``events`` gets the note's event). Returns the journal and the pinned
    value to write back where ``value`` differs from it (else None)."""
    recorded = journal.volatile_value(key)
    if recorded is None:
        return journal.with_volatile(key, value, value), None
    pinned, last = recorded
    if value != last:
        anchor = tail_anchor(ctx)
        if anchor is not None:
            journal = journal.with_volatile(key, pinned, value).with_note(
                Note(anchor[0], anchor[1], f"volatile:{key}", note))
            events.append(Event("volatile", {"name": key, "action": "note"}))
    return journal, (pinned if value != pinned else None)


# -- 1b. named rules inside the agent's context blocks of the first user message -----------

CONTEXT_PREFIX = "first-user:"  # journal name of a preset pinned inside a context block


def context_note(name: str, value: str) -> str:
    return (f"Update ({name}): the context at the start of this conversation shows the value from the start of "
            f"this session. Current value:\n{value}")


@lru_cache(maxsize=64)
def _context_rules(blocks: tuple[ContextBlock, ...]):
    """Each block compiled: (start, end or None, ((preset name, pattern), ...))."""
    return tuple((re.compile(block.start), re.compile(block.end) if block.end else None,
                  tuple((name, re.compile(VOLATILE_PRESETS[name])) for name in block.presets))
                 for block in blocks)


def first_user(body: tuple, start: int = 0) -> int | None:
    """The index of the first user message at or after ``start``; None: none."""
    for index in range(start, len(body)):
        if is_user_message(body[index]):
            return index
    return None


def context_blocks(texts: list[str], rules) -> list[tuple[int, int, int, tuple]]:
    """(text index, start, end, presets) of each declared block at the start of the first user
    message: blocks follow one another from the start of its first text part (whitespace between
    them), into the next part only where a block ends its part. The first text that is no declared
    block (the user's own) ends the search: nothing after it is ever read."""
    found = []
    for index, text in enumerate(texts):
        at = 0
        while at < len(text):
            for start, end, presets in rules:
                opened = start.match(text, at)
                if opened is None:
                    continue
                if end is None:
                    stop = len(text)
                else:
                    closed = end.search(text, opened.end())
                    if closed is None:
                        continue  # not closed: not the agent's block
                    stop = closed.end()
                found.append((index, at, stop, presets))
                at = stop
                while at < len(text) and text[at] in " \t\r\n":
                    at += 1
                break
            else:
                return found  # text that no block declares: the user's
    return found


def _pin_context_spans(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    """Pin the presets' spans inside the agent's context blocks of the first user message, like head
    spans: the first value for the session; a changed value goes to the tail as a note."""
    where = first_user(view.body)
    if where is None:
        return view, journal, []
    message = view.body[where]
    if not isinstance(message, dict):
        return view, journal, []  # (an object the wire cannot copy: passed as sent)
    content = message.get("content")
    if isinstance(content, str):
        positions, texts = [None], [content]
    elif isinstance(content, list):
        positions, texts = [], []
        for position, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") in TEXT_PART_TYPES
                    and isinstance(part.get("text"), str)):
                break  # the blocks are at the start: an image or another part ends them
            positions.append(position)
            texts.append(part["text"])
    else:
        return view, journal, []
    blocks = context_blocks(texts, _context_rules(tuple(ctx.settings.first_user_context)))
    if not blocks:
        return view, journal, []
    events: list[Event] = []
    edits: list[tuple[int, int, int, str]] = []
    done: set[str] = set()
    for index, start, stop, presets in blocks:
        for name, pattern in presets:
            if name in done:
                continue  # the first match in the message wins, as in the head
            match = pattern.search(texts[index], start, stop)
            if match is None:
                continue
            done.add(name)
            key = CONTEXT_PREFIX + name
            begin, end = _span(match)
            value = texts[index][begin:end]
            journal, pinned = _pinned_value(journal, key, value, ctx, events, context_note(name, value))
            if pinned is not None:
                edits.append((index, begin, end, pinned))
    if not edits:
        return view, journal, events
    for index, begin, end, pinned in sorted(edits, reverse=True):
        texts[index] = texts[index][:begin] + pinned + texts[index][end:]
    if positions == [None]:
        new_content = texts[0]
    else:
        new_content = list(content)
        for position, text in zip(positions, texts):
            if text != content[position]["text"]:
                new_content[position] = {**content[position], "text": text}
    body = list(view.body)
    body[where] = {**message, "content": new_content}
    events.append(Event("volatile", {"name": "first-user", "action": "pin", "spans": len(edits)}))
    return view.replace(body=tuple(body)), journal, events


# -- 2. learned lines -----------------------------------------------------------------


def value_tokens(line: str) -> tuple[tuple[int, int, str], ...]:
    """(start, end, class) of each value token of a line, in order: the runs of ``_RUN`` (class
    NUMBER), the AM/PM marker of a 12-hour clock, and the weekday and month names that are values
    (see ``_NAME``)."""
    tokens = [(m.start(), m.end(), NUMBER) for m in _RUN.finditer(line)]
    more = False
    if ":" in line:
        for m in _MERIDIEM.finditer(line):
            start = m.end() - 2  # the marker, not the space before it
            tokens.append((start, m.end(), MERIDIEM_UPPER if m.group("upper") else MERIDIEM_LOWER))
            more = True
    if _NAME.search(line) is not None:
        taken = tokens[:]
        for cluster in _NAME_CLUSTER.finditer(line):
            text = cluster.group()
            if _ASCII_DIGIT.search(text) is None and _FULL_WEEKDAY.search(text) is None:
                continue  # a name that is no part of a date: a word
            for name in _NAME.finditer(line, cluster.start(), cluster.end()):
                start, end = name.span()
                if not any(a < end and start < b for a, b, _ in taken):  # never inside a run (a UUID)
                    tokens.append((start, end, WEEKDAY if name.group("weekday") else MONTH))
                    more = True
    if more:
        tokens.sort()
    return tuple(tokens)


def shape_of(line: str) -> str:
    """The line with every value token blanked (by its class): what may change meaninglessly."""
    if ":" not in line and _NAME.search(line) is None:
        return _RUN.sub(NUMBER, line)
    out, at = [], 0
    for start, end, kind in value_tokens(line):
        out.append(line[at:start])
        out.append(kind)
        at = end
    out.append(line[at:])
    return "".join(out)


def _hex(text: str, size: int) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=size // 2).hexdigest()


@lru_cache(maxsize=16384)
def shape_key(line: str) -> str:
    # Cached: a head's lines repeat from request to request, and the regex is the costly part.
    return _hex(shape_of(line), _KEY)


@lru_cache(maxsize=16384)
def text_key(line: str) -> str:
    return _hex(line, _TEXT)


def dates_in(line: str) -> tuple[str, ...]:
    return tuple(_DATE.findall(line))


def is_nonce_change(old: str, new: str) -> bool:
    """Only hex tokens changed (each changed run a number-class one holding a letter) and no date is in the line."""
    if dates_in(old) or dates_in(new):
        return False
    changed = [(old[a:b], new[c:d], kind, other) for (a, b, kind), (c, d, other)
               in zip(value_tokens(old), value_tokens(new)) if old[a:b] != new[c:d]]
    return bool(changed) and all(kind == other == NUMBER and _HEX_LETTER.search(x + y) is not None
                                 for x, y, kind, other in changed)


def candidate_lines(head: tuple[str, ...]) -> dict[str, str]:
    """Shape key -> text of each head line that holds a digit or a full weekday name and whose shape
    is unique in the head, in order."""
    found: dict[str, str] = {}
    repeated: set[str] = set()
    for segment in head:
        for key, line in segment_memo(segment, "value lines", _value_lines):
            if key in repeated:
                continue
            if key in found:
                del found[key]
                repeated.add(key)
                continue
            found[key] = line
    return found


# Every byte but the ASCII digits and the newline: deleted, what is left of a line tells whether it holds a digit.
_NOT_DIGIT_OR_NEWLINE = bytes(b for b in range(256) if b not in b"0123456789\n")


def _digit_lines(segment: str) -> tuple[tuple[str, str], ...]:
    """``_digit_lines_of`` a segment, section by section for a sectioned head (the lines of
    ``JOIN.join(blocks)`` are the blocks' lines and blank ones): a changed section is read again,
    the others are remembered with their text."""
    sections = parse_head(segment)
    if not sections:
        return _digit_lines_of(segment)
    return tuple(line for _, block in sections for line in memo(block, "digit lines", _digit_lines_of))


def _digit_lines_of(segment: str) -> tuple[tuple[str, str], ...]:
    """(shape key, line) of each line of a text that may be learned, in order.

    Which lines hold a digit is read from the segment's UTF-8 bytes with every other byte
    deleted (one C pass, where a regex would be tried line by line). A UTF-8
    multi-byte character holds no ASCII byte, so the bytes keep the text's lines."""
    flags = segment.encode("utf-8", "surrogatepass").translate(None, _NOT_DIGIT_OR_NEWLINE).split(b"\n")
    if not any(flags):
        return ()
    lines = segment.split("\n")
    return tuple((shape_key(lines[i]), lines[i]) for i, flag in enumerate(flags)
                 if flag and len(lines[i]) <= MAX_LINE_CHARS)


def _value_lines(segment: str) -> tuple[tuple[str, str], ...]:
    """``_digit_lines`` and the lines that hold a full weekday name (a value without a digit,
    "Today is Monday"), in order; section by section for a sectioned head, like ``_digit_lines``."""
    sections = parse_head(segment)
    if not sections:
        return _value_lines_of(segment)
    return tuple(line for _, block in sections for line in memo(block, "value lines", _value_lines_of))


def _value_lines_of(segment: str) -> tuple[tuple[str, str], ...]:
    if "day" not in segment:  # (a substring search in C; the regex only where a weekday may be)
        return _digit_lines_of(segment)
    named: set[int] = set()
    line, at = 0, 0
    for match in _FULL_WEEKDAY.finditer(segment):
        line += segment.count("\n", at, match.start())
        at = match.start()
        named.add(line)
    if not named:
        return _digit_lines_of(segment)
    lines = segment.split("\n")
    return tuple((shape_key(text), text) for i, text in enumerate(lines)
                 if len(text) <= MAX_LINE_CHARS and (i in named or _ASCII_DIGIT.search(text) is not None))


def _parse_lines(encoded: str) -> dict[str, str]:
    step = _KEY + _TEXT
    return {encoded[i : i + _KEY]: encoded[i + _KEY : i + step] for i in range(0, len(encoded), step)}


def _locate(head: list[str], line: str) -> tuple[int, int] | None:
    """(segment, offset) of ``line`` as a whole line of the head, or None."""
    for index, segment in enumerate(head):
        at = segment.find(line)
        while at != -1:
            end = at + len(line)
            if (at == 0 or segment[at - 1] == "\n") and (end == len(segment) or segment[end] == "\n"):
                return index, at
            at = segment.find(line, at + 1)
    return None


def _kind(key: str) -> str:
    return f"learned:{key}"


def _note_due(line: LearnedLine, value: str, now: float | None, interval: int) -> bool:
    if line.told_at is None:
        return True  # the first change always reaches the model at once
    if dates_in(value) != dates_in(line.told):
        return True
    return now is not None and now - line.told_at >= interval


def _pin_learned_lines(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    settings = ctx.settings
    state = journal.learned or LearnState()
    events: list[Event] = []
    # A learned line whose notes are gone (the client compacted its history away) stays
    # pinned, so the head keeps its cache; the model is told the current value again at once.
    live = {note.kind for note in journal.notes}
    learned: dict[str, LearnedLine] = {}
    for line in state.learned:
        if line.told_at is not None and _kind(line.key) not in live:
            line = dataclasses.replace(line, told=line.pinned, told_at=None)
            events.append(Event("volatile", {"name": "learned", "action": "reseed", "line": line.key}))
        learned[line.key] = line
    # From the sections' digests (remembered with each section's text): a changed section is hashed again, not the head.
    head_hash = content_hash("\x00".join("/".join(section_digests(segment)) for segment in view.head))
    texts: dict[str, str] = {}
    if head_hash == state.head:
        lines = state.lines
        current = {key: line.seen for key, line in learned.items()}
    else:
        found = candidate_lines(view.head)
        exclude = settings.learned_volatile_exclude_res + NEVER_LEARNED
        tracked = list(found.items())[:MAX_TRACKED_LINES]
        keyed = [(key, line, text_key(line)) for key, line in tracked]
        lines = "".join(key + tkey for key, _, tkey in keyed)
        previous = _parse_lines(state.lines)
        known = set(previous.values())
        texts = {tkey: line for _, line, tkey in keyed if tkey not in known}
        current = {key: found[key] for key in learned if key in found}
        need: list[str] = []
        for key, line, tkey in keyed:
            old_key = previous.get(key)
            if key in learned or old_key is None or old_key == tkey:
                continue
            if len(learned) >= settings.learned_volatile_max_lines:
                break
            if any(pattern.search(line) for pattern in exclude):
                continue
            old = ctx.texts.get(old_key)
            if old is None:
                if not ctx.texts_fetched:
                    need.append(old_key)
                    continue
                old = line  # evicted from the store: pin the current value (the head moves this once)
            elif shape_key(old) != key:
                old = line  # a different line under the same key: never pin text that was not this line
            learned[key] = LearnedLine(key, pinned=old, seen=old, told=old, nonce=is_nonce_change(old, line))
            current[key] = line
            events.append(Event("volatile", {"name": "learned", "action": "learn", "line": key,
                                             "nonce": learned[key].nonce}))
        if need:
            return view, journal, [Event("need_texts", TextsNeeded(need))]

    head = list(view.head)
    for key, line in list(learned.items()):
        value = current.get(key)
        if value is None:
            continue  # not in this head
        if value != line.seen:
            line = dataclasses.replace(line, seen=value, nonce=line.nonce and is_nonce_change(line.seen, value))
        where = _locate(head, value)
        if where is None:
            continue  # not in this head (it was absent from the last one too)
        if value != line.pinned:
            index, at = where
            head[index] = head[index][:at] + line.pinned + head[index][at + len(value):]
        if (not line.nonce and value != line.told
                and _note_due(line, value, ctx.now, settings.learned_volatile_note_seconds)
                and (anchor := tail_anchor(ctx)) is not None):  # hashed once per request, when a note is due
            journal = journal.with_note(Note(anchor[0], anchor[1], _kind(key), learned_note(value.strip())))
            line = dataclasses.replace(line, told=value, told_at=int(ctx.now or 0))
            events.append(Event("volatile", {"name": "learned", "action": "note", "line": key}))
        learned[key] = line
    new_state = LearnState(head=head_hash, lines=lines, learned=tuple(learned.values()))
    if new_state != state:
        journal = journal.replace(learned=new_state)
    if texts:
        events.append(Event("texts", TextsToKeep(texts)))
    if tuple(head) != view.head:
        view = view.replace(head=tuple(head))
    return view, journal, events
