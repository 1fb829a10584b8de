"""Evaluators of how the agent worked, read from its event trace.

``must_use_tools`` and ``forbidden_tools`` (``tools: [...]``), ``min_tool_calls``,
``max_tool_calls`` and ``max_steps`` (``limit: N``), ``no_errors`` (``allow_recoverable: true`` to let recoverable
errors pass), and ``behavior``, which takes several of these at once::

    - type: behavior
      config: {must_use_tools: [web_search], max_tool_calls: 10, no_errors: true}

or one check by name, with the keys of its own assertion type (``{check: no_errors}``,
``{check: must_use_tools, tools: [web_search]}``, ``{check: max_steps, limit: 5}``).

A failed check says what the trace shows, in its message and its ``details``: the tools called
with their counts, the step count and where it comes from, the first error events.

Tool calls are counted from ``tool_call`` events; when the agent's reported
``metrics.tool_calls`` is higher, that count is used. Steps are the response's
``metrics.total_steps``, or the highest ``progress.current_step`` in the trace.
"""

import heapq
from itertools import islice
from typing import Annotated, Any

import anyio
import msgspec

from atp.core.evaluator import EvalContext, Evaluator, check
from atp.core.protocol import ErrorEvent
from atp.core.results import Check
from atp.core.text import printable, shorten

Limit = Annotated[int, msgspec.Meta(ge=0)]

SHOWN_TOOLS = 20
"""How many tools (the most called first) a failed check names, with their call counts."""
SHOWN_ERRORS = 5
"""How many error events a failed ``no_errors`` keeps in its details (the message quotes 3)."""
NAME_CHARS = 80
"""A tool name or error type the agent chose is quoted up to this many characters."""
ERROR_CHARS = 120
"""An error event's message is quoted up to this many characters."""
INLINE_EVENTS = 1000
"""A trace of more events than this is read back on a worker thread, not on the event loop."""


def names_text(tools: list[str]) -> str:
    """Tool names for a check message, comma-separated: a preview (at most 1000 characters), as
    the agent may have called thousands."""
    return shorten(", ".join(tools), 1000) if tools else "none"


def _calls(count: int) -> str:
    return "1 call" if count == 1 else f"{count} calls"


def called_tools(ctx: EvalContext) -> dict[str, int]:
    """The tools the trace shows called, with their call counts: the most called first (then
    by name), at most :data:`SHOWN_TOOLS` of them, each name shortened (the run's secrets
    masked first)."""
    used = ctx.trace.summary.tool_calls
    top = heapq.nsmallest(SHOWN_TOOLS, used.items(), key=lambda item: (-item[1], item[0]))
    return {shorten(name, NAME_CHARS, ctx.masker): count for name, count in top}


def calls_text(ctx: EvalContext) -> str:
    """The tools called, with counts, for a message: ``web_search ×2, file_write ×1`` (one
    line: what the agent named them is escaped)."""
    used = ctx.trace.summary.tool_calls
    if not used:
        return "none"
    listed = ", ".join(f"{name} ×{count}" for name, count in called_tools(ctx).items())
    shown = shorten(listed, 600, ctx.masker)
    shown = printable(shown)
    more = len(used) - SHOWN_TOOLS
    return shown + (f" and {more} more tools" if more > 0 else "")


def refuse_empty_tools(tools: list[str] | None, key: str) -> None:
    """A tool list that checks nothing (a check that would always pass) is a suite error."""
    if tools is None:
        return
    if not tools:
        raise ValueError(f"'{key}' names no tool; the check would always pass")
    if any(not tool.strip() for tool in tools):
        raise ValueError(f"'{key}' has a blank tool name")


def used_tools(ctx: EvalContext) -> dict[str, int]:
    return ctx.trace.summary.tool_calls


def tool_call_count(ctx: EvalContext) -> int:
    return max(ctx.trace.summary.tool_call_count, ctx.response.metrics.tool_calls or 0)


def step_count(ctx: EvalContext) -> int | None:
    reported = ctx.response.metrics.total_steps
    if reported is not None:
        return max(reported, ctx.trace.summary.max_step)
    return ctx.trace.summary.max_step or None


def check_must_use(ctx: EvalContext, tools: list[str], name: str) -> Check:
    used = used_tools(ctx)
    missing = [t for t in tools if t not in used]
    score = 1.0 - len(missing) / len(tools) if tools else 1.0
    if missing:
        return check(
            name,
            False,
            f"expected calls to {names_text(tools)}; not called: {names_text(missing)} "
            f"(called: {calls_text(ctx)})",
            score,
            expected=tools,
            missing=missing,
            actual=called_tools(ctx),
        )
    return check(name, True, f"called {names_text(tools)}", score)


def check_forbidden(ctx: EvalContext, tools: list[str], name: str) -> Check:
    used = used_tools(ctx)
    hits = {t: used[t] for t in tools if t in used}
    if hits:
        shown = names_text([f"{t} ({_calls(count)})" for t, count in hits.items()])
        return check(
            name,
            False,
            f"expected no calls to {names_text(tools)}; called {shown}; all calls: {calls_text(ctx)}",
            expected=tools,
            actual={shorten(t, NAME_CHARS): count for t, count in islice(hits.items(), SHOWN_TOOLS)},
            called=called_tools(ctx),
        )
    return check(name, True, f"no calls to {names_text(tools)}")


def check_max_tool_calls(ctx: EvalContext, limit: int, name: str) -> Check:
    count = tool_call_count(ctx)
    if count <= limit:
        return check(name, True, f"{count} tool calls (limit {limit})")
    in_trace = ctx.trace.summary.tool_call_count
    if count > in_trace:  # the agent's own metrics.tool_calls
        events = f"tool_call events: {calls_text(ctx)}" if in_trace else "the trace has no tool_call events"
        how = f"by the agent's metrics.tool_calls; {events}"
    else:
        how = calls_text(ctx)
    return check(
        name,
        False,
        f"expected at most {limit} tool calls; made {count} ({how})",
        expected=limit,
        actual=count,
        called=called_tools(ctx),
        reported_tool_calls=ctx.response.metrics.tool_calls,
    )


def check_min_tool_calls(ctx: EvalContext, least: int, name: str) -> Check:
    """At least ``least`` tool calls, whatever the tools are called: the check a suite run
    against agents of several frameworks can make (their tool names differ)."""
    count = tool_call_count(ctx)
    if count >= least:
        return check(name, True, f"{count} tool calls (at least {least})")
    return check(
        name,
        False,
        f"expected at least {least} tool calls; made {count} ({calls_text(ctx) if count else 'none'})",
        expected=least,
        actual=count,
        called=called_tools(ctx),
    )


def check_max_steps(ctx: EvalContext, limit: int, name: str) -> Check:
    steps = step_count(ctx)
    if steps is None:
        return check(name, True, f"the agent reported no steps (limit {limit})")
    if steps <= limit:
        return check(name, True, f"{steps} steps (limit {limit})")
    reported = ctx.response.metrics.total_steps
    progress = ctx.trace.summary.max_step or None
    return check(
        name,
        False,
        f"expected at most {limit} steps; took {steps} (metrics.total_steps: "
        f"{'none' if reported is None else reported}; largest current_step of its progress events: "
        f"{'none' if progress is None else progress})",
        expected=limit,
        actual=steps,
        reported_steps=reported,
        progress_steps=progress,
    )


def _error_events(ctx: EvalContext, allow_recoverable: bool, wanted: int) -> list[dict[str, Any]]:
    """The first ``wanted`` error events that count (blocking: reads the trace back)."""
    found: list[dict[str, Any]] = []
    for event in ctx.trace:
        if not isinstance(event, ErrorEvent) or (allow_recoverable and event.payload.recoverable):
            continue
        payload = event.payload
        found.append(
            {
                "error_type": (
                    None
                    if payload.error_type is None
                    else shorten(payload.error_type, NAME_CHARS, ctx.masker)
                ),
                "message": (
                    None if payload.message is None else shorten(payload.message, ERROR_CHARS, ctx.masker)
                ),
                "recoverable": payload.recoverable,
            }
        )
        if len(found) >= wanted:
            break
    return found


async def check_no_errors(ctx: EvalContext, allow_recoverable: bool, name: str) -> Check:
    summary = ctx.trace.summary
    count = summary.unrecoverable_errors if allow_recoverable else summary.errors
    if count == 0:
        kind = "unrecoverable error events" if allow_recoverable else "error events"
        return check(name, True, f"no {kind}")
    wanted = min(count, SHOWN_ERRORS)
    if summary.events > INLINE_EVENTS:
        errors = await anyio.to_thread.run_sync(
            _error_events, ctx, allow_recoverable, wanted, abandon_on_cancel=True
        )
    else:
        errors = _error_events(ctx, allow_recoverable, wanted)
    shown = "; ".join(f"{e['error_type'] or 'error'}: {e['message']!r}" for e in errors[:3])
    more = f" (and {count - 3} more)" if count > 3 else ""
    detail = f": {shown}{more}" if shown else ""
    kind = "unrecoverable errors" if allow_recoverable else "errors"
    return check(
        name,
        False,
        f"expected no {kind}; the trace has {count}{detail}",
        expected=0,
        actual=count,
        errors=errors,
    )


class ToolsConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    tools: list[str]

    def __post_init__(self) -> None:
        refuse_empty_tools(self.tools, "tools")


class LimitConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    limit: Limit


class NoErrorsConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    allow_recoverable: bool = False


class MustUseTools(Evaluator):
    name = "must_use_tools"
    summary = "the agent called every one of the given tools"
    category = "behavior"
    Config = ToolsConfig

    async def evaluate(self, ctx: EvalContext, config: ToolsConfig) -> list[Check]:
        return [check_must_use(ctx, config.tools, self.name)]


class ForbiddenTools(Evaluator):
    name = "forbidden_tools"
    summary = "the agent called none of the given tools"
    category = "behavior"
    Config = ToolsConfig

    async def evaluate(self, ctx: EvalContext, config: ToolsConfig) -> list[Check]:
        return [check_forbidden(ctx, config.tools, self.name)]


class MaxToolCalls(Evaluator):
    name = "max_tool_calls"
    summary = "the agent made at most 'limit' tool calls"
    category = "behavior"
    Config = LimitConfig

    async def evaluate(self, ctx: EvalContext, config: LimitConfig) -> list[Check]:
        return [check_max_tool_calls(ctx, config.limit, self.name)]


class MinToolCalls(Evaluator):
    name = "min_tool_calls"
    summary = "the agent made at least 'limit' tool calls, of any tools"
    category = "behavior"
    Config = LimitConfig

    async def evaluate(self, ctx: EvalContext, config: LimitConfig) -> list[Check]:
        return [check_min_tool_calls(ctx, config.limit, self.name)]


class MaxSteps(Evaluator):
    name = "max_steps"
    summary = "the agent took at most 'limit' steps"
    category = "behavior"
    Config = LimitConfig

    async def evaluate(self, ctx: EvalContext, config: LimitConfig) -> list[Check]:
        return [check_max_steps(ctx, config.limit, self.name)]


class NoErrors(Evaluator):
    name = "no_errors"
    summary = "the trace has no error events (allow_recoverable: true lets recoverable ones pass)"
    category = "behavior"
    Config = NoErrorsConfig

    async def evaluate(self, ctx: EvalContext, config: NoErrorsConfig) -> list[Check]:
        return [await check_no_errors(ctx, config.allow_recoverable, self.name)]


CHECKS = ("must_use_tools", "forbidden_tools", "min_tool_calls", "max_tool_calls", "max_steps", "no_errors")
"""The checks ``behavior`` runs, each named by its key (or by ``check:``)."""


class BehaviorConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Either the checks as keys (``{must_use_tools: [a], no_errors: true}``, several at once),
    or one check by name with the keys of its own assertion type (``{check: no_errors}``,
    ``{check: must_use_tools, tools: [a]}``, ``{check: max_steps, limit: 5}``): the form of
    suites written for other implementations of the ATP design. The check form is converted
    to the key form when the config loads."""

    must_use_tools: list[str] | None = None
    forbidden_tools: list[str] | None = None
    min_tool_calls: Limit | None = None
    max_tool_calls: Limit | None = None
    max_steps: Limit | None = None
    no_errors: bool | None = None
    allow_recoverable: bool = False
    check: str | None = None
    """One check by name (the check form)."""
    tools: list[str] | None = None
    """The tools of ``check: must_use_tools`` or ``check: forbidden_tools``."""
    limit: Limit | None = None
    """The limit of ``check: min_tool_calls``, ``check: max_tool_calls`` or ``check: max_steps``."""

    def __post_init__(self) -> None:
        if self.check is not None:
            self._from_check(self.check)
        elif self.tools is not None or self.limit is not None:
            key = "tools" if self.tools is not None else "limit"
            raise ValueError(f"'{key}' belongs to the check form: give 'check' too (check: ...)")
        refuse_empty_tools(self.must_use_tools, "must_use_tools")
        refuse_empty_tools(self.forbidden_tools, "forbidden_tools")
        if all(getattr(self, key) is None for key in CHECKS):
            raise ValueError(f"behavior needs at least one of {', '.join(CHECKS)}")

    def _from_check(self, name: str) -> None:
        """``check: name`` and its keys, as the key form."""
        if name not in CHECKS:
            raise ValueError(
                f"unknown check {shorten(name, 80)!r} in 'check'; behavior checks are {', '.join(CHECKS)}"
            )
        given = [key for key in CHECKS if getattr(self, key) is not None]
        if given:
            raise ValueError(
                f"give 'check: {name}' alone or the checks as keys, not both ('{given[0]}' is given too)"
            )
        takes = {
            "must_use_tools": "tools",
            "forbidden_tools": "tools",
            "min_tool_calls": "limit",
            "max_tool_calls": "limit",
            "max_steps": "limit",
        }.get(name)
        for key in ("tools", "limit"):
            if key != takes and getattr(self, key) is not None:
                raise ValueError(f"'{key}' does not apply to check: {name}")
        if takes is None:  # no_errors
            self.no_errors = True
        else:
            value = getattr(self, takes)
            if value is None:
                raise ValueError(f"check: {name} needs '{takes}'")
            if takes == "tools":
                refuse_empty_tools(value, "tools")
            setattr(self, name, value)
        self.tools = self.limit = None


class Behavior(Evaluator):
    name = "behavior"
    summary = (
        "several trace checks at once: must_use_tools, forbidden_tools, min_tool_calls, max_tool_calls, "
        "max_steps, no_errors"
    )
    category = "behavior"
    Config = BehaviorConfig

    async def evaluate(self, ctx: EvalContext, config: BehaviorConfig) -> list[Check]:
        checks = []
        if config.must_use_tools is not None:
            checks.append(check_must_use(ctx, config.must_use_tools, "behavior:must_use_tools"))
        if config.forbidden_tools is not None:
            checks.append(check_forbidden(ctx, config.forbidden_tools, "behavior:forbidden_tools"))
        if config.min_tool_calls is not None:
            checks.append(check_min_tool_calls(ctx, config.min_tool_calls, "behavior:min_tool_calls"))
        if config.max_tool_calls is not None:
            checks.append(check_max_tool_calls(ctx, config.max_tool_calls, "behavior:max_tool_calls"))
        if config.max_steps is not None:
            checks.append(check_max_steps(ctx, config.max_steps, "behavior:max_steps"))
        if config.no_errors:
            checks.append(await check_no_errors(ctx, config.allow_recoverable, "behavior:no_errors"))
        return checks
