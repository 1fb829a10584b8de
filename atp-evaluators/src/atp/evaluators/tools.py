"""Evaluators of the tool calls in a run's trace: which input a tool was called with
(``tool_called_with``) and in which order the tools were called (``tool_sequence``).

Both read the ``tool_call`` events of the trace, whoever recorded them: the agent's own event
stream, or ATP's mock tool server, which records every call an agent makes to a declared tool.
A call is one event; its tool is the payload's ``tool``, compared as it is written (case and all).

``tool_called_with``
    Passes when a call of ``tool`` has an input that matches::

        - type: tool_called_with
          config:
            tool: web_search
            input: {query: climate, filters: {region: eu}}   # a subset of the call's input
            input_regex: {query: "^clim", filters.region: "^(eu|us)$"}
            call: 1          # optional: only the first call of the tool (-1: the last)
            # or times: N (exactly N matching calls; 0: none) or min_times: N (at least N)

    ``input`` is a subset of the call's input: every key it gives is in the input, with an
    equal value. A mapping is compared the same way, as a subset (keys not given are not
    looked at), at any depth. A list is compared item by item: the input's list has as many
    items, in the same order, each compared by these rules (so a mapping inside a list is a
    subset too). Text is compared exactly (case included); numbers by value (``1`` equals
    ``1.0``); ``true``/``false`` equal only themselves (not ``1``/``0``); ``null`` equals only a
    key that is there with the value null.

    ``input_regex`` maps fields to regular expressions. A field is a dotted path into the
    input: ``query``, ``filters.region``; a part made of digits picks an item of a list
    (``urls.0``); a key with a dot in its name cannot be named. The field's value must be
    there, and its text must match the expression (``regex`` module search: anywhere in the
    text unless anchored with ``^``/``$``; ``(?i)`` ignores case). The text of a value that is
    not text is its JSON: ``true``, ``3``, ``{"a": 1}``. Each match may take at most
    ``regex_timeout_seconds`` (the evaluator setting, 1 s by default, as for ``contains``); a
    match stopped at the limit fails the check.

    An input sent as JSON text holding an object (as some frameworks send tool arguments) is
    read as that object.

    Without ``call``, ``times`` or ``min_times``, one matching call is enough. ``call: N`` looks
    only at the N-th call of the tool (1 the first, -1 the last, -2 the one before). ``times``
    and ``min_times`` count the matching calls. The score is the fraction of the conditions
    (the top-level keys of ``input`` and the fields of ``input_regex``) that the closest call
    meets; with ``times``/``min_times``, the share of the count reached.

``tool_sequence``
    The order of all tool calls (of any tool) against ``tools: [a, b, c]``, by ``mode``:

    - ``in_order`` (the default): the listed tools were called in this order, other calls
      allowed before, between and after; a tool listed twice must be called twice (``[a, b]``
      passes for ``a x b y`` and fails for ``b a``). Score: the share of the list found in order.
    - ``exact``: the calls are exactly the list: the same tools, in the same order, as many,
      nothing else. Score: the length of the common start over the longer of the two.
    - ``any_order``: each listed tool was called at least as many times as it is listed, in
      any order; other calls allowed. Score: the share of the listed calls made.
    - ``subset``: every call is of a listed tool (the agent used only these; a run with no
      tool calls passes). Score: the share of the calls that are of listed tools.
    - ``superset``: every listed tool was called at least once; other calls allowed. Score:
      the share of the listed tools called.

A failed check says what the trace shows, in its message and its ``details``: the calls of the
tool with their inputs (bounded previews, secrets masked) and, for each, which field did not
match; the sequence of calls (the first :data:`SHOWN_SEQUENCE` and how many more) and where it
diverged from the list: the first missing or unexpected position.

Configs that would check nothing (no ``input`` nor ``input_regex``, an empty list, ``call: 0``,
``min_times: 0``) and expressions that do not compile are refused when the suite loads.
"""

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import date, time
from functools import lru_cache
from typing import Annotated, Any, Literal, get_args

import anyio
import anyio.from_thread
import msgspec

from atp.core.evaluator import EvalContext, Evaluator, check
from atp.core.protocol import ToolCallEvent
from atp.core.results import Check
from atp.core.text import printable, shorten
from atp.evaluators.artifact import RegexSettings, compile_regex, off_loop, preview, regex_timeout
from atp.evaluators.behavior import INLINE_EVENTS, NAME_CHARS, calls_text, names_text, refuse_empty_tools

SHOWN_CALLS = 3
"""How many calls of the tool a failed ``tool_called_with`` quotes in its message."""
DETAIL_CALLS = 10
"""How many calls of the tool (the first ones) a failed ``tool_called_with`` keeps in its details."""
SHOWN_MATCHED = 20
"""How many call numbers of matching calls a check lists."""
INPUT_CHARS = 160
"""A call's input is quoted as JSON up to this many characters."""
MISMATCH_CHARS = 80
"""A value in a mismatch (what a field has) is quoted up to this many characters."""
SHOWN_MISMATCHES = 5
"""How many fields that did not match are kept per call."""
SHOWN_SEQUENCE = 20
"""How many calls (the first ones) a failed ``tool_sequence`` shows of the sequence."""
MAX_JSON_INPUT = 16 * 1024 * 1024
"""An input sent as JSON text is read as an object only up to this many characters."""
CHECKPOINT_EVERY = 256
"""On a worker thread, the trace reading checks every this many events whether the evaluation
was cancelled (its time ran out), so an abandoned thread stops soon after."""

Mode = Literal["exact", "in_order", "any_order", "subset", "superset"]
MODES: tuple[str, ...] = get_args(Mode)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _numbers(numbers: list[int], total: int) -> str:
    """Call numbers for a message: ``call 3``, ``calls 1, 4`` (and how many more)."""
    shown = ", ".join(str(n) for n in numbers)
    more = f" and {total - len(numbers)} more" if total > len(numbers) else ""
    return f"{'call' if total == 1 else 'calls'} {shown}{more}"


def _checkpoint(on_thread: bool) -> Callable[[], None]:
    """What the trace reading calls now and then: on a worker thread, raises the cancellation
    of the evaluation that started it (its time ran out); on the event loop, nothing."""
    return anyio.from_thread.check_cancelled if on_thread else _nothing


def _nothing() -> None:
    return None


async def _run(on_thread: bool, work: Callable[..., Any], *args: Any) -> Any:
    """``work(*args, checkpoint)``, on a worker thread or on the event loop."""
    if on_thread:
        return await off_loop(-1, work, *args, _checkpoint(True))
    return work(*args, _checkpoint(False))


# --- tool_called_with: config ---------------------------------------------------------------


def _field_name(parts: Iterable[str | int]) -> str:
    return ".".join(str(part) for part in parts)


def _refuse_non_json(value: Any, where: str) -> None:
    """``input`` holds only what a call's JSON input can equal: a value YAML made something
    else (a date, a non-finite number, a key that is not text) would never match."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    raise ValueError(f"'{at}' has the key {key!r}, which is not text; quote it ('{key}')")
                stack.append((inner, f"{at}.{key}"))
        elif isinstance(item, list):
            stack.extend((inner, f"{at}.{index}") for index, inner in enumerate(item))
        elif isinstance(item, (date, time)):
            raise ValueError(
                f"'{at}' is a YAML date or time, and a tool's JSON input has none; quote it to compare "
                f"it with the input's text ('{item.isoformat()}')"
            )
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"'{at}' is {item}, which no JSON input can equal")
        elif not isinstance(item, (str, int, float, bool)) and item is not None:
            raise ValueError(f"'{at}' is a {type(item).__name__}, which no JSON input can equal")


def parse_field(path: str) -> tuple[str, ...]:
    """A dotted field path of ``input_regex`` as its parts; ValueError when a part is empty."""
    parts = tuple(path.split("."))
    if not path.strip() or any(not part for part in parts):
        raise ValueError(
            f"'input_regex' has the field {shorten(path, 80)!r}, which is not a dotted path; name a field "
            "by its keys joined with dots (query, filters.region)"
        )
    return parts


@lru_cache(maxsize=512)
def _compiled(pattern: str, key: str) -> Any:
    """An ``input_regex`` expression compiled once (when the suite loads; each run finds it here)."""
    return compile_regex(pattern, False, key, feature="the tool_called_with evaluator with input_regex")


class ToolCalledWithConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A call of ``tool`` whose input has ``input`` (a subset) and whose fields match
    ``input_regex``; ``call`` picks one call by position, ``times``/``min_times`` count the
    matching calls."""

    tool: str
    input: dict[str, Any] | None = None
    input_regex: dict[str, str] | None = None
    call: int | None = None
    times: Annotated[int, msgspec.Meta(ge=0)] | None = None
    min_times: Annotated[int, msgspec.Meta(ge=1)] | None = None

    def __post_init__(self) -> None:
        if not self.tool.strip():
            raise ValueError("'tool' is blank")
        if self.input is None and self.input_regex is None:
            raise ValueError(
                "tool_called_with needs 'input' or 'input_regex' (what the call's input must have); "
                "to check only that the tool was called, use must_use_tools"
            )
        if self.input is not None:
            if not self.input:
                raise ValueError("'input' is empty; it would match any call")
            _refuse_non_json(self.input, "input")
        if self.input_regex is not None:
            if not self.input_regex:
                raise ValueError("'input_regex' names no field; it would match any call")
            for path, pattern in self.input_regex.items():
                parse_field(path)
                _compiled(pattern, f"input_regex.{shorten(path, 80)}")
        if self.call == 0:
            raise ValueError("'call' counts from 1 (the first call) or from -1 (the last); 0 names no call")
        counted = "times" if self.times is not None else "min_times" if self.min_times is not None else None
        if self.call is not None and counted is not None:
            raise ValueError(
                f"give 'call' (one call, by its position) or '{counted}' (how many calls match), not both"
            )
        if self.times is not None and self.min_times is not None:
            raise ValueError("give 'times' (exactly) or 'min_times' (at least), not both")

    @property
    def conditions(self) -> int:
        return len(self.input or {}) + len(self.input_regex or {})


# --- tool_called_with: matching -------------------------------------------------------------


class RegexTimedOut(Exception):
    """A field's expression took longer than its time limit on a call's input."""

    def __init__(self, field: str, call: int) -> None:
        super().__init__(field, call)
        self.field = field
        self.call = call


def as_input(value: Any) -> Any:
    """A call's input as ATP compares it: JSON text holding an object is read as the object."""
    if isinstance(value, str) and len(value) <= MAX_JSON_INPUT and value.lstrip()[:1] == "{":
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        if isinstance(parsed, dict):
            return parsed
    return value


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__


def _equal(expected: Any, actual: Any) -> bool:
    """Scalars as JSON compares them: numbers by value, a boolean only with a boolean."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return expected == actual
    return type(expected) is type(actual) and expected == actual


def _subset_mismatch(expected: Any, actual: Any, at: list[str | int]) -> str | None:
    """Why ``actual`` does not have ``expected`` (see the module docs), or ``None``. Recurses as
    deep as ``expected``, which the suite wrote (the agent's data is never walked further)."""
    where = _field_name(at)
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{where}: expected an object, got {_kind(actual)} {preview(actual, MISMATCH_CHARS)}"
        for key, value in expected.items():
            if key not in actual:
                return f"{_field_name([*at, key])}: missing"
            found = _subset_mismatch(value, actual[key], [*at, key])
            if found is not None:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{where}: expected a list, got {_kind(actual)} {preview(actual, MISMATCH_CHARS)}"
        if len(actual) != len(expected):
            return (
                f"{where}: expected {_plural(len(expected), 'item')}, got {len(actual)} "
                f"{preview(actual, MISMATCH_CHARS)}"
            )
        for index, (want, have) in enumerate(zip(expected, actual, strict=True)):
            found = _subset_mismatch(want, have, [*at, index])
            if found is not None:
                return found
        return None
    if _equal(expected, actual):
        return None
    return f"{where}: expected {preview(expected, MISMATCH_CHARS)}, got {preview(actual, MISMATCH_CHARS)}"


def _lookup(value: Any, parts: tuple[str, ...]) -> tuple[bool, Any]:
    """The value at a dotted field path, and whether it is there."""
    for part in parts:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isascii() and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return True, value


def _text(value: Any) -> str | None:
    """A field's value as the text its expression is matched against (``None``: nested too
    deeply to write as JSON)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (RecursionError, ValueError):
        return None


class _Judge:
    """Tells which conditions of a config a call's input does not meet."""

    def __init__(self, config: ToolCalledWithConfig, timeout: float) -> None:
        self.input = config.input or {}
        self.regexes = [
            (path, parse_field(path), pattern, _compiled(pattern, f"input_regex.{shorten(path, 80)}"))
            for path, pattern in (config.input_regex or {}).items()
        ]
        self.timeout = timeout
        self.conditions = config.conditions

    def mismatches(self, value: Any, call: int) -> list[str]:
        """One line per condition that ``value`` (a call's input, see :func:`as_input`) does not
        meet: all conditions are looked at, for the score."""
        failed: list[str] = []
        if self.input:
            if not isinstance(value, dict):
                got = "no input" if value is None else f"{_kind(value)} {preview(value, MISMATCH_CHARS)}"
                failed.extend(f"{key}: missing (the input is {got})" for key in self.input)
            else:
                for key, want in self.input.items():
                    found = _subset_mismatch(want, value[key], [key]) if key in value else f"{key}: missing"
                    if found is not None:
                        failed.append(found)
        for path, parts, pattern, compiled in self.regexes:
            present, field = _lookup(value, parts)
            if not present:
                failed.append(f"{path}: missing")
                continue
            text = _text(field)
            if text is None:
                failed.append(f"{path}: nested too deeply for ATP to read")
                continue
            try:
                matched = compiled.search(text, timeout=self.timeout, concurrent=True)
            except TimeoutError:
                raise RegexTimedOut(path, call) from None
            if matched is None:
                failed.append(
                    f"{path}: {preview(field, MISMATCH_CHARS)} does not match {shorten(pattern, 80)!r}"
                )
        return failed


class CallSeen(msgspec.Struct, omit_defaults=True):
    """One call of the tool, as a check's details show it."""

    call: int
    """Its position among the calls of the tool (1: the first)."""
    input: str
    """Its input as JSON, a bounded preview."""
    matched: bool | None = None
    """Whether it matched (``None``: not looked at, as ``call`` names another)."""
    mismatches: list[str] = msgspec.field(default_factory=list)
    """The conditions it does not meet (the first :data:`SHOWN_MISMATCHES`)."""


class Found(msgspec.Struct):
    """What the calls of the tool show, read from the trace."""

    calls: int = 0
    """How many calls of the tool the trace has."""
    matching: int = 0
    """How many of the calls looked at match."""
    matched: list[int] = msgspec.field(default_factory=list)
    """The numbers of the first :data:`SHOWN_MATCHED` matching calls."""
    seen: list[CallSeen] = msgspec.field(default_factory=list)
    """The first :data:`DETAIL_CALLS` calls of the tool, and the one ``call`` names."""
    target: CallSeen | None = None
    """The call ``call`` names, when the trace has it."""
    best: float = 0.0
    """The largest share of the conditions that one call meets."""


def find_calls(
    events: Iterable[Any], tool: str, judge: _Judge, target: int | None, checkpoint: Callable[[], None]
) -> Found:
    """Reads the calls of ``tool`` from the trace and judges them: every call, or only call
    number ``target`` (blocking: reads the trace back; may raise :class:`RegexTimedOut`)."""
    found = Found()
    for read, event in enumerate(events, 1):
        if read % CHECKPOINT_EVERY == 0:
            checkpoint()
        if not isinstance(event, ToolCallEvent) or event.payload.tool != tool:
            continue
        found.calls += 1
        number = found.calls
        shown = len(found.seen) < DETAIL_CALLS
        if target is not None and number != target:
            if shown:
                found.seen.append(CallSeen(number, preview(as_input(event.payload.input), INPUT_CHARS)))
            continue
        value = as_input(event.payload.input)
        failed = judge.mismatches(value, number)
        found.best = max(found.best, 1.0 - len(failed) / judge.conditions)
        seen = CallSeen(number, preview(value, INPUT_CHARS), not failed, failed[:SHOWN_MISMATCHES])
        if not failed:
            found.matching += 1
            if len(found.matched) < SHOWN_MATCHED:
                found.matched.append(number)
        if number == target:
            found.target = seen
            if not shown:
                found.seen.append(seen)
        if shown:
            found.seen.append(seen)
    return found


def _quoted(seen: CallSeen) -> str:
    """One call for a message: ``call 2 {"query": "weather"} (query: expected ..., got ...)``."""
    if not seen.mismatches:
        return f"call {seen.call} {seen.input}"
    why = "; ".join(seen.mismatches[:2]) + ("; …" if len(seen.mismatches) > 2 else "")
    return f"call {seen.call} {seen.input} ({why})"


def _quote_calls(calls: list[CallSeen], total: int) -> str:
    shown = "; ".join(_quoted(seen) for seen in calls[:SHOWN_CALLS])
    more = total - min(len(calls), SHOWN_CALLS)
    return shown + (f" (and {more} more)" if more > 0 else "")


def wants_text(config: ToolCalledWithConfig) -> str:
    """What a matching call's input has, for a message: ``input has {"query": "climate"},
    filters.region matches '^eu'``."""
    parts = []
    if config.input is not None:
        parts.append(f"input has {preview(config.input, 400)}")
    for path, pattern in (config.input_regex or {}).items():
        parts.append(f"{shorten(path, 80)} matches {shorten(pattern, 120)!r}")
    return shorten(", ".join(parts), 1000)


def _position(call: int) -> str:
    if call == -1:
        return "the last call"
    return f"call {call}" if call > 0 else f"call {call} ({-call} from the end)"


class ToolCalledWith(Evaluator):
    name = "tool_called_with"
    summary = "a call of 'tool' had an input matching 'input' (a subset) and/or 'input_regex' (per field)"
    category = "behavior"
    Config = ToolCalledWithConfig
    Settings = RegexSettings

    async def evaluate(self, ctx: EvalContext, config: ToolCalledWithConfig) -> list[Check]:
        tool = shorten(config.tool, NAME_CHARS)
        label = f"{self.name}:{tool}"
        timeout = regex_timeout(self.settings, self.name) if config.input_regex else 0.0
        judge = _Judge(config, timeout)
        target = config.call
        if target is not None and target < 0:  # 0: before the first call, so no call is judged
            target = max(0, ctx.trace.summary.tool_calls.get(config.tool, 0) + target + 1)
        try:
            # agent inputs of any size are parsed and compared: never on the event loop
            found: Found = await _run(True, find_calls, ctx.trace, config.tool, judge, target)
        except RegexTimedOut as stopped:
            message = (
                f"the regex of input_regex field {shorten(stopped.field, 80)!r} took longer than "
                f"{timeout:g} s on call {stopped.call} of {tool}; ATP stopped it "
                f"(evaluators.{self.name}.regex_timeout_seconds)"
            )
            field = shorten(stopped.field, 80)
            return [check(label, False, printable(message), tool=tool, call=stopped.call, field=field)]
        expected: dict[str, Any] = {}
        if config.input is not None:
            expected["input"] = config.input
        if config.input_regex is not None:
            expected["input_regex"] = config.input_regex
        details = {
            "tool": tool,
            "expected": expected,
            "calls": found.calls,
            "matching": found.matching,
            "matched_calls": found.matched,
            "inputs": [msgspec.to_builtins(seen) for seen in found.seen],
        }
        wants = wants_text(config)
        if config.call is not None:
            return [self._one_call(label, tool, wants, config.call, found, ctx, details)]
        if config.times is not None or config.min_times is not None:
            return [self._counted(label, tool, wants, config, found, ctx, details)]
        if found.matching:
            verb = "matches" if found.matching == 1 else "match"
            message = f"{_numbers(found.matched, found.matching)} of {tool} {verb} ({wants})"
            return [check(label, True, printable(message), 1.0)]
        expectation = f"expected a call of {tool} where {wants}"
        if found.calls == 0:
            message = f"{expectation}; {tool} was not called (called: {calls_text(ctx)})"
        else:
            which = "its one call does not match"
            if found.calls > 1:
                which = f"none of its {found.calls} calls matches"
            message = f"{expectation}; {which}: {_quote_calls(found.seen, found.calls)}"
        return [check(label, False, printable(message), found.best, **details)]

    @staticmethod
    def _one_call(
        label: str, tool: str, wants: str, call: int, found: Found, ctx: EvalContext, details: dict[str, Any]
    ) -> Check:
        expectation = f"expected {_position(call)} of {tool} where {wants}"
        seen = found.target
        if seen is None:
            if found.calls == 0:
                why = f"{tool} was not called (called: {calls_text(ctx)})"
            else:
                made = "; ".join(f"call {s.call} {s.input}" for s in found.seen[:SHOWN_CALLS])
                more = f" (and {found.calls - SHOWN_CALLS} more)" if found.calls > SHOWN_CALLS else ""
                why = f"{tool} was called only {_plural(found.calls, 'time')}: {made}{more}"
            return check(label, False, printable(f"{expectation}; {why}"), 0.0, **details)
        if seen.matched:
            return check(label, True, printable(f"call {seen.call} of {tool} matches: {seen.input}"), 1.0)
        details["call"] = seen.call
        message = f"{expectation}; it does not match: {_quoted(seen)}"
        return check(label, False, printable(message), found.best, **details)

    @staticmethod
    def _counted(
        label: str,
        tool: str,
        wants: str,
        config: ToolCalledWithConfig,
        found: Found,
        ctx: EvalContext,
        details: dict[str, Any],
    ) -> Check:
        count = found.matching
        if config.times is not None:
            needed = config.times
            passed = count == needed
            score = 1.0 if passed else min(count, needed) / max(count, needed)
            how = "no call" if needed == 0 else f"exactly {_plural(needed, 'call')}"
        else:
            needed = config.min_times or 1
            passed = count >= needed
            score = min(count, needed) / needed
            how = f"at least {_plural(needed, 'call')}"
        expectation = f"expected {how} of {tool} where {wants}"
        if found.calls == 0:
            if passed:  # times: 0
                return check(label, True, f"{tool} was not called; {expectation[0].lower()}{expectation[1:]}")
            message = f"{expectation}; {tool} was not called (called: {calls_text(ctx)})"
            return check(label, False, printable(message), score, **details)
        verb = "matches" if count == 1 else "match"
        matched = f" ({_numbers(found.matched, count)})" if count else ""
        summary = f"{count} of its {_plural(found.calls, 'call')} {verb}{matched}"
        if passed:
            return check(label, True, printable(f"{summary}; {expectation}"), score)
        others = [seen for seen in found.seen if not seen.matched]
        evidence = ""
        if count < needed and others:
            evidence = f"; not matching: {_quote_calls(others, found.calls - count)}"
        return check(label, False, printable(f"{expectation}; {summary}{evidence}"), score, **details)


# --- tool_sequence --------------------------------------------------------------------------


class ToolSequenceConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The order of the tool calls against ``tools``, by ``mode`` (``in_order`` unless given)."""

    tools: list[str]
    mode: Mode = "in_order"

    def __post_init__(self) -> None:
        refuse_empty_tools(self.tools, "tools")


class Calls:
    """The tool names of the trace's calls, in order, as they are read: keeps the first
    :data:`SHOWN_SEQUENCE` (shortened) and counts them all."""

    def __init__(self, events: Iterable[Any], checkpoint: Callable[[], None]) -> None:
        self._events = events
        self._checkpoint = checkpoint
        self.total = 0
        self.shown: list[str] = []

    def __iter__(self) -> Iterator[str]:
        for read, event in enumerate(self._events, 1):
            if read % CHECKPOINT_EVERY == 0:
                self._checkpoint()
            if isinstance(event, ToolCallEvent):
                name = event.payload.tool
                self.total += 1
                if len(self.shown) < SHOWN_SEQUENCE:
                    self.shown.append(shorten(name, NAME_CHARS))
                yield name

    def text(self) -> str:
        """The sequence for a message: ``search, fetch, … and 47 more (50 calls)``."""
        if not self.total:
            return "the agent made no tool calls"
        shown = shorten(", ".join(self.shown), 1000)
        more = self.total - len(self.shown)
        return f"the calls: {shown}" + (f", … and {more} more ({self.total} calls)" if more > 0 else "")


class Verdict(msgspec.Struct):
    """What one mode concluded from the sequence."""

    passed: bool
    score: float
    message: str
    """What was found (after what was expected), for the check message."""
    details: dict[str, Any] = msgspec.field(default_factory=dict)


def _item(tools: list[str], index: int) -> str:
    return f"{shorten(tools[index], NAME_CHARS)} (item {index + 1} of the list)"


def follow_exact(calls: Iterable[str], tools: list[str]) -> Verdict:
    position: int | None = None
    got: str | None = None
    total = 0
    for index, name in enumerate(calls):
        total = index + 1
        if position is None and (index >= len(tools) or name != tools[index]):
            position, got = index, name
    if position is None and total < len(tools):
        position = total
    if position is None:
        return Verdict(True, 1.0, f"the calls are exactly {names_text(tools)}")
    score = position / max(len(tools), total)
    details: dict[str, Any] = {"position": position + 1}
    if got is None:
        message = f"call {position + 1} is missing, where the list has {_item(tools, position)}"
        details["missing"] = shorten(tools[position], NAME_CHARS)
    elif position >= len(tools):
        message = f"call {position + 1} ({shorten(got, NAME_CHARS)}) is one more than the {len(tools)} listed"
        details["unexpected"] = shorten(got, NAME_CHARS)
    else:
        message = (
            f"call {position + 1} is {shorten(got, NAME_CHARS)}, where the list has {_item(tools, position)}"
        )
        details["unexpected"] = shorten(got, NAME_CHARS)
        details["missing"] = shorten(tools[position], NAME_CHARS)
    return Verdict(False, score, message, details)


def follow_in_order(calls: Iterable[str], tools: list[str]) -> Verdict:
    matched = 0
    positions: list[int] = []
    counts = dict.fromkeys(tools, 0)
    for index, name in enumerate(calls):
        if name in counts:
            counts[name] += 1
        if matched < len(tools) and name == tools[matched]:
            matched += 1
            positions.append(index + 1)
    if matched == len(tools):
        shown = _numbers(positions[:SHOWN_MATCHED], len(positions))
        return Verdict(True, 1.0, f"{names_text(tools)} called in this order ({shown})")
    missing = tools[matched]
    called = counts[missing]
    details: dict[str, Any] = {"position": matched + 1, "missing": shorten(missing, NAME_CHARS)}
    if matched == 0:
        message = f"{_item(tools, 0)} was never called"
    else:
        details["after_call"] = positions[-1]
        after = (
            f"after call {positions[-1]} ({shorten(tools[matched - 1], NAME_CHARS)}, item {matched}), "
            f"the list needs {shorten(missing, NAME_CHARS)} (item {matched + 1})"
        )
        if called == 0:
            message = f"{after}: it was never called"
        else:
            message = f"{after}: it was called {_plural(called, 'time')}, never after that"
    return Verdict(False, matched / len(tools), message, details)


def follow_any_order(calls: Iterable[str], tools: list[str]) -> Verdict:
    needed = Counter(tools)
    counts = dict.fromkeys(needed, 0)
    for name in calls:
        if name in counts:
            counts[name] += 1
    short = {tool: counts[tool] for tool in needed if counts[tool] < needed[tool]}
    score = sum(min(counts[tool], need) for tool, need in needed.items()) / sum(needed.values())
    if not short:
        return Verdict(True, 1.0, f"each of {names_text(tools)} called, as many times as listed")
    missing = [f"{tool} ({count} of {_plural(needed[tool], 'call')})" for tool, count in short.items()]
    return Verdict(
        False,
        score,
        f"too few calls of {names_text(missing)}",
        {"missing": {shorten(tool, NAME_CHARS): needed[tool] - count for tool, count in short.items()}},
    )


def follow_subset(calls: Iterable[str], tools: list[str]) -> Verdict:
    allowed = set(tools)
    others: dict[str, int] = {}
    other_calls = 0
    total = 0
    first: tuple[int, str] | None = None
    for index, name in enumerate(calls):
        total = index + 1
        if name in allowed:
            continue
        other_calls += 1
        if first is None:
            first = (index + 1, name)
        shown = shorten(name, NAME_CHARS)
        if shown in others or len(others) < 20:
            others[shown] = others.get(shown, 0) + 1
    if first is None:
        what = f"all {_plural(total, 'call')} are of listed tools" if total else "no tool calls"
        return Verdict(True, 1.0, f"{what} ({names_text(tools)})")
    listing = ", ".join(f"{name} ×{count}" for name, count in others.items())
    message = (
        f"call {first[0]} is {shorten(first[1], NAME_CHARS)}, which is not listed; "
        f"{other_calls} of {_plural(total, 'call')} {'is' if other_calls == 1 else 'are'} of other tools: "
        f"{shorten(listing, 600)}"
    )
    return Verdict(
        False,
        1.0 - other_calls / total,
        message,
        {"position": first[0], "unexpected": others},
    )


def follow_superset(calls: Iterable[str], tools: list[str]) -> Verdict:
    counts = dict.fromkeys(tools, 0)
    for name in calls:
        if name in counts:
            counts[name] += 1
    missing = [tool for tool, count in counts.items() if count == 0]
    if not missing:
        return Verdict(True, 1.0, f"called each of {names_text(tools)}")
    return Verdict(
        False,
        1.0 - len(missing) / len(counts),
        f"not called: {names_text(missing)}",
        {"missing": [shorten(tool, NAME_CHARS) for tool in missing[:20]]},
    )


FOLLOW: dict[str, Callable[[Iterable[str], list[str]], Verdict]] = {
    "exact": follow_exact,
    "in_order": follow_in_order,
    "any_order": follow_any_order,
    "subset": follow_subset,
    "superset": follow_superset,
}
"""Each mode's reading of the sequence of calls."""

EXPECTED = {
    "exact": "expected exactly the calls {tools}, in this order",
    "in_order": "expected calls of {tools} in this order (other calls allowed between)",
    "any_order": "expected calls of {tools}, each as many times as listed, in any order",
    "subset": "expected calls only of {tools}",
    "superset": "expected calls of each of {tools}",
}


def read_sequence(
    events: Iterable[Any], tools: list[str], mode: str, checkpoint: Callable[[], None]
) -> tuple[Verdict, Calls]:
    """A mode's verdict on the trace's calls, and the calls as read (blocking: reads the trace)."""
    calls = Calls(events, checkpoint)
    return FOLLOW[mode](calls, tools), calls


class ToolSequence(Evaluator):
    name = "tool_sequence"
    summary = (
        "the order of the tool calls against 'tools', by 'mode': exact, in_order (the default), "
        "any_order, subset, superset"
    )
    category = "behavior"
    Config = ToolSequenceConfig

    async def evaluate(self, ctx: EvalContext, config: ToolSequenceConfig) -> list[Check]:
        label = f"{self.name}:{config.mode}"
        on_thread = ctx.trace.summary.events > INLINE_EVENTS
        verdict, calls = await _run(on_thread, read_sequence, ctx.trace, config.tools, config.mode)
        if verdict.passed:
            return [check(label, True, printable(verdict.message), verdict.score)]
        expected = EXPECTED[config.mode].format(tools=names_text(config.tools))
        return [
            check(
                label,
                False,
                printable(f"{expected}; {verdict.message}; {calls.text()}"),
                verdict.score,
                expected=config.tools,
                mode=config.mode,
                actual=calls.shown,
                calls=calls.total,
                **verdict.details,
            )
        ]
