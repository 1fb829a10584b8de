"""The first check of ``atp validate``, ``reachable``: the adapter takes the agent's settings and
starts, and the agent's health, by its own report where it gives one, lets it be sent requests."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal

from atp.core.validation.exceptions import described, single_exception
from atp.core.validation.results import CHECKS, CheckResult

if TYPE_CHECKING:
    from atp.core.adapter import Adapter, Health
    from atp.core.validation.context import CheckContext

__all__ = ["Reached", "check_reachable", "refused_settings"]

Reached = Literal["yes", "unhealthy", "no"]
"""``yes``: the adapter started and the agent is healthy enough to be sent requests;
``unhealthy``: it answers but reports itself unhealthy; ``no``: nothing to talk to."""

NAME, TITLE = "reachable", CHECKS["reachable"]
NOT_READY_FIX = "start the agent (or wait until it is ready), then validate it again"


def refused_settings(exc: BaseException, context: CheckContext) -> CheckResult:
    """The failure of an adapter that could not be made: it refused the agent's settings."""
    return CheckResult(
        NAME,
        TITLE,
        "failed",
        "the adapter refused the agent's settings",
        seen=[context.shown(described(exc))],
        fix="correct the agent's definition (atp schema config shows the settings of each type)",
    )


async def check_reachable(
    adapter: Adapter, context: CheckContext, started: float
) -> tuple[Reached, CheckResult]:
    """Start the adapter and ask the agent's health, within the time limit (``started``: when
    the check began, by :func:`time.perf_counter`)."""
    import anyio

    from atp.core.adapter import AgentUnhealthy

    step = "start"
    health: Any = None
    try:
        with anyio.fail_after(context.timeout):
            await adapter.open(masker=context.masker)
            step = "health"
            health = await adapter.health()
    except TimeoutError:
        return "no", CheckResult(
            NAME,
            TITLE,
            "failed",
            f"the adapter's {step}() took more than {context.timeout:g} s",
            fix="check that the agent is running and its definition points at it; or give it "
            "more time with --timeout",
        )
    except Exception as raised:
        exc = single_exception(raised)
        context.debug(exc)
        if isinstance(exc, AgentUnhealthy):
            return "unhealthy", unhealthy(
                exc.health, [context.shown(str(exc))], time.perf_counter() - started, context
            )
        return "no", CheckResult(
            NAME,
            TITLE,
            "failed",
            "the agent cannot be started" if step == "start" else "the health check failed",
            seen=[context.shown(described(exc))],
            fix="check the agent's definition (its command, address or module) and that the agent runs",
        )
    return judge_health(adapter, health, time.perf_counter() - started, context)


def judge_health(
    adapter: Adapter, health: Any, seconds: float, context: CheckContext
) -> tuple[Reached, CheckResult]:
    """What the health an adapter returned (maybe not a Health: a bug) says of the agent."""
    from atp.core.adapter import Adapter, Health

    if not isinstance(health, Health):
        return "no", CheckResult(
            NAME,
            TITLE,
            "failed",
            f"the {context.agent_type!r} adapter's health() returned {type(health).__name__}, not a Health "
            "(a bug in it, not in the agent)",
            fix="report it to the adapter's authors",
        )
    detail = [context.shown(health.detail)] if health.detail else []
    if health.status == "unreachable":
        return "no", CheckResult(
            NAME,
            TITLE,
            "failed",
            "the agent's health check cannot reach it",
            seen=detail,
            fix=NOT_READY_FIX,
            seconds=seconds,
        )
    if not health.usable and type(adapter).health is Adapter.health:
        # (the default health(): the adapter's plain health check said no; it says no more)
        return "unhealthy", CheckResult(
            NAME,
            TITLE,
            "failed",
            "the agent's health check says it is not healthy",
            seen=detail,
            fix=NOT_READY_FIX,
            seconds=seconds,
        )
    if not health.usable:
        return "unhealthy", unhealthy(health, detail, seconds, context)
    if health.status == "healthy":
        summary = "the adapter started and the health check passed"
        if health.detail:
            summary = f"the adapter started and the agent is healthy ({context.shown(health.detail, 120)})"
        return "yes", CheckResult(NAME, TITLE, "passed", summary, seconds=seconds)
    words = (
        "reports itself degraded" if health.status == "degraded" else "gives no health status ATP can read"
    )
    return "yes", CheckResult(
        NAME,
        TITLE,
        "passed",
        f"the adapter started; the agent {words}",
        notes=detail or [f"health status {health.status}"],
        seconds=seconds,
    )


def unhealthy(health: Health, seen: list[str], seconds: float, context: CheckContext) -> CheckResult:
    """The agent answers, but its health check (or its own report) says it is unhealthy."""
    return CheckResult(
        NAME,
        TITLE,
        "failed",
        f"the agent's health check says it is {health.status}",
        seen=seen or ([context.shown(health.detail)] if health.detail else []),
        fix="make the agent healthy (start it, wait until it is ready, or fix what its own report "
        "says is wrong), then validate it again",
        seconds=seconds,
    )
