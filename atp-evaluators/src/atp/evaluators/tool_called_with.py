"""The ``tool_called_with`` evaluator: a call of a tool whose input matches ``input`` (a subset)
and ``input_regex`` (per field); ``call`` picks one call by its position, ``times`` and
``min_times`` count the matching calls (see :mod:`atp.evaluators.tools` for the rules). A failed
check quotes the calls of the tool with their inputs and, for each, which field did not match."""

import math
from collections.abc import Callable, Iterable
from typing import Annotated, Any

import msgspec

from atp.core.evaluator import EvalContext, Evaluator, check
from atp.core.protocol import ToolCallEvent
from atp.core.results import Check
from atp.core.text import printable, shorten
from atp.evaluators.behavior import NAME_CHARS, calls_text
from atp.evaluators.evidence import preview
from atp.evaluators.patterns import RegexSettings, regex_timeout
from atp.evaluators.tool_input import InputJudge, RegexTimedOut, as_input, compiled_pattern, parse_field
from atp.evaluators.tool_reading import CHECKPOINT_EVERY, SHOWN_MATCHED, call_numbers, plural, run_reading

SHOWN_CALLS = 3
"""How many calls of the tool a failed ``tool_called_with`` quotes in its message."""
DETAIL_CALLS = 10
"""How many calls of the tool (the first ones) a failed ``tool_called_with`` keeps in its details."""
INPUT_CHARS = 160
"""A call's input is quoted as JSON up to this many characters."""
SHOWN_MISMATCHES = 5
"""How many fields that did not match are kept per call."""


def _refuse_non_json(value: Any, where: str) -> None:
    """``input`` holds only what a call's JSON input can equal: a value that is something else
    (bytes from YAML's ``!!binary``, a non-finite number, a key that is not text) would never
    match. (ATP's YAML reads an unquoted date as the text written.)"""
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
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"'{at}' is {item}, which no JSON input can equal")
        elif not isinstance(item, (str, int, float, bool)) and item is not None:
            raise ValueError(f"'{at}' is a {type(item).__name__}, which no JSON input can equal")


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
                compiled_pattern(pattern, f"input_regex.{shorten(path, 80)}")
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
    events: Iterable[Any], tool: str, judge: InputJudge, target: int | None, checkpoint: Callable[[], None]
) -> Found:
    """Reads the calls of ``tool`` from the trace and judges them: every call, or only call
    number ``target`` (blocking: reads the trace back; may raise :class:`RegexTimedOut`). The
    inputs quoted have the secrets of ``judge.masker`` masked."""
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
                found.seen.append(
                    CallSeen(number, preview(as_input(event.payload.input), INPUT_CHARS, masker=judge.masker))
                )
            continue
        value = as_input(event.payload.input)
        failed = judge.mismatches(value, number)
        found.best = max(found.best, 1.0 - len(failed) / judge.conditions)
        seen = CallSeen(
            number, preview(value, INPUT_CHARS, masker=judge.masker), not failed, failed[:SHOWN_MISMATCHES]
        )
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
        judge = InputJudge(config.input, config.input_regex, timeout, ctx.masker)
        target = config.call
        if target is not None and target < 0:  # 0: before the first call, so no call is judged
            target = max(0, ctx.trace.summary.tool_calls.get(config.tool, 0) + target + 1)
        try:
            # agent inputs of any size are parsed and compared: never on the event loop
            found: Found = await run_reading(True, find_calls, ctx.trace, config.tool, judge, target)
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
            message = f"{call_numbers(found.matched, found.matching)} of {tool} {verb} ({wants})"
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
                why = f"{tool} was called only {plural(found.calls, 'time')}: {made}{more}"
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
            how = "no call" if needed == 0 else f"exactly {plural(needed, 'call')}"
        else:
            needed = config.min_times or 1
            passed = count >= needed
            score = min(count, needed) / needed
            how = f"at least {plural(needed, 'call')}"
        expectation = f"expected {how} of {tool} where {wants}"
        if found.calls == 0:
            if passed:  # times: 0
                return check(label, True, f"{tool} was not called; {expectation[0].lower()}{expectation[1:]}")
            message = f"{expectation}; {tool} was not called (called: {calls_text(ctx)})"
            return check(label, False, printable(message), score, **details)
        verb = "matches" if count == 1 else "match"
        matched = f" ({call_numbers(found.matched, count)})" if count else ""
        summary = f"{count} of its {plural(found.calls, 'call')} {verb}{matched}"
        if passed:
            return check(label, True, printable(f"{summary}; {expectation}"), score)
        others = [seen for seen in found.seen if not seen.matched]
        evidence = ""
        if count < needed and others:
            evidence = f"; not matching: {_quote_calls(others, found.calls - count)}"
        return check(label, False, printable(f"{expectation}; {summary}{evidence}"), score, **details)
