"""The ``tool_sequence`` evaluator: the order of all tool calls against ``tools``, by ``mode``
(``exact``, ``in_order``, ``any_order``, ``subset``, ``superset``; see
:mod:`atp.evaluators.tools` for what each means). A failed check shows the sequence of calls
(the first :data:`SHOWN_SEQUENCE` and how many more) and where it diverged from the list."""

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, Literal, get_args

import msgspec

from atp.core.evaluator import EvalContext, Evaluator, check
from atp.core.protocol import ToolCallEvent
from atp.core.results import Check
from atp.core.secrets import Masker
from atp.core.text import printable, shorten
from atp.evaluators.behavior import INLINE_EVENTS, NAME_CHARS, names_text, refuse_empty_tools
from atp.evaluators.tool_reading import CHECKPOINT_EVERY, SHOWN_MATCHED, call_numbers, plural, run_reading

SHOWN_SEQUENCE = 20
"""How many calls (the first ones) a failed ``tool_sequence`` shows of the sequence."""

Mode = Literal["exact", "in_order", "any_order", "subset", "superset"]
MODES: tuple[str, ...] = get_args(Mode)


class ToolSequenceConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The order of the tool calls against ``tools``, by ``mode`` (``in_order`` unless given)."""

    tools: list[str]
    mode: Mode = "in_order"

    def __post_init__(self) -> None:
        refuse_empty_tools(self.tools, "tools")


class Calls:
    """The tool names of the trace's calls, in order, as they are read: keeps the first
    :data:`SHOWN_SEQUENCE` (shortened, the secrets of ``masker`` masked first) and counts them
    all."""

    def __init__(
        self, events: Iterable[Any], checkpoint: Callable[[], None], masker: Masker | None = None
    ) -> None:
        self._events = events
        self._checkpoint = checkpoint
        self.masker = masker
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
                    self.shown.append(shorten(name, NAME_CHARS, self.masker))
                yield name

    def text(self) -> str:
        """The sequence for a message: ``search, fetch, … and 47 more (50 calls)``."""
        if not self.total:
            return "the agent made no tool calls"
        shown = shorten(", ".join(self.shown), 1000, self.masker)
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


def follow_exact(calls: Iterable[str], tools: list[str], masker: Masker | None = None) -> Verdict:
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
        unexpected = shorten(got, NAME_CHARS, masker)
        message = f"call {position + 1} ({unexpected}) is one more than the {len(tools)} listed"
        details["unexpected"] = unexpected
    else:
        unexpected = shorten(got, NAME_CHARS, masker)
        message = f"call {position + 1} is {unexpected}, where the list has {_item(tools, position)}"
        details["unexpected"] = unexpected
        details["missing"] = shorten(tools[position], NAME_CHARS)
    return Verdict(False, score, message, details)


def follow_in_order(calls: Iterable[str], tools: list[str], masker: Masker | None = None) -> Verdict:
    """(``masker`` is not needed: what this quotes is the list's.)"""
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
        shown = call_numbers(positions[:SHOWN_MATCHED], len(positions))
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
            message = f"{after}: it was called {plural(called, 'time')}, never after that"
    return Verdict(False, matched / len(tools), message, details)


def follow_any_order(calls: Iterable[str], tools: list[str], masker: Masker | None = None) -> Verdict:
    """(``masker`` is not needed: what this quotes is the list's.)"""
    needed = Counter(tools)
    counts = dict.fromkeys(needed, 0)
    for name in calls:
        if name in counts:
            counts[name] += 1
    short = {tool: counts[tool] for tool in needed if counts[tool] < needed[tool]}
    score = sum(min(counts[tool], need) for tool, need in needed.items()) / sum(needed.values())
    if not short:
        return Verdict(True, 1.0, f"each of {names_text(tools)} called, as many times as listed")
    missing = [f"{tool} ({count} of {plural(needed[tool], 'call')})" for tool, count in short.items()]
    return Verdict(
        False,
        score,
        f"too few calls of {names_text(missing)}",
        {"missing": {shorten(tool, NAME_CHARS): needed[tool] - count for tool, count in short.items()}},
    )


def follow_subset(calls: Iterable[str], tools: list[str], masker: Masker | None = None) -> Verdict:
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
        shown = shorten(name, NAME_CHARS, masker)
        if shown in others or len(others) < 20:
            others[shown] = others.get(shown, 0) + 1
    if first is None:
        what = f"all {plural(total, 'call')} are of listed tools" if total else "no tool calls"
        return Verdict(True, 1.0, f"{what} ({names_text(tools)})")
    listing = ", ".join(f"{name} ×{count}" for name, count in others.items())
    message = (
        f"call {first[0]} is {shorten(first[1], NAME_CHARS, masker)}, which is not listed; "
        f"{other_calls} of {plural(total, 'call')} {'is' if other_calls == 1 else 'are'} of other tools: "
        f"{shorten(listing, 600, masker)}"
    )
    return Verdict(
        False,
        1.0 - other_calls / total,
        message,
        {"position": first[0], "unexpected": others},
    )


def follow_superset(calls: Iterable[str], tools: list[str], masker: Masker | None = None) -> Verdict:
    """(``masker`` is not needed: what this quotes is the list's.)"""
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


FOLLOW: dict[str, Callable[[Iterable[str], list[str], Masker | None], Verdict]] = {
    "exact": follow_exact,
    "in_order": follow_in_order,
    "any_order": follow_any_order,
    "subset": follow_subset,
    "superset": follow_superset,
}
"""Each mode's reading of the sequence of calls (the tool names it quotes of the calls have the
secrets of the masker given, the run's, masked)."""

EXPECTED = {
    "exact": "expected exactly the calls {tools}, in this order",
    "in_order": "expected calls of {tools} in this order (other calls allowed between)",
    "any_order": "expected calls of {tools}, each as many times as listed, in any order",
    "subset": "expected calls only of {tools}",
    "superset": "expected calls of each of {tools}",
}


def read_sequence(
    events: Iterable[Any],
    tools: list[str],
    mode: str,
    checkpoint: Callable[[], None],
    *,
    masker: Masker | None = None,
) -> tuple[Verdict, Calls]:
    """A mode's verdict on the trace's calls, and the calls as read (blocking: reads the trace);
    the tool names quoted have the secrets of ``masker`` (the run's) masked."""
    calls = Calls(events, checkpoint, masker)
    return FOLLOW[mode](calls, tools, masker), calls


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
        read = partial(read_sequence, masker=ctx.masker)
        verdict, calls = await run_reading(on_thread, read, ctx.trace, config.tools, config.mode)
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
