"""What an attempt at a run brought back, and what it means for the run.

:class:`Tried` is one attempt: its request and trace, what the adapter returned or why nothing
came back. :func:`read_answer` turns it into an :class:`Answer`: the agent's response checked
against its request (one made up when nothing usable came back: a timeout, a crash, a limit
passed), the run's error and error code (:mod:`atp.core.error_codes`), the agent's error details
and trace id, bounded, and whether the answer is the one the test expects (``expect:``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from atp.core.error_codes import (
    TIMEOUT,
    Expectation,
    bounded_code,
    bounded_details,
    bounded_trace_id,
)
from atp.core.protocol import PROTOCOL_VERSION, ATPRequest, ATPResponse, sane_metrics
from atp.core.results import Check, utcnow
from atp.core.retry import Fault
from atp.core.run_limits import RunLimits
from atp.core.secrets import Masker
from atp.core.service_runs import Entered
from atp.core.suite import Test
from atp.core.text import describe, shorten
from atp.core.trace import RunTrace

MAX_ERROR_CHARS = 4000
"""An agent's error text is kept up to this many characters."""

NOTHING: Any = object()
"""What an adapter's ``execute`` returned before it returned."""


class Tried:
    """One attempt at a run: its request and trace, what came back or why nothing did."""

    __slots__ = (
        "could_not_run", "duration", "entered", "error", "events_file", "fault", "limits", "log_file",
        "plugin_traceback", "request", "returned", "started_at", "timed_out", "timeout", "trace",
    )  # fmt: skip

    def __init__(self, request: ATPRequest, events_file: str, log_file: str) -> None:
        self.request = request
        self.events_file = events_file
        self.log_file = log_file
        self.trace: RunTrace | None = None
        self.returned: Any = NOTHING
        self.error: str | None = None
        self.could_not_run = False
        self.timed_out = False
        self.timeout = 0.0
        self.plugin_traceback: str | None = None
        self.entered: Entered | None = None
        self.fault: Fault | None = None
        self.limits: RunLimits | None = None
        """The task's limits held while the agent ran; :attr:`RunLimits.passed` the one it passed."""
        self.duration = 0.0
        self.started_at = utcnow()


class Answer:
    """What a run's attempt amounts to, before evaluation (see :func:`read_answer`)."""

    __slots__ = ("code", "could_not_run", "details", "error", "expected", "response", "trace_id")

    def __init__(self, response: ATPResponse, error: str | None, could_not_run: bool) -> None:
        self.response = response
        self.error = error
        self.could_not_run = could_not_run
        self.code: str | None = None
        """The agent's ``error_code``, bounded, or the code of what ATP stopped the run for."""
        self.details: dict[str, Any] | None = None
        self.trace_id: str | None = None
        self.expected = False
        """The agent's own answer is the one the test expects (``expect:``)."""


def read_answer(tried: Tried, test: Test, masker: Masker | None, adapter: Callable[[], str]) -> Answer:
    """The attempt's response checked against its request (one made up when nothing, or nothing
    usable, came back), the run's error and its code, and whether the run could not be made.
    ``adapter`` names the adapter plugin, for an error that is its fault."""
    trace = tried.trace
    assert trace is not None
    task_id = tried.request.task_id
    error, could_not_run = tried.error, tried.could_not_run
    response: ATPResponse | None = None
    if isinstance(tried.returned, ATPResponse):
        response = tried.returned
    elif tried.returned is not NOTHING:
        error = f"{adapter()} returned {describe(tried.returned)}, not an ATPResponse"
        could_not_run = True
    if response is not None and response.task_id != task_id:
        error = f"agent answered with task_id {response.task_id!r}, but the request's task_id was {task_id!r}"
        response = None
    passed = tried.limits.passed if tried.limits is not None else None
    if tried.timed_out and passed is None:
        error = f"timed out after {tried.timeout:g} s; the agent was stopped"
        entered = tried.entered
        if entered is not None and entered.pending is not None:
            error = f"timed out after {tried.timeout:g} s while service {entered.pending!r} was getting ready"
            could_not_run = True
    answer = Answer(_made_up(tried, error) if response is None else response, error, could_not_run)
    if response is not None:
        answer.code = bounded_code(response.error_code, masker)
        answer.details = bounded_details(response.error_details, masker)
        answer.trace_id = bounded_trace_id(response.trace_id, masker)
        answer.expected = (
            passed is None and test.expect is not None and test.expect.met_by(response.status, answer.code)
        )
        answer.response, answer.error = _reported(response, error, trace, masker, answer.expected)
    elif tried.timed_out and passed is None:
        answer.code = TIMEOUT
    if passed is not None:  # whatever came back, or did not
        answer.code, answer.expected = passed.code, False
        answer.error = passed.reason if answer.error is None else f"{passed.reason}; {answer.error}"
        answer.response = msgspec.structs.replace(answer.response, status="failed")
    if answer.error is not None:
        if masker is not None:
            answer.error = masker.text(answer.error)  # before cutting: a cut must not split a secret
        answer.error = shorten(answer.error, MAX_ERROR_CHARS)
    return answer


def _made_up(tried: Tried, error: str | None) -> ATPResponse:
    """The response of an attempt that brought none (usable) back."""
    assert tried.trace is not None
    return ATPResponse(
        version=PROTOCOL_VERSION,
        task_id=tried.request.task_id,
        status="timeout"
        if tried.timed_out and (tried.limits is None or tried.limits.passed is None)
        else "failed",
        artifacts=[],
        metrics=tried.trace.summary.metrics(round(tried.duration, 6)),
        error=error,
    )


def _reported(
    response: ATPResponse, error: str | None, trace: RunTrace, masker: Masker | None, expected: bool
) -> tuple[ATPResponse, str | None]:
    """An agent's own response: its status read (a failure the test expects is no error), its
    metrics checked against their bounds (a value out of them fails the run, and counts as the
    most a metric can be)."""
    metrics, problems = sane_metrics(response.metrics)
    if problems:
        response = msgspec.structs.replace(response, metrics=metrics)
    if response.status != "completed" and not expected:
        error = response.error or f"agent reported status {response.status!r}"
    elif response.error and response.status == "completed":
        trace.warn(
            f"the agent reported status 'completed' with an error: {shorten(response.error, masker=masker)}"
        )
    if problems:
        bounds = f"the agent reported metrics out of bounds: {'; '.join(problems)}"
        error = bounds if error is None else f"{bounds}; {error}"  # (the agent's may be cut)
    return response, error


def expectation_check(expect: Expectation, answer: Answer, masker: Masker | None) -> Check:
    """The check of a test's ``expect:``: whether the agent answered as the test expects."""
    response = answer.response
    got = f"status {response.status}" + (
        f" with error_code {answer.code}" if answer.code else " (no error_code)"
    )
    actual: dict[str, Any] = {"status": response.status, "error_code": answer.code}
    if response.error:
        actual["error"] = shorten(response.error, 500, masker)
    if answer.expected:
        message = f"the agent answered {got}, as the test expects"
    else:
        message = f"expected {expect.describe()}; the agent answered {got}"
    return Check(
        name="expect",
        passed=answer.expected,
        score=1.0 if answer.expected else 0.0,
        message=message,
        details={"expected": msgspec.to_builtins(expect), "actual": actual},
    )
