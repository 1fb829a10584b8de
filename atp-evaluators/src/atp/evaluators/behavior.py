"""Evaluators of how the agent worked, read from its event trace.

``must_use_tools`` and ``forbidden_tools`` (``tools: [...]``), ``max_tool_calls`` and
``max_steps`` (``limit: N``), ``no_errors`` (``allow_recoverable: true`` to let recoverable
errors pass), and ``behavior``, which takes several of these at once::

    - type: behavior
      config: {must_use_tools: [web_search], max_tool_calls: 10, no_errors: true}

Tool calls are counted from ``tool_call`` events; when the agent's reported
``metrics.tool_calls`` is higher, that count is used. Steps are the response's
``metrics.total_steps``, or the highest ``progress.current_step`` in the trace.
"""

from typing import Annotated

import msgspec

from atp.core.evaluator import EvalContext, Evaluator, check
from atp.core.protocol import ErrorEvent
from atp.core.results import Check
from atp.core.text import shorten

Limit = Annotated[int, msgspec.Meta(ge=0)]


def _names(tools: list[str]) -> str:
    """Tool names for a check message: a preview, as the agent may have called thousands."""
    return shorten(", ".join(tools), 1000) if tools else "none"


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
            name, False, f"expected calls to {_names(tools)}; not called: {_names(missing)} "
            f"(called: {_names(sorted(used))})", score
        )
    return check(name, True, f"called {_names(tools)}", score)


def check_forbidden(ctx: EvalContext, tools: list[str], name: str) -> Check:
    used = used_tools(ctx)
    hits = [f"{t} ({used[t]} calls)" for t in tools if t in used]
    if hits:
        return check(name, False, f"expected no calls to {_names(tools)}; called {_names(hits)}")
    return check(name, True, f"no calls to {_names(tools)}")


def check_max_tool_calls(ctx: EvalContext, limit: int, name: str) -> Check:
    count = tool_call_count(ctx)
    if count > limit:
        return check(name, False, f"expected at most {limit} tool calls; made {count}")
    return check(name, True, f"{count} tool calls (limit {limit})")


def check_max_steps(ctx: EvalContext, limit: int, name: str) -> Check:
    steps = step_count(ctx)
    if steps is None:
        return check(name, True, f"the agent reported no steps (limit {limit})")
    if steps > limit:
        return check(name, False, f"expected at most {limit} steps; took {steps}")
    return check(name, True, f"{steps} steps (limit {limit})")


def check_no_errors(ctx: EvalContext, allow_recoverable: bool, name: str) -> Check:
    summary = ctx.trace.summary
    count = summary.unrecoverable_errors if allow_recoverable else summary.errors
    if count == 0:
        kind = "unrecoverable error events" if allow_recoverable else "error events"
        return check(name, True, f"no {kind}")
    first = next(
        (
            e
            for e in ctx.trace
            if isinstance(e, ErrorEvent) and not (allow_recoverable and e.payload.recoverable)
        ),
        None,
    )
    detail = ""
    if first is not None:
        error_type = shorten(first.payload.error_type or "error")
        message = first.payload.message
        detail = f"; first: {error_type}: {None if message is None else shorten(message)!r}"
    kind = "unrecoverable errors" if allow_recoverable else "errors"
    return check(name, False, f"expected no {kind}; the trace has {count}{detail}")


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
        return [check_no_errors(ctx, config.allow_recoverable, self.name)]


class BehaviorConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    must_use_tools: list[str] | None = None
    forbidden_tools: list[str] | None = None
    max_tool_calls: Limit | None = None
    max_steps: Limit | None = None
    no_errors: bool | None = None
    allow_recoverable: bool = False

    def __post_init__(self) -> None:
        refuse_empty_tools(self.must_use_tools, "must_use_tools")
        refuse_empty_tools(self.forbidden_tools, "forbidden_tools")
        if all(
            value is None
            for value in (
                self.must_use_tools,
                self.forbidden_tools,
                self.max_tool_calls,
                self.max_steps,
                self.no_errors,
            )
        ):
            raise ValueError(
                "behavior needs at least one of must_use_tools, forbidden_tools, "
                "max_tool_calls, max_steps, no_errors"
            )


class Behavior(Evaluator):
    name = "behavior"
    summary = "several trace checks at once: must_use_tools, forbidden_tools, max_tool_calls, max_steps, no_errors"
    category = "behavior"
    Config = BehaviorConfig

    async def evaluate(self, ctx: EvalContext, config: BehaviorConfig) -> list[Check]:
        checks = []
        if config.must_use_tools is not None:
            checks.append(check_must_use(ctx, config.must_use_tools, "behavior:must_use_tools"))
        if config.forbidden_tools is not None:
            checks.append(check_forbidden(ctx, config.forbidden_tools, "behavior:forbidden_tools"))
        if config.max_tool_calls is not None:
            checks.append(check_max_tool_calls(ctx, config.max_tool_calls, "behavior:max_tool_calls"))
        if config.max_steps is not None:
            checks.append(check_max_steps(ctx, config.max_steps, "behavior:max_steps"))
        if config.no_errors:
            checks.append(check_no_errors(ctx, config.allow_recoverable, "behavior:no_errors"))
        return checks

