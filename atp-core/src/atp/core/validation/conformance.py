"""The adapter's checks of its own protocol (:meth:`~atp.core.adapter.Adapter.conformance`: an
Agent Interface Standard agent's discovery endpoints, say), shown like ``atp validate``'s own."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from atp.core.validation.exceptions import described, single_exception
from atp.core.validation.results import CHECKS, CheckResult

if TYPE_CHECKING:
    from atp.core.adapter import Adapter
    from atp.core.validation.context import CheckContext

__all__ = ["conformance_checks"]


async def conformance_checks(adapter: Adapter, context: CheckContext) -> list[CheckResult]:
    """The results of the adapter's conformance checks, within the time limit: one each, or one
    failure when they could not be run (they took too long, raised, or returned no list of
    :class:`~atp.core.adapter.ConformanceCheck`)."""
    import anyio

    from atp.core.adapter import ConformanceCheck

    conformance = getattr(adapter, "conformance", None)
    if conformance is None:
        return []
    started = time.perf_counter()
    failure: str | None = None
    checks: Any = []
    try:
        with anyio.fail_after(context.timeout):
            checks = await conformance()
    except TimeoutError:
        failure = f"the adapter's conformance checks took more than {context.timeout:g} s"
    except Exception as raised:
        exc = single_exception(raised)
        context.debug(exc)
        failure = f"the {context.agent_type!r} adapter's conformance checks failed: {described(exc)}"
    if failure is None and (
        not isinstance(checks, list) or not all(isinstance(c, ConformanceCheck) for c in checks)
    ):
        failure = (
            f"the {context.agent_type!r} adapter's conformance() returned {type(checks).__name__}, "
            "not a list of ConformanceCheck"
        )
    if failure is not None:
        return [
            CheckResult(
                "conformance",
                "conformance",
                "failed",
                context.shown(failure),
                fix="check that the agent keeps running; --debug shows the traceback of an adapter's bug",
                seconds=time.perf_counter() - started,
            )
        ]
    return [
        CheckResult(
            check.name if check.name not in CHECKS else f"{context.agent_type}:{check.name}",
            context.shown(check.title, 60),
            "passed" if check.passed else "failed",
            context.shown(check.message),
            seen=[context.shown(line) for line in check.seen],
            fix=None if check.passed else check.fix,
            notes=[context.shown(note) for note in check.notes],
        )
        for check in checks
    ]
