"""The evaluators of a suite's runs: made once each, run on each run's response and trace
within their time limits, closed when the runs are over.

An evaluator that raises, returns something that is not a list of checks or runs past its
time limit gives its check a failure saying so, and the run is an error (it could not be
checked); an ``async`` evaluator that holds the event loop is named in a warning once. A
critical assertion's checks are marked so in their details.

``negate: true`` on an assertion reverses the verdicts of the checks its evaluator returned, here
and for every evaluator alike (:func:`negated`); an evaluator that could not check the run is
still an error, a skipped check still skipped.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio

from atp.core.errors import AtpError, single_exception
from atp.core.evaluator import (
    UNMET,
    CannotEvaluate,
    EvalContext,
    Evaluator,
    EvaluatorResultError,
    StepTimer,
    checked_result,
    is_async,
)
from atp.core.hooks import FailureSink
from atp.core.plugins import Plugins, format_exception
from atp.core.results import Check
from atp.core.service_runs import SERVICE_LEAVE_SECONDS
from atp.core.suite import Assertion, Test
from atp.core.text import shorten

__all__ = ["BLOCKING_STEP_SECONDS", "NEGATED_FAIL", "NEGATED_PASS", "NOT_NEGATED", "Evaluation", "negated"]

logger = logging.getLogger("atp.runner")

BLOCKING_STEP_SECONDS = 0.5
"""An ``async`` evaluator holding the event loop this long in one step is warned about: every
other run in flight waited for it."""
MAX_TRACEBACK_CHARS = 8000


NEGATED_PASS = "negated, so passed: "
NEGATED_FAIL = "negated, so failed: "
NOT_NEGATED = "negated, but nothing to judge, so failed: "


def negated(checks: list[Check]) -> None:
    """Reverse the verdicts of a ``negate: true`` assertion's checks, in place: ``passed``
    flipped, the score ``1 - score``, the message prefixed with what happened (``negated, so
    failed: report.md contains text '42' (line 3)``) and ``details.negated: true``. A skipped
    check stays skipped; a failed check that found nothing to judge (``details.unmet``: its
    artifact is missing, say, :func:`~atp.core.evaluator.unmet`) stays failed."""
    for item in checks:
        if item.skipped is not None:
            continue
        details = dict(item.details or {})
        details["negated"] = True
        item.details = details
        if details.get(UNMET) is True and not item.passed:
            item.message = NOT_NEGATED + item.message
            continue
        item.message = (NEGATED_FAIL if item.passed else NEGATED_PASS) + item.message
        item.passed = not item.passed
        item.score = 1.0 - item.score


class Evaluation:
    """The evaluators of one suite's runs."""

    def __init__(
        self,
        plugins: Plugins,
        settings: Callable[[str], dict[str, Any]],
        secrets: Mapping[str, str],
        failed: FailureSink,
    ) -> None:
        self._plugins = plugins
        self._settings = settings
        self._secrets = secrets
        self._failed = failed
        self._evaluators: dict[str, Evaluator] = {}
        self._limits: dict[str, float] = {}
        self._warned_blocking: set[str] = set()
        self.suite_dir: Path | None = None
        """The folder of the suite file (:attr:`~atp.core.evaluator.EvalContext.suite_dir`)."""

    def evaluator(self, name: str) -> Evaluator:
        """The evaluator of assertion type ``name``, made on first use."""
        evaluator = self._evaluators.get(name)
        if evaluator is None:
            evaluator_cls = self._plugins.evaluator(name)
            evaluator = evaluator_cls(self._settings(evaluator_cls.settings_name()))
            evaluator.secrets = self._secrets
            self._evaluators[name] = evaluator
        return evaluator

    def timeout(self, name: str) -> float:
        """The time limit of evaluator ``name``: its setting ``timeout_seconds``, else its default."""
        limit = self._limits.get(name)
        if limit is None:
            evaluator_cls = self._plugins.evaluator(name)
            value = self._settings(evaluator_cls.settings_name()).get("timeout_seconds")
            limit = evaluator_cls.default_timeout
            if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf:
                limit = float(value)
            self._limits[name] = limit
        return limit

    async def check(self, test: Test, ctx: EvalContext) -> tuple[list[Check], list[Check], bool]:
        """The checks of every assertion of the test on one run, those of quality evaluators
        apart, and ``False`` when an evaluator could not check the run."""
        checks: list[Check] = []
        quality: list[Check] = []
        ok = True
        for assertion in test.assertions:
            produced, done = await self.evaluate(assertion, ctx)
            if assertion.critical:
                for item in produced:
                    item.details = {**(item.details or {}), "critical": True}
            ok = ok and done
            checks.extend(produced)
            if self.evaluator(assertion.type).category == "quality":
                quality.extend(produced)
        return checks, quality, ok

    async def evaluate(self, assertion: Assertion, ctx: EvalContext) -> tuple[list[Check], bool]:
        """The assertion's checks, named; ``False`` when the evaluator itself failed, returned
        something that is not a list of checks, or took longer than its time limit."""
        limit = self.timeout(assertion.type)
        evaluator = self.evaluator(assertion.type)
        failure: str | None = None
        details: dict[str, Any] | None = None
        produced: list[Check] = []
        with anyio.move_on_after(limit) as scope:
            try:
                produced = checked_result(
                    self.label(assertion.type), await self._returned(evaluator, assertion, ctx)
                )
            except AtpError as exc:
                failure = str(exc)
                if not isinstance(exc, EvaluatorResultError):
                    failure = f"evaluator {assertion.type!r} could not check this run: {exc}"
                if isinstance(exc, CannotEvaluate) and exc.details:
                    details = dict(exc.details)
            except Exception as exc:
                failure = (
                    f"{self.label(assertion.type)} could not check this run: {type(exc).__name__}: {exc}"
                )
                details = {"traceback": shorten(format_exception(exc), MAX_TRACEBACK_CHARS, ctx.masker)}
        if scope.cancelled_caught:
            failure = (
                f"evaluator {assertion.type!r} did not finish within {limit:g} s "
                f"(evaluators.{type(evaluator).settings_name()}.timeout_seconds)"
            )
        if failure is not None:
            label = assertion.name or assertion.type
            return [Check(name=label, passed=False, score=0.0, message=failure, details=details)], False
        if assertion.name:
            if len(produced) == 1:
                produced[0].name = assertion.name
            else:
                for item in produced:
                    item.name = f"{assertion.name}:{item.name}"
        if assertion.negate:
            negated(produced)
        return produced, True

    async def _returned(self, evaluator: Evaluator, assertion: Assertion, ctx: EvalContext) -> Any:
        """What the evaluator returned; a plain ``def evaluate`` runs in a worker thread, off
        the event loop."""
        if is_async(evaluator):
            timer = StepTimer(evaluator.evaluate(ctx, assertion.config))
            returned = await timer
            self._warn_blocking(assertion.type, timer.longest)
            return returned
        return await anyio.to_thread.run_sync(
            evaluator.evaluate, ctx, assertion.config, abandon_on_cancel=True
        )

    def label(self, name: str) -> str:
        """The evaluator ``name`` and its plugin, for messages."""
        return f"evaluator {name!r} of {self._plugins.owner('evaluator', name)}"

    def _warn_blocking(self, name: str, longest: float) -> None:
        if longest < BLOCKING_STEP_SECONDS or name in self._warned_blocking:
            return
        self._warned_blocking.add(name)
        logger.warning(
            "evaluator %r of %s held the event loop for %.2f s in one step: runs in flight waited "
            "for it, whatever --parallel says. Do blocking work in a thread "
            "(await anyio.to_thread.run_sync(...)) or write 'def evaluate' (run in a thread)",
            name,
            self._plugins.owner("evaluator", name),
            longest,
        )

    async def aclose(self) -> None:
        """Let every evaluator made release what it holds (a judge's connections), each within
        :data:`~atp.core.service_runs.SERVICE_LEAVE_SECONDS`; a failure is warned about and
        recorded, the results stand."""
        for name, evaluator in self._evaluators.items():
            try:
                with anyio.fail_after(SERVICE_LEAVE_SECONDS):
                    await evaluator.aclose()
            except Exception as exc:
                owner = self._plugins.owner_name("evaluator", name) or name
                self._failed(owner, f"evaluator {name!r} aclose", single_exception(exc))

    def __bool__(self) -> bool:
        return bool(self._evaluators)
